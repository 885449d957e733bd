"""What the ``vacate.volume`` collection's action plugins do on the controller, once Ansible
has reached a host (:class:`vacate.remote.modules.ModuleReach`): the check decided here, the
same answer as ``check --inventory`` (:func:`vacate.flow.fleet.look`, the same
``vacate.check/1`` document), and the plan written here. Each returns the task's result as
JSON values; Ansible's own errors (a host it cannot reach) pass through untouched."""

from __future__ import annotations

import os

from vacate.flow import fleet


def check(name: str, reach, path: str, *, scan_tree: bool = True,
          configured: bool = True) -> dict:
    """The ``vacate.volume.check`` result for one host: the ``vacate.check/1`` document's
    fields, with ``safe_to_unmount``, ``blockers`` and ``next_actions`` on top. ``failed``
    only where vacate could not look (its ``msg`` says why); a host in use is data."""
    from vacate.output import fleetfmt

    checked = fleet.look(name, reach.label, reach, path, scan_tree=scan_tree,
                         configured=configured)
    doc = fleetfmt.host_doc(checked, path)
    verdict = doc["verdict"]
    # "warnings" is Ansible's (it shows them as its own): vacate's go as "problems"
    doc["problems"] = doc.pop("warnings")
    out = {**doc, "changed": False, "safe_to_unmount": verdict["safe_to_unmount"],
           "blockers": verdict["blockers"],
           "next_actions": [b["action"] for b in verdict["blockers"]]}
    if checked.error is not None:
        out.update(failed=True, msg=checked.error)
    return out


PLAN_OPTIONS = ("keep", "archive", "delete", "migrate", "archive_to", "grace", "no_snapshot",
                "mask_references", "free_volume", "archive_format", "verify_pool")


def plan(reach, path: str, dest: str, *, keep=(), archive=(), delete=(), migrate=None,
         archive_to: str | None = None, grace: float = 10.0, no_snapshot: bool = False,
         mask_references: bool = False, free_volume: bool = False,
         archive_format: str = "tar", verify_pool: str | None = None,
         check_mode: bool = False) -> dict:
    """``vacate plan PATH -o DEST`` on the host ``reach`` leads to, the plan written here at
    ``dest`` (not in check mode: then only what it would be). ``migrate``: P -> DEST (a mapping,
    or ``P=DEST`` strings). ``changed``: the file at ``dest`` is new or differs."""
    import hashlib

    from vacate.flow.plan import plan as make
    from vacate.observing.errors import UsageError
    from vacate.observing.fsio import write_atomic

    migrations = {}
    items = migrate.items() if isinstance(migrate, dict) else \
        (m.partition("=")[::2] for m in (migrate or ()))
    for src, to in items:
        if not src or not str(to).startswith("/"):
            raise UsageError(f"migrate {src}={to}: expected P=DEST with DEST an absolute "
                             "directory")
        migrations[src] = os.path.normpath(to)
    overrides = [(a, p) for a, ps in (("keep", keep), ("archive", archive),
                                      ("delete", delete)) for p in ps]
    dest = os.path.abspath(dest)
    if not check_mode:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
    result = make(path, reach=reach, archive_to=archive_to, overrides=overrides,
                  grace_s=float(grace), snapshot=not no_snapshot, outputs=(dest,),
                  mask_references=mask_references, migrations=migrations,
                  free_volume=bool(free_volume), archive_format=archive_format,
                  verify_pool=verify_pool)
    text = result.dumps().encode("ascii")
    try:
        with open(dest, "rb") as f:
            before = f.read()
    except FileNotFoundError:
        before = None
    changed = before != text
    if changed and not check_mode:
        write_atomic(dest, text)
    return {"changed": changed, "dest": dest, "plan_sha256": hashlib.sha256(text).hexdigest(),
            "blocked": list(result.blocked), "machine_id": result.observation.host.machine_id,
            "items": [{"path": it.path, "action": it.action} for it in result.items],
            "steps": [{"id": s.id, "kind": s.kind, "summary": s.summary} for s in result.steps]}


def observed(observation: dict, dest: str, max_bytes: int, *, write: bool) -> dict:
    """The ``vacate.volume.observe`` result: the observation (``vacate.observation/1``) when
    its JSON is at most ``max_bytes``, else only its summary and the file at ``dest`` (here)
    it was written to; ``write``: written to ``dest`` whatever its size. Nothing of the host
    changes: ``changed`` is false."""
    from vacate.observing.fsio import write_atomic
    from vacate.observing.model.observation import Observation
    from vacate.output import jsonfmt

    obs = Observation.from_json(observation)        # checked: what came back is one
    text = jsonfmt.dumps(obs.to_json()).encode("ascii")
    out = {"changed": False, "size_bytes": len(text), "summary": _summary(obs),
           "observation": observation, "observation_file": None}
    if write or len(text) > max_bytes:
        dest = os.path.abspath(dest)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        write_atomic(dest, text)
        out["observation_file"] = dest
    if len(text) > max_bytes:
        out["observation"] = None
    return out


def _summary(obs) -> dict:
    return {"target": obs.target.as_json(), "host": obs.host.hostname,
            "machine_id": obs.host.machine_id,
            "consumers": len(obs.consumers),
            "problems": [p.as_json() for p in obs.problems]}


def apply(reach, plan_path: str, plan_sha256: str, *, check_mode: bool = False,
          diff: bool = False) -> dict:
    """``vacate apply PLAN`` on the host ``reach`` leads to (Ansible's connection; the acting
    half sent as module code), the plan approved as the file whose sha256 is
    ``plan_sha256`` (a plan changed since is refused, before anything is asked of the host),
    its journal beside it here. ``check_mode``: the dry run. ``changed``: a step acted in
    this run (not one an earlier run did, not one found done, not a check that runs every
    time)."""
    from vacate.flow.apply import Refused, read
    from vacate.flow.apply import apply as carry_out
    from vacate.observing.model.journal import path_for

    plan_path = os.path.abspath(plan_path)
    got = read(plan_path)
    if got.sha256 != (plan_sha256 or "").strip().lower():
        raise Refused(f"{plan_path} is not the plan approved (its sha256 is {got.sha256}, "
                      f"not {plan_sha256}): nothing was changed",
                      hint="review the plan again and give its plan_sha256")
    result = carry_out(plan_path, loaded=got, dry_run=check_mode, reach=reach)
    steps = [{"id": s.id, "kind": s.kind, "summary": s.summary, "status": s.status,
              "detail": s.detail, "earlier": s.earlier} for s in result.steps]
    from vacate.act.registry import KINDS

    # a step that acted in this run: not one done earlier, not a check run every time
    acted = [s for s in result.steps if s.status == "ok" and not s.earlier
             and s.started is not None and not KINDS[s.kind][0].every_time]
    out = {"changed": bool(acted) and not check_mode, "steps": steps,
           "journal": None if check_mode else path_for(plan_path),
           "complete": result.complete and not check_mode,
           "manual": [s["id"] for s in steps if s["status"] == "manual"]}
    if result.failed is not None:
        out.update(failed=True, msg=f"step {result.failed.id} ({result.failed.kind}) failed: "
                                    f"{result.failed.detail}; a rerun resumes there")
    if diff:
        out["diff"] = {"prepared": "".join(
            f"{s['status']:<8} {s['id']} {s['summary']}"
            + (f" ({s['detail']})" if s["detail"] else "") + "\n" for s in steps)}
    return out
