"""The plan's ``delete`` and ``snapshot`` steps.

``delete`` removes only the entries the approved plan recorded for the item, and only while
each is still what was recorded (:func:`vacate.act.delete.delete_item`); anything else found
there is kept and named, and the step fails. The record is the entries file beside the plan
that the plan names by its sha256 (:class:`vacate.observing.entries.EntriesFile`: its index
held, each directory's rows read as that directory is emptied). An item a person turned
into ``delete`` after planning has no entries file: it is recorded now (into a temporary
one beside the plan), and deleted only when that record's digest is the one the plan took of
the item (what was reviewed is what goes).

A migrate item also marked delete is deleted the same way, and only once its copy is read
back as the source is now and every unit repointed to it runs from it
(:func:`vacate.act.migrate.not_moved_yet`).

``snapshot`` is taken before the first delete on ZFS and btrfs
(:func:`vacate.act.snapshot.snapshot`), named after the plan, so a rerun finds its own.
"""

from __future__ import annotations

import os

from vacate.act.base import Context, Outcome
from vacate.act.kind import Kind
from vacate.observing.model.plan import PlanItem, Step

KINDS = (Kind("delete"), Kind("snapshot", proves_itself=True))


def _item(step: Step, ctx: Context) -> PlanItem | None:
    return next((i for i in ctx.plan.items if i.path == step.params.item), None)


def _entries_path(name: str, ctx: Context) -> str | None:
    from vacate.observing.store import find_entries_file

    return find_entries_file(name, ctx.plan_path)


def _recorded(it: PlanItem, ctx: Context):
    """The entries to delete, opened (close an EntriesFile after use): the plan's entries
    file, checked against the sha256 and digest the plan holds; or, for an item a person
    turned into ``delete``, recorded now into a temporary one, and only when its digest is
    the one the plan took of the item. A string saying why not otherwise."""
    import tempfile

    from vacate.observing.entries import (
        SCHEMA,
        EntriesFile,
        EntryList,
        record_item,
    )

    ref = it.entries
    if ref is not None and ref.get("schema") == SCHEMA:   # a plan holding them inline
        try:
            return EntryList.from_json(ref)
        except ValueError as e:
            return f"the plan's record of {it.path} is damaged: {e}"
    if it.identity is None:
        return f"the plan recorded nothing of {it.path}: make the plan again with --delete"
    if ref is not None:
        path = _entries_path(ref.get("file"), ctx)
        if path is None:
            return (f"the entries file the plan names for {it.path} ({ref.get('file')}) is "
                    "not beside the plan")
        try:
            got = EntriesFile(path, sha256=ref["sha256"], index_at=ref["index_at"])
        except (OSError, KeyError, TypeError, ValueError) as e:
            return f"the plan's record of {it.path} is damaged: {e}"
        if (got.item, got.digest) != (it.path, it.identity.digest):
            got.close()
            return f"the entries file named for {it.path} is of another item or another plan"
        return got
    where = os.path.dirname(os.path.abspath(ctx.plan_path)) if ctx.plan_path else None
    with tempfile.TemporaryFile(dir=where) as tmp:
        now = record_item(it.path, dev=ctx.plan.observation.target.st_dev, out=tmp)
        if now.digest != it.identity.digest:
            return f"{it.path} is not what the plan recorded (new or changed files)"
        return EntriesFile(tmp.fileno(), sha256=now.sha256, index_at=now.index_at)


def _close(got) -> None:
    if hasattr(got, "close"):
        got.close()


def done(step: Step, ctx: Context) -> bool:
    if step.kind == "snapshot":
        return False            # taking it again finds it (idempotent, cheap)
    return not os.path.lexists(step.params.item)


def ready(step: Step, ctx: Context) -> str | None:
    if step.kind == "snapshot":
        return None
    it = _item(step, ctx)
    if it is None or not (it.action == "delete" or it.action == "migrate" and
                          it.delete_source):
        return f"{step.params.item} is not an item the plan deletes"
    if it.action == "migrate":
        from vacate.act.migrate import not_moved_yet

        why = not_moved_yet(it, ctx)
        if why:
            return why
    got = _recorded(it, ctx)
    _close(got)
    return got if isinstance(got, str) else None


def snapshot_name(ctx: Context) -> str:
    from vacate.act.snapshot import plan_snapshot_name

    return plan_snapshot_name(ctx.plan)


def run(step: Step, ctx: Context) -> Outcome:
    if step.kind == "snapshot":
        return _snapshot(step, ctx)
    from vacate.act.delete import delete_item

    it = _item(step, ctx)
    got = _recorded(it, ctx)
    if isinstance(got, str):
        return Outcome("failed", got)
    obs = ctx.plan.observation
    try:
        r = delete_item(it.path, got, target_root=obs.target.path, dev=obs.target.st_dev,
                        progress=lambda n, b: ctx.tell(step, n, it.files or 1, "deleting"))
    finally:
        _close(got)
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
    from vacate.act.freeing import freed_by_plan
    from vacate.act.snapshot import destroy_command, snapshot

    freed = freed_by_plan(ctx) if step.params.dataset else None
    if freed is not None:        # a rerun after the plan freed the dataset: it went with it
        return Outcome("skipped", f"{freed} was freed by this plan, its snapshots with it")
    r = snapshot(ctx.plan.observation.target, step.params.items or [],
                 snapshot_name(ctx))
    data = {"name": r.name, "snapshots": [s.as_json() for s in r.snapshots],
            "destroy": destroy_command(r)}
    if r.outcome == "ok":
        return Outcome("ok", r.message, data)
    if r.outcome == "unsupported":
        return Outcome("skipped", r.message, data)
    return Outcome("failed", r.message, data)
