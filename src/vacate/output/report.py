"""``vacate.report/1``: what was there, what used it, what was done, what remains, and what
would be done — from a saved observation, a plan, or a plan and its journal (nothing on the
machine is read but the journal and the manifests of local archives, for the part holding a
path). The terminal and the page render this document; neither reads anything else."""

from __future__ import annotations

from vacate.decide.teardown import deleted as deletes_item
from vacate.observing.model import codec
from vacate.observing.model.journal import check_belongs, path_for, states_of
from vacate.observing.model.observation import Observation
from vacate.observing.model.plan import Plan
from vacate.output.report_migrate import action_text, migrations
from vacate.output.report_refs import parts_of, references

SCHEMA = "vacate.report/1"


def _volume(obs: Observation) -> dict:
    """The volume as a person names it: host, device, filesystem, dataset, size, used."""
    t = obs.target
    return {"host": obs.host.hostname, "via": obs.host.via or None, "path": t.path, "device": t.mount.source,
            "fstype": t.mount.fstype, "dataset": t.zfs_dataset, "size_bytes": t.size_bytes,
            "used_bytes": t.used_bytes, "observed_at": obs.host.observed_at or None,
            "scanned": obs.scanned}


def _inside(obs: Observation) -> list[dict]:
    """The recognised items below a top-level one (a model inside ``models/``)."""
    out = []
    for i in obs.inventory.items:
        c = i.classification
        if i.parent:
            out.append({"path": i.path, "parent": i.parent,
                        "kind": c.kind if c else "directory", "label": c.label if c else "",
                        "disk_bytes": i.stats.disk_bytes,
                        "apparent_bytes": i.stats.apparent_bytes, "files": i.stats.files,
                        "newest_mtime": i.stats.newest_mtime})
    return out


def _groups(consumers) -> list[dict]:
    """The consumers grouped by what a person acts on: a unit with its processes, a
    container with what runs in it, else the consumer alone."""
    out: dict[str, dict] = {}
    for c in consumers:
        a = c.attrs
        if c.type == "process" and a.container:
            key, kind, name = f"container:{a.container}", "container", str(a.container)
        elif c.type == "process" and a.unit:
            key, kind, name = f"systemd-unit:{a.unit}", "systemd-unit", str(a.unit)
        else:
            key, kind, name = c.id, c.type, c.name
        g = out.setdefault(key, {"key": key, "type": kind, "name": name, "consumers": []})
        g["consumers"].append(c.id)
    return list(out.values())


def _used(obs: Observation) -> list[dict]:
    from vacate.output.next_steps import for_consumer

    by_id = {c.id: c for c in obs.consumers}
    return [dict(c.as_json(), action=for_consumer(c, by_id)) for c in obs.consumers]


def _item_row(path: str, stats, c, status: str, users, action: str | None = None,
              why: str = "", get_back: str = "") -> dict:
    return {"path": path, "kind": c.kind if c else "", "label": c.label if c else "",
            "disk_bytes": stats.disk_bytes, "apparent_bytes": stats.apparent_bytes,
            "files": stats.files, "newest_mtime": stats.newest_mtime,
            "newest_atime": stats.newest_atime, "status": status, "users": list(users),
            "action": action, "action_text": action, "why": why, "get_back": get_back}


def report_of_observation(obs: Observation) -> dict:
    """The report of a saved observation: what was there and what used it (nothing done,
    nothing planned)."""
    from vacate.decide import verdict

    result = verdict.check(obs)
    rows = [_item_row(u.item.path, u.item.stats, u.item.classification, u.status, u.users)
            for u in result.items if not u.item.parent]
    v = result.verdict
    return {
        "schema": SCHEMA, "source": "observation", "plan": None,
        "there": {"target": obs.target.as_json(), "volume": _volume(obs), "rows": rows,
                  "items": [codec.encode(i) for i in obs.inventory.items],
                  "inside": _inside(obs)},
        "used": _used(obs), "used_by": _groups(obs.consumers),
        "verdict": {"safe_to_unmount": v.safe_to_unmount,
                    "blockers": [{"consumer": b.consumer, "reason": b.reason}
                                 for b in v.blockers]},
        "done": {"steps": [], "archived_bytes": 0, "deleted_bytes": 0, "freed_bytes": None,
                 "snapshots": [], "fixed": [], "gone": []},
        "remains": {"kept": [{"path": r["path"], "action": "keep", "why": "not planned",
                              "where": "left on the volume"} for r in rows],
                    "manual": [], "failed": [], "started": [],
                    "left": [], "references": []},
        "would": [], "estimate": None, "complete": False, "migrations": [],
    }


def _left(it) -> str:
    """What became of an item left on the volume, in words."""
    if it.action == "archive":
        return "archived, and left on the volume"
    if it.action == "migrate":
        return f"migrated to {it.migrate_to}, and left on the volume"
    return "left on the volume"


def _stats_of(it):
    from vacate.observing.model.inventory import Stats

    return Stats(it.apparent_bytes, it.disk_bytes, it.files)


def _loop_left(target) -> dict | None:
    """The loop device the volume was on, where the kernel does not detach it by itself (it
    was attached by hand, without autoclear): it keeps its backing file open after the
    unmount, and the command that detaches it."""
    loop = target.loop
    if loop is None or loop.autoclear:
        return None
    return {"device": loop.device, "backing_file": loop.backing_file,
            "command": ["losetup", "-d", loop.device]}


def report(plan: Plan, records: list[dict] | None = None, *, parts=parts_of) -> dict:
    """The report of ``plan`` and the journal ``records`` of applying it (None or empty: not
    applied; ``would`` lists the steps). ``parts``: how an archive's member -> part table
    is read (see :func:`report_refs.references`)."""
    states = states_of(records or [])
    obs = plan.observation
    mtimes = {i.path: i.stats for i in obs.inventory.items}
    steps = []
    for s in plan.steps:
        st = states.get(s.id)
        steps.append({
            "id": s.id, "kind": s.kind, "summary": s.summary,
            "status": (st.status if st.event == "outcome" else "started") if st else "pending",
            "detail": st.detail if st else "", "started": st.started if st else None,
            "ended": st.ended if st else None, "data": st.data if st else {},
            "command": list(s.action.command) if s.action and s.action.argv else None})
    ok = [x for x in steps if x["status"] in ("ok", "skipped")]
    archived = sum(x["data"].get("bytes_read", 0) for x in ok if x["kind"] == "archive")
    deleted = sum(x["data"].get("bytes", 0) for x in ok if x["kind"] == "delete")
    freed = next((x["data"].get("freed_bytes") for x in ok if x["kind"] == "check"
                  and "freed_bytes" in x["data"]), None)
    snaps = [x["data"] for x in ok if x["kind"] == "snapshot" and x["data"].get("snapshots")]
    verified = {x["data"].get("location"): x["ended"] for x in ok if x["kind"] == "verify"}
    archives = [{"location": x["data"].get("location"), "bytes_read": x["data"].get(
        "bytes_read", 0), "bytes_written": x["data"].get("bytes_written", 0),
        "files": x["data"].get("files", 0), "verified_at": verified.get(
            x["data"].get("location"))} for x in ok if x["kind"] == "archive"]
    refs = references(plan, states, parts)
    gone = {x["data"].get("item") for x in ok if x["kind"] == "delete"}
    applied = bool(states)
    rows = [_item_row(i.path, _stats_of(i), None, i.status, i.users, i.action, i.reason,
                      i.get_back) for i in plan.items]
    for r, i in zip(rows, plan.items):
        r.update(kind=i.kind, label=i.label, action_text=action_text(i), to=i.migrate_to)
        st = mtimes.get(i.path)
        if st is not None:
            r.update(newest_mtime=st.newest_mtime, newest_atime=st.newest_atime)
    doc = {
        "schema": SCHEMA,
        "source": "applied" if applied else "plan",
        "plan": {"target_path": plan.target_path, "mount_id": plan.mount_id,
                 "mount_dev": plan.mount_dev, "fstype": plan.fstype,
                 "archive_to": plan.archive_to, "created_at": plan.created_at,
                 "blocked": list(plan.blocked)},
        "there": {"target": obs.target.as_json(), "volume": _volume(obs), "rows": rows,
                  "items": [codec.encode(i) for i in plan.items], "inside": _inside(obs)},
        "used": _used(obs), "used_by": _groups(obs.consumers),
        "done": {"steps": [x for x in steps if x["status"] != "pending"] if applied else [],
                 "archived_bytes": archived, "deleted_bytes": deleted, "freed_bytes": freed,
                 "expected_freed_bytes": plan.expected_freed_bytes, "archives": archives,
                 "snapshots": snaps, "fixed": [r for r in refs if r.get("fixed")],
                 "gone": [{"path": i.path, "disk_bytes": i.disk_bytes, "get_back": i.get_back}
                          for i in plan.items if deletes_item(i) and i.path in gone]},
        "remains": {
            "kept": [{"path": i.path, "action": i.action, "why": i.reason, "to": i.migrate_to,
                      "where": _left(i)} for i in plan.items
                     if i.action in ("keep", "archive") or
                     i.action == "migrate" and not i.delete_source],
            "manual": [{"id": x["id"], "summary": x["summary"], "detail": x["detail"],
                        "command": x["command"]} for x in steps if x["status"] == "manual"],
            "failed": [{"id": x["id"], "summary": x["summary"], "detail": x["detail"],
                        "status": x["status"]}
                       for x in steps if x["status"] in ("failed", "started")],
            "started": [x["id"] for x in steps if x["status"] == "started"],
            "left": [{"id": x["id"], "kind": x["kind"], "summary": x["summary"],
                      "command": x["command"]} for x in steps if x["status"] == "pending"]
            if applied else [],
            "references": [r for r in refs if not r.get("fixed")],
            "loop_device": _loop_left(obs.target)},
        "would": [] if applied and all(x["status"] != "pending" for x in steps) else
        [{"id": x["id"], "kind": x["kind"], "summary": x["summary"], "command": x["command"]}
         for x in steps if x["status"] == "pending"],
        "estimate": {"freed_bytes": plan.expected_freed_bytes,
                     "archive_bytes": plan.archive_bytes,
                     "archive_estimate_s": plan.archive_estimate_s,
                     "get_back": [{"path": i.path, "action": i.action, "get_back": i.get_back}
                                  for i in plan.items if i.action != "keep"]},
        "complete": applied and all(x["status"] in ("ok", "skipped") for x in steps),
        "migrations": migrations(plan, steps),
        "datasets_freed": _freed(plan, steps),
    }
    return doc


def _freed(plan: Plan, steps: list[dict]) -> list[dict]:
    """The datasets the plan frees (``--free-volume``): each with its snapshots taken with
    it, what restores it, and whether it was destroyed."""
    status = {x["id"]: x["status"] for x in steps}
    return [{"dataset": s.params.dataset, "snapshots": list(s.params.snapshots),
             "restore": s.params.restore,
             "destroyed": status.get(s.id) in ("ok", "skipped")}
            for s in plan.steps if s.kind == "destroy-dataset"]


def report_of(plan_path: str, plan: Plan, plan_sha256: str | None = None) -> dict:
    """The report of the plan in ``plan_path`` and its journal beside it; a journal written
    for another plan (``plan_sha256``: the plan file's) is refused (``JournalError``)."""
    jpath = path_for(plan_path)
    if plan_sha256 is None:
        from vacate.observing.model.journal import read_records

        return report(plan, read_records(jpath))
    return report(plan, check_belongs(jpath, plan_sha256))
