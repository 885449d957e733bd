"""``vacate.report/1``: what was there, what used it, what was done, what remains, and what
would be done — from a plan and its journal alone (nothing on the machine is read). The page
version of the report is rendered from this document."""

from __future__ import annotations

import os

from vacate.act.journal import path_for, read_records, states_of
from vacate.observing.model import codec
from vacate.observing.model.plan import Plan
from vacate.observing.parsers.paths import is_under

SCHEMA = "vacate.report/1"


def _archive_of(plan: Plan, item: str) -> str | None:
    return next((s.postcondition["archive"] for s in plan.steps
                 if s.kind == "archive" and s.params.get("item") == item), None)


def references(plan: Plan) -> list[dict]:
    """Each configured user still naming a path of an archived or deleted item: where it is
    written (file:line), the path, and where the data went (the archive, and the command
    that restores exactly that path) or that it is gone."""
    out = []
    gone = [it for it in plan.items if it.action in ("archive", "delete")]
    for c in plan.observation.consumers:
        if c.live:
            continue
        for p in c.paths:
            it = next((i for i in gone if is_under(p, i.path)), None)
            if it is None:
                continue
            at = next((e.source for e in c.evidence if e.path == p), None) or \
                (c.evidence[0].source if c.evidence else c.name)
            ref = {"consumer": c.id, "type": c.type, "name": c.name, "at": at, "path": p,
                   "item": it.path, "action": it.action}
            loc = _archive_of(plan, it.path) if it.action == "archive" else None
            if loc:
                arc = os.path.basename(it.path) + p[len(it.path):]
                ref["archive"] = loc
                ref["restore"] = ["vacate", "restore", loc, arc, "--to", "DIR"]
            out.append(ref)
    return out


def report(plan: Plan, records: list[dict] | None = None) -> dict:
    """The report of ``plan`` and the journal ``records`` of applying it (None or empty: not
    applied; ``would`` lists the steps)."""
    from vacate.output.actions import for_consumer

    states = states_of(records or [])
    by_id = {c.id: c for c in plan.observation.consumers}
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
    applied = bool(states)
    doc = {
        "schema": SCHEMA,
        "plan": {"target_path": plan.target_path, "mount_id": plan.mount_id,
                 "mount_dev": plan.mount_dev, "fstype": plan.fstype,
                 "archive_to": plan.archive_to, "created_at": plan.created_at},
        "there": {"target": plan.observation.target.as_json(),
                  "items": [codec.encode(i) for i in plan.items]},
        "used": [dict(c.as_json(), action=for_consumer(c, by_id))
                 for c in plan.observation.consumers],
        "done": {"steps": [x for x in steps if x["status"] != "pending"] if applied else [],
                 "archived_bytes": archived, "deleted_bytes": deleted, "freed_bytes": freed,
                 "snapshots": snaps},
        "remains": {
            "kept": [{"path": i.path, "action": i.action, "why": i.reason}
                     for i in plan.items if i.action in ("keep", "archive")],
            "manual": [{"id": x["id"], "summary": x["summary"], "detail": x["detail"],
                        "command": x["command"]} for x in steps if x["status"] == "manual"],
            "failed": [{"id": x["id"], "summary": x["summary"], "detail": x["detail"]}
                       for x in steps if x["status"] in ("failed", "started")],
            "references": references(plan)},
        "would": [] if applied and all(x["status"] != "pending" for x in steps) else
        [{"id": x["id"], "kind": x["kind"], "summary": x["summary"], "command": x["command"]}
         for x in steps if x["status"] == "pending"],
        "complete": applied and all(x["status"] in ("ok", "skipped") for x in steps),
    }
    return doc


def report_of(plan_path: str, plan: Plan) -> dict:
    return report(plan, read_records(path_for(plan_path)))
