"""``vacate undo PLAN``: reverse what an apply of the plan repointed, from its journal.

Each ``repoint-unit`` step the journal records as done names the drop-in it wrote (in the
unit's own manager: the host's, a container's, a user's) and that drop-in's sha256: the
drop-in is removed (refused, named, when it was edited since) and the unit's manager
reloaded. Each ``repoint-config`` step's lines are put back as they were
(:func:`vacate.act.config_edit.undo_repoint`), each ``repoint-link`` step's link pointed back
(:func:`vacate.act.relink.undo`), each ``repoint-mount-point`` step's container mount point
set back (:func:`vacate.act.pve_set.undo_mount_point`), each refused, named, where it was changed since. Nothing
else is touched: the admin's own drop-ins stay, the copy stays where it was made, no unit is
started or stopped (a unit started again afterwards runs from the old path). Each reversal
is journaled (intent, outcome) like a step.
"""

from __future__ import annotations

from dataclasses import dataclass

from vacate.act import migrate
from vacate.act.base import CommandFailed, Context
from vacate.act.journal import Journal, PlanLock
from vacate.observing.compat import SLOTS
from vacate.observing.errors import VacateError
from vacate.observing.host import Host
from vacate.observing.model.journal import check_belongs, path_for


@dataclass(frozen=True, **SLOTS)
class Undone:
    """One repointing reversed (``status`` ok / skipped / failed), with what was done."""

    step: str
    unit: str          # what was repointed: a unit, a file, a link
    status: str
    detail: str


def _reverse(plan, step, data: dict, ctx: Context) -> tuple[str, str]:
    """(what it was, what undoing it did) for one repointing step."""
    from vacate.act import config_edit, pve_set, relink

    if step.kind == "repoint-unit":
        return data.get("unit", ""), migrate.undo_dropin(plan, step, data, ctx)
    if step.kind == "repoint-config":
        return data.get("file", ""), config_edit.undo_repoint(step, data, ctx)
    if step.kind == "repoint-mount-point":
        return f"CT {data.get('vmid')}", pve_set.undo_mount_point(step, ctx)
    return data.get("link", ""), relink.undo(step, ctx)


REPOINTS = ("repoint-unit", "repoint-config", "repoint-link", "repoint-mount-point")


def undo(plan_path: str, *, host: Host | None = None) -> tuple[Undone, ...]:
    """Reverse the repointings the journal of ``plan_path`` records (newest first)."""
    from vacate.flow.apply import Refused, check_machine, load
    from vacate.remote import Local

    host = host or Host.local()
    plan, sha = load(plan_path)
    if plan.observation.host.ssh:
        raise Refused(f"the plan was applied on {plan.observation.host.ssh} over ssh; vacate "
                      "undo reverses repointings on the machine it runs on: nothing was "
                      "changed", hint=f"run vacate undo there (ssh {plan.observation.host.ssh})"
                                      " with a copy of the plan and its journal")
    by_id = {s.id: s for s in plan.steps}
    out = []
    with PlanLock(plan_path):
        recs = check_belongs(path_for(plan_path), sha)
        # a container's config the apply changed (a mount point removed or repointed) is
        # the one undo works on: only the machine is checked, once steps were started
        check_machine(plan, Local(host), started={r["step"] for r in recs if r.get("step")})
        wrote: dict[str, dict] = {}
        for r in recs:
            if r.get("event") == "outcome" and r.get("status") == "ok" and \
                    by_id.get(r.get("step")) is not None and \
                    by_id[r["step"]].kind in REPOINTS and r.get("data"):
                wrote[r["step"]] = r["data"]
        ctx = Context(plan=plan, host=host, plan_path=plan_path)
        with Journal(path_for(plan_path), sha) as j:
            for sid, data in reversed(list(wrote.items())):
                step = by_id[sid]
                j.intent(f"undo:{sid}", "undo-repoint")
                what = data.get("unit") or data.get("file") or data.get("link") or ""
                try:
                    what, said = _reverse(plan, step, data, ctx)
                    status = "skipped" if "already" in said or "not there" in said else "ok"
                except (CommandFailed, OSError, VacateError) as e:
                    said, status = getattr(e, "output", None) or str(e), "failed"
                j.outcome(f"undo:{sid}", status, said,
                          {k: data[k] for k in ("dropin", "file", "link") if k in data})
                out.append(Undone(sid, what, status, said))
    return tuple(out)
