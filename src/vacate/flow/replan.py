"""``plan --from EDITED``: the plan a person edited (the items' ``action`` fields) made whole
again. ``apply`` stays strict, applying only a plan whose steps are the ones its items make;
this derives those steps from the items' actions as edited, from the observation the file
records, and says what changed against the file's steps.

Before deriving: a plan that has a journal (an apply began) is never re-derived; the volume
must still be the one planned (a stale plan is refused as ``apply`` refuses it); and where a
new action needs what the file lacks (the recorded entries of an item newly marked delete,
the identity of one newly archived) the volume is looked at again for that item, said so,
and refused when it no longer is what the observation saw. Reads only; prints nothing."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace

from vacate.observing.errors import UsageError
from vacate.observing.host import Host
from vacate.observing.model.plan import Plan


@dataclass(frozen=True, slots=True)
class Replanned:
    """The plan made again, what changed against the edited file's steps (``-``/``+``
    lines), and what was looked at again on the volume."""

    plan: Plan
    changes: tuple[str, ...]
    looked_again: tuple[str, ...]


def _has_journal(plan_path: str) -> bool:
    from vacate.observing.model.journal import path_for

    try:
        return os.path.getsize(path_for(plan_path)) > 0
    except OSError:
        return False


def _planned_actions(plan: Plan) -> dict[str, str]:
    """What the file's steps do to each item (the actions before the edit)."""
    out = {}
    for s in plan.steps:
        item = getattr(s.params, "item", None)      # Archive, Delete, Copy
        if s.kind in ("archive", "delete", "copy") and item and out.get(item) != "migrate":
            out[item] = "migrate" if s.kind == "copy" else s.kind
    return out


def _same_as_observed(obs_item, ident) -> bool:
    """Whether what is there now is what the observation saw: its file count and newest
    mtime (to the second)."""
    st = obs_item.stats
    then = int(st.newest_mtime) if st.newest_mtime is not None else None
    now = ident.newest_mtime_ns // 10**9 if ident.newest_mtime_ns is not None else None
    return ident.files == st.files and then == now


def _carry_entries(refs, edited: str, store: str) -> None:
    """The entries files the edited plan names, copied beside the new plan (``store``) when
    that is another directory: apply looks for them beside the plan it is given."""
    import shutil

    from vacate.observing.store import entries_store

    for ref in refs:
        name = ref.get("file") if isinstance(ref, dict) else None
        if not name or os.path.basename(name) != name:
            continue
        there = os.path.join(store, name)
        if os.path.exists(there):
            continue
        for d in (os.path.dirname(os.path.abspath(edited)), entries_store()):
            src = os.path.join(d, name)
            if os.path.exists(src):
                os.makedirs(store, exist_ok=True)
                shutil.copy2(src, there)
                break


def replan(edited: str, *, host: Host | None = None,
           outputs: tuple[str, ...] = ()) -> Replanned:
    """The plan in ``edited`` with its steps derived from its items' actions as edited."""
    from vacate.decide.plan import PlanRefused, deleted, make_plan, observation_of
    from vacate.decide.request import request_of
    from vacate.flow.apply import load, staleness
    from vacate.flow.plan import identity_of, on_target
    from vacate.observing.collectors import mounts
    from vacate.observing.entries import record_item, write_entries_file
    from vacate.observing.fsio import existing_parent
    from vacate.observing.model.observation import Destination
    from vacate.observing.store import entries_store
    from vacate.remote import Local

    host = host or Host.local()
    for p in (edited, *outputs):
        if _has_journal(p):
            raise UsageError(f"{p} has a journal ({p}.journal): an apply of it began, and a "
                             "plan that was applied is never made again",
                             hint="make a new plan of the volume: vacate plan MOUNTPOINT")
    plan = load(edited)[0]
    target = plan.observation.target
    stale = staleness(plan, Local(host), set())
    if stale:
        raise UsageError("the plan is stale, nothing was written: " + "; ".join(stale),
                         hint=f"make a new plan: vacate plan {plan.target_path}")
    now_target = mounts.resolve_target(plan.target_path, host)
    local_dest = plan.archive_to if plan.archive_to and "://" not in plan.archive_to else None
    for what, p in [("--archive-to", local_dest)] + [("the plan file", o) for o in outputs]:
        if p and on_target(Local(host), p, now_target):
            raise UsageError(f"{what} {p} is on the volume being retired")
    observed = {it.path: it for it in plan.observation.inventory.items}
    identities = {it.path: it.identity for it in plan.items if it.identity}
    entries = {it.path: it.entries for it in plan.items if it.entries}
    store = os.path.dirname(os.path.abspath(outputs[0])) if outputs else entries_store()
    _carry_entries(entries.values(), edited, store)
    looked = []
    for it in plan.items:
        if it.action != "archive" and not deleted(it):
            continue
        if it.identity is not None and (it.action == "archive" or it.entries):
            continue
        if deleted(it):
            os.makedirs(store, exist_ok=True)
            rec = write_entries_file(it.path, dev=target.st_dev, directory=store)
        else:
            rec = record_item(it.path, dev=target.st_dev)
        ident = identity_of(rec)
        if it.identity is not None and ident.digest != it.identity.digest:
            raise UsageError(f"the plan is stale, nothing was written: {it.path} holds new or "
                             "changed files since the plan was made",
                             hint=f"make a new plan: vacate plan {plan.target_path}")
        if it.identity is None and it.path in observed and \
                not _same_as_observed(observed[it.path], ident):
            raise UsageError(f"the plan is stale, nothing was written: {it.path} is not what "
                             "the plan saw (other files, or changed since)",
                             hint=f"make a new plan: vacate plan {plan.target_path}")
        identities[it.path] = ident
        if deleted(it):
            entries[it.path] = rec.reference()
        looked.append(f"{it.path}: looked at again for its new action ({it.action}): "
                      f"{ident.files} files recorded")
    obs = observation_of(plan)
    dests = {d.path: d for d in obs.destinations}
    if local_dest:      # its free space now (a far host's zstd is not asked again)
        st = os.statvfs(existing_parent(local_dest))
        dests[local_dest] = replace(dests.get(local_dest, Destination(local_dest)),
                                    free_bytes=st.f_bavail * st.f_frsize, zstd=None)
    try:
        new = make_plan(replace(obs, destinations=tuple(dests.values())),
                        request_of(plan, identities=identities, entries=entries,
                                   created_at=time.time()))
    except PlanRefused as e:
        raise UsageError(str(e)) from None
    was = _planned_actions(plan)
    reasons = {it.path: it.reason for it in plan.items}
    items = []
    for it in new.items:
        before = was.get(it.path, "keep")
        if before != it.action:
            items.append(replace(it, reason=f"edited by hand: {before} -> {it.action}"))
        elif it.path in reasons:
            items.append(replace(it, reason=reasons[it.path]))
        else:
            items.append(it)
    new = replace(new, items=tuple(items))
    return Replanned(new, tuple(step_changes(plan, new)), tuple(looked))


def step_changes(old: Plan, new: Plan) -> list[str]:
    """The steps of ``old`` that ``new`` drops (``-``) and those it adds (``+``), by what
    they do."""
    def key(s):
        return (s.kind, s.summary)

    have = {key(s) for s in old.steps}
    want = {key(s) for s in new.steps}
    out = [f"- {s.id} {s.summary}" for s in old.steps if key(s) not in want]
    out += [f"+ {s.id} {s.summary}" for s in new.steps if key(s) not in have]
    return out
