"""The plan's ``delete`` and ``snapshot`` steps.

``delete`` removes only the entries the approved plan recorded for the item, and only while
each is still what was recorded (:func:`vacate.act.delete.delete_item`); anything else found
there is kept and named, and the step fails. An item a person turned into ``delete`` after
planning has no recorded entries: it is recorded now, and deleted only when that record's
digest is the one the plan took of the item (what was reviewed is what goes).

``snapshot`` is taken before the first delete on ZFS and btrfs
(:func:`vacate.act.snapshot.snapshot`), named after the plan, so a rerun finds its own.
"""

from __future__ import annotations

import os

from vacate.act.base import Context, Outcome
from vacate.observing.model.plan import PlanItem, Step

KINDS = ("delete", "snapshot")


def _item(step: Step, ctx: Context) -> PlanItem | None:
    return next((i for i in ctx.plan.items if i.path == step.params.get("item")), None)


def _recorded(it: PlanItem, ctx: Context):
    """The entries to delete: the plan's, or recorded now and matching the plan's digest;
    a string saying why not otherwise."""
    from vacate.observing.entries import EntryList, record_entries

    if it.entries is not None:
        try:
            return EntryList.from_json(it.entries)
        except ValueError as e:
            return f"the plan's record of {it.path} is damaged: {e}"
    if it.identity is None:
        return f"the plan recorded nothing of {it.path}: make the plan again with --delete"
    now = record_entries(it.path, dev=ctx.plan.observation.target.st_dev)
    if now.digest() != it.identity.digest:
        return f"{it.path} is not what the plan recorded (new or changed files)"
    return now


def done(step: Step, ctx: Context) -> bool:
    if step.kind == "snapshot":
        return False            # taking it again finds it (idempotent, cheap)
    return not os.path.lexists(step.params["item"])


def ready(step: Step, ctx: Context) -> str | None:
    if step.kind == "snapshot":
        return None
    it = _item(step, ctx)
    if it is None or it.action != "delete":
        return f"{step.params['item']} is not an item the plan deletes"
    got = _recorded(it, ctx)
    return got if isinstance(got, str) else None


def snapshot_name(ctx: Context) -> str:
    import hashlib

    return hashlib.sha256(ctx.plan.dumps().encode()).hexdigest()[:12]


def run(step: Step, ctx: Context) -> Outcome:
    if step.kind == "snapshot":
        return _snapshot(step, ctx)
    from vacate.act.delete import delete_item

    it = _item(step, ctx)
    got = _recorded(it, ctx)
    if isinstance(got, str):
        return Outcome("failed", got)
    obs = ctx.plan.observation
    r = delete_item(it.path, got, target_root=obs.target.path, dev=obs.target.st_dev,
                    progress=lambda n, b: ctx.tell(step, n, it.files or 1, "deleting"))
    data = r.to_json()
    if r.outcome == "ok":
        return Outcome("ok", f"{r.entries} entries, {r.bytes} bytes", data)
    if r.outcome == "manual":
        return Outcome("manual", "; ".join(f"{m.path}: {m.reason} ({' '.join(m.argv)})"
                                           for m in r.manual), data)
    why = [f"kept {k.path}: {k.reason} ({k.detail})" for k in r.kept[:10]] + \
        [p.message for p in r.errors[:5]]
    return Outcome("failed", "; ".join(why), data)


def _snapshot(step: Step, ctx: Context) -> Outcome:
    from vacate.act.snapshot import destroy_command, snapshot

    r = snapshot(ctx.plan.observation.target, step.params.get("items") or [],
                 snapshot_name(ctx))
    data = {"name": r.name, "snapshots": [s.as_json() for s in r.snapshots],
            "destroy": destroy_command(r)}
    if r.outcome == "ok":
        return Outcome("ok", r.message, data)
    if r.outcome == "unsupported":
        return Outcome("skipped", r.message, data)
    return Outcome("failed", r.message, data)
