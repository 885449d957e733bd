"""What still names a path that is gone, for the report: each configured user naming a path of
an archived or deleted item, where it is written (file:line), and where the data went — the
archive, the part of it that holds the path, and the commands that restore exactly that path
(``vacate restore …`` and the stock ``zstd -dc PART | tar -x PATH``). A reference whose line
apply's ``edit-config`` step commented out is *fixed* by that step, not left."""

from __future__ import annotations

import os
import shlex

from vacate.observing.model.plan import Plan
from vacate.observing.parsers.paths import is_under


def archive_of(plan: Plan, item: str) -> str | None:
    """Where the plan archives ``item`` (None: it is not archived)."""
    return next((s.postcondition.archive for s in plan.steps
                 if s.kind == "archive" and s.params.item == item), None)


def parts_of(location: str) -> dict[str, str]:
    """Member path -> the part that holds it, from the manifest of the local archive at
    ``location`` ({} when it is not local, not there or not readable: the report then names
    no part)."""
    from vacate.archive import catalog
    from vacate.archive import manifest as mf

    try:
        with open(os.path.join(location, mf.MANIFEST), "rb") as f:
            m = catalog.loads(f.read())
    except (OSError, ValueError):
        return {}
    return {os.fsdecode(e.path): e.part for e in m.entries}


def _fixed_by(plan: Plan, states: dict, at: str) -> str | None:
    """The id of the edit-config step that commented out the line ``at`` (file:line), when
    it ended ok."""
    for s in plan.steps:
        if s.kind != "edit-config":
            continue
        st = states.get(s.id)
        if st is None or st.event != "outcome" or st.status not in ("ok", "skipped"):
            continue
        if f"{s.params.file}:{s.params.line}" == at or \
                any(e.source == at for e in s.evidence):
            return s.id
    return None


def references(plan: Plan, states: dict | None = None, parts=parts_of) -> list[dict]:
    """Each configured user still naming a path of an archived or deleted item (see the
    module's docstring). ``states``: the journal's step states (a fixed reference carries
    ``fixed``: the step's id); ``parts``: how an archive's member -> part table is read."""
    states = states or {}
    out = []
    tables: dict[str, dict] = {}
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
            loc = archive_of(plan, it.path) if it.action == "archive" else None
            if loc:
                arc = os.path.basename(it.path) + p[len(it.path):]
                ref["archive"] = loc
                ref["restore"] = ["vacate", "restore", loc, arc, "--to", "DIR"]
                if loc not in tables:
                    tables[loc] = parts(loc)
                part = tables[loc].get(arc)
                ref["part"] = part
                ref["stock_restore"] = (
                    f"zstd -dc {shlex.quote(os.path.join(loc, part))} | tar -xf - "
                    f"{shlex.quote(arc)}" if part else
                    f"for p in {shlex.quote(loc)}/part-*.tar.zst; do zstd -dc \"$p\" | "
                    f"tar -xf - {shlex.quote(arc)}; done")
            fixed = _fixed_by(plan, states, at)
            if fixed:
                ref["fixed"] = fixed
            out.append(ref)
    return out
