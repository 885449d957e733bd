"""What the report says of each item migrated (or to be): where it went, what the copy and
the read-back from the disk came to, each unit repointed (the settings before and after, the
drop-in, how to undo it), whether it runs from the new place, what was brought back from the
old path when a step failed, and what became of the source. From the plan and the journal's
step records only."""

from __future__ import annotations

from vacate.observing.model.plan import Plan, PlanItem

DONE = ("ok", "skipped")


def action_text(it: PlanItem) -> str:
    """An item's action as a table cell: ``migrate to DEST`` (with ``--ct``, the
    container's spelling after it; ``, then delete`` when its source is deleted after),
    else the action."""
    if it.action != "migrate":
        return it.action
    return f"migrate to {it.migrate_to}" + (f" ({it.migrate_inside} in the container)"
                                             if it.migrate_inside else "") + \
        (", then delete" if it.delete_source else "")


def _mine(it: PlanItem, step) -> bool:
    p = step.params
    if step.kind in ("copy", "verify-copy", "delete"):
        return p.item == it.path
    if step.kind in ("repoint-unit", "repoint-config"):
        return any(old == it.path or new == it.migrate_inside for old, new in p.moves)
    if step.kind == "repoint-link":
        return p.to.startswith(it.migrate_to or "\0")
    if step.kind == "repoint-mount-point":
        return p.new.startswith(it.migrate_to or "\0")
    if step.kind == "start-unit":
        return it.migrate_to in p.into or it.migrate_inside in p.into
    return False


def _sum(xs: list[dict], *keys: str) -> dict:
    return {k: sum(int(x["data"].get(k) or 0) for x in xs) for k in keys}


def _state(mine: list[dict]) -> str:
    st = [x["status"] for x in mine]
    if any(s in ("failed", "started") for s in st):
        return "failed"
    if st and all(s in DONE for s in st):
        return "done"
    return "in part" if any(s in DONE for s in st) else "planned"


def _brought_back(plan: Plan, steps: list[dict], mine_ids: set[str]) -> list[str]:
    """What was brought back from the old path when a step failed while a unit of this
    item was stopped (the failed step's journaled outcome says)."""
    from vacate.observing.model.window import window_of

    out = []
    for i, x in enumerate(steps):
        said = x["data"].get("brought_back") if x["status"] == "failed" else None
        if said and any(s.id in mine_ids for s in window_of(plan, i)):
            out += [str(s) for s in said]
    return out


def _repointed(x: dict) -> dict:
    """One repointing step as the report shows it: a unit's drop-in (each setting before
    and after), a file's lines (each before and after), or a link (its target before and
    after); how to undo it."""
    d = x["data"]
    out = {"step": x["id"], "kind": x["kind"], "status": x["status"], "summary": x["summary"],
           "undo": d.get("undo")}
    if x["kind"] == "repoint-unit":
        out.update(unit=d.get("unit"), manager=d.get("manager"), dropin=d.get("dropin"),
                   changes=[{"setting": k, "before": d.get("before", {}).get(k, []),
                             "after": d.get("after", {}).get(k, [])}
                            for k in d.get("settings", [])])
    elif x["kind"] == "repoint-config":
        out.update(file=d.get("file"), backup=d.get("backup"),
                   changes=[{"setting": f"{d.get('file')}:{c.get('line')}",
                             "before": [c.get("before", "")], "after": [c.get("after", "")]}
                            for c in d.get("changes", [])])
    elif x["kind"] == "repoint-mount-point":
        out.update(file=d.get("config"), changes=[{"setting": f"CT {d.get('vmid')} "
                                                              f"{d.get('key')}",
                                                   "before": [d.get("before", "")],
                                                   "after": [d.get("after", "")]}]
                   if d.get("key") else [])
    else:
        out.update(link=d.get("link"), changes=[{"setting": d.get("link"),
                                                 "before": [d.get("before", "")],
                                                 "after": [d.get("after", "")]}]
                   if d.get("link") else [])
    return out


def migration(plan: Plan, it: PlanItem, steps: list[dict]) -> dict:
    """One migrate item as the report shows it (``steps``: the report's step rows, in the
    plan's order)."""
    mine = [x for s, x in zip(plan.steps, steps) if _mine(it, s)]
    ok = [x for x in mine if x["status"] in DONE]
    copies = [x for x in ok if x["kind"] == "copy"]
    reads = [x for x in ok if x["kind"] == "verify-copy"]
    wrong = [m for x in mine if x["kind"] == "verify-copy" and x["status"] == "failed"
             for m in x["data"].get("mismatches", [])]
    repointed = [_repointed(x) for x in mine if x["kind"].startswith("repoint-")]
    started = [{"step": x["id"], "status": x["status"], "summary": x["summary"],
                "detail": x["detail"]} for x in mine if x["kind"] == "start-unit"]
    delete = next((x for x in mine if x["kind"] == "delete"), None)
    if delete is not None and delete["status"] in DONE:
        source = "deleted from the volume, now that it runs from the copy"
    elif delete is not None:
        source = "to be deleted from the volume once what used it runs from the copy"
    else:
        source = "left on the volume"
    return {
        "path": it.path, "to": it.migrate_to, "disk_bytes": it.disk_bytes, "files": it.files,
        "free_bytes": it.dest_free_bytes, "delete_source": it.delete_source,
        "state": _state(mine), "source": source,
        "copy": dict(passes=len(copies), **_sum(copies, "copied", "bytes", "reflinked",
                                                "hardlinked", "removed")),
        "read_back": dict(passes=len(reads), **_sum(reads, "files", "bytes")),
        "mismatches": wrong, "repointed": repointed, "started": started,
        "brought_back": _brought_back(plan, steps, {x["id"] for x in mine})}


def migrations(plan: Plan, steps: list[dict]) -> list[dict]:
    """Every migrate item of the plan (see :func:`migration`)."""
    return [migration(plan, it, steps) for it in plan.items if it.action == "migrate"]
