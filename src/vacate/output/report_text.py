"""The report in the terminal: a short summary first (what is gone, what is left and why,
what still names a path that is gone), then the sections as tables. Every string from the
report is given to rich as :class:`rich.text.Text`, never as markup: a file name such as
``[bold]x[/]`` is shown as written."""

from __future__ import annotations

import shlex
import time

from rich.table import Table
from rich.text import Text

from vacate.observing.human import human_age, human_bytes, human_duration
from vacate.output.report_names import shown

NO_DROPIN = "no drop-in (none of its own settings names it)"
STATUS_STYLE = {"ok": "green", "skipped": "cyan", "failed": "bold red", "started": "bold red",
                "manual": "yellow", "pending": "dim", "active": "bold red",
                "referenced": "yellow", "cold": "cyan", "disposable": "green",
                "artifact": "dim"}


def _t(s, style: str = "") -> Text:
    return Text(shown(s) if isinstance(s, str) else str(s), style=style)


def state_line(doc: dict) -> str:
    """One phrase for where the volume stands."""
    if doc["source"] == "observation":
        return "observed"
    if doc["complete"]:
        return "retired"
    return "applied in part" if doc["done"]["steps"] else "planned, not applied"


def went(r: dict) -> str:
    """Where the data a reference names went."""
    if r.get("archive"):
        return f"archived at {r['archive']}; restore it: {shlex.join(r['restore'])}" + (
            f" (or: {r['stock_restore']})" if r.get("stock_restore") else "")
    return "deleted" if r["action"] == "delete" else r["action"]


def migration_lines(m: dict, console) -> None:
    """What a person reads of one migrated item: where it went, the copy and the read-back,
    each unit repointed (before -> after, how to undo it), whether it runs from there, what
    was brought back on a failure, and what became of the source."""
    c, rb = m["copy"], m["read_back"]
    if m["state"] == "planned":
        free = "not known" if m["free_bytes"] is None else human_bytes(m["free_bytes"])
        console.print(Text.assemble("  would migrate: ", shown(m["path"]), " to ",
                                    shown(m["to"]), f" ({human_bytes(m['disk_bytes'])}; free "
                                    f"there when planned: {free}); the source is ",
                                    shown(m["source"])))
        return
    line = Text.assemble(f"  migrated ({m['state']}): ", shown(m["path"]), " to ",
                         shown(m["to"]))
    if c["passes"]:
        line.append(f"; copied {c['copied']} files ({human_bytes(c['bytes'])}) in "
                    f"{c['passes']} pass{'es' if c['passes'] > 1 else ''}"
                    + (f", {c['reflinked']} reflinked" if c["reflinked"] else "")
                    + (f", {c['hardlinked']} hardlinked again" if c["hardlinked"] else ""))
    if rb["passes"]:
        line.append(f"; read back from the disk: {rb['files']} files "
                    f"({human_bytes(rb['bytes'])}), each as the source was read")
    console.print(line)
    for x in m["mismatches"]:
        console.print(Text.assemble(("    read back wrong: ", "red"), shown(x["path"]), ": ",
                                    shown(x["why"])))
    for u in m["repointed"]:
        if u["status"] not in ("ok", "skipped"):
            continue
        if u["kind"] == "repoint-unit":
            console.print(Text.assemble("    repointed: ", shown(u["unit"]), " (",
                                        shown(u["manager"] or "?"), ") by ",
                                        shown(u["dropin"] or NO_DROPIN)))
        lead = "      " if u["kind"] == "repoint-unit" else "    repointed: "
        for ch in u["changes"]:
            console.print(Text.assemble(lead, shown(ch["setting"]), ": ",
                                        shown(" ".join(ch["before"])), " -> ",
                                        shown(" ".join(ch["after"]))))
        if u["undo"]:
            console.print(Text.assemble("      undo: ", shown(u["undo"]),
                                        " (or vacate undo PLAN)"))
    for u in m["started"]:
        if u["status"] in ("ok", "skipped"):
            console.print(Text.assemble("    runs again: ", shown(u["summary"])))
    for said in m["brought_back"]:
        console.print(Text.assemble(("    brought back from the old path: ", "yellow"),
                                    shown(said)))
    console.print(Text.assemble("    its source: ", shown(m["source"])))


def summary(doc: dict, console) -> None:
    """What a person reads first: the state, what is gone, what is left and why, space."""
    v = doc["there"]["volume"]
    console.print(Text.assemble((shown(v["path"]), "bold"), ": ", (state_line(doc), "bold"),
                                f" ({v['fstype']} on ", shown(v["device"] or "?"),
                                ", host ", shown(v["host"] or "?"),
                                f", reached as {shown(v['via'])}" if v.get("via") else "",
                                ")"))
    d, r = doc["done"], doc["remains"]
    for g in d["gone"]:
        console.print(Text.assemble("  gone: ", shown(g["path"]),
                                    f" ({human_bytes(g['disk_bytes'])}; ", shown(g["get_back"]),
                                    ")"))
    for k in r["kept"]:
        console.print(Text.assemble("  ", shown(k["where"]), ": ", shown(k["path"]), " (",
                                    shown(k["why"]), ")"))
    for m in doc.get("migrations", []):
        migration_lines(m, console)
    if d["archived_bytes"]:
        console.print(f"  archived: {human_bytes(d['archived_bytes'])} read")
    if d["freed_bytes"] is not None:
        console.print(f"  space freed: {human_bytes(max(d['freed_bytes'], 0))} (expected "
                      f"{human_bytes(d.get('expected_freed_bytes'))})")
    for f in doc.get("datasets_freed", ()):
        console.print(Text.assemble(("  dataset destroyed: " if f["destroyed"] else
                                     "  dataset to be destroyed: ", "red"),
                                    shown(f["dataset"]), " (zfs destroy -r",
                                    ", with @" + ", @".join(f["snapshots"])
                                    if f["snapshots"] else "", "); restored from ",
                                    shown(f["restore"])))
    for s in d["snapshots"]:
        console.print(Text.assemble("  a snapshot holds the deleted data: ", shown(s["name"]),
                                    " (destroy it: ", shown(shlex.join(s["destroy"])), ")"))
    for m in r["manual"]:
        console.print(Text.assemble(("  to do by hand: ", "yellow"),
                                    shown(m["detail"] or m["summary"])))
    for f in r["failed"]:
        what = "started, never finished" if f["status"] == "started" else "failed"
        console.print(Text.assemble((f"  {what}: ", "red"), shown(f["id"]), " ",
                                    shown(f["detail"]), " (fix it, then run vacate apply "
                                                        "again: it resumes)"))
    loop = r.get("loop_device")
    if loop and doc.get("complete"):
        console.print(Text.assemble(("  still attached: ", "yellow"), shown(loop["device"]),
                                    " keeps ", shown(loop["backing_file"]),
                                    " open (detach it: ", shown(shlex.join(loop["command"])),
                                    ")"))
    for x in r["references"]:
        console.print(Text.assemble(("  still refers to it: ", "yellow"), shown(x["at"]),
                                    " names ", shown(x["path"]), " (", shown(went(x)), ")"))
    e = doc.get("estimate")
    if doc["source"] == "plan" and e:
        console.print(f"  would free {human_bytes(e['freed_bytes'])}; archiving "
                      f"{human_bytes(e['archive_bytes'])} takes about "
                      f"{human_duration(e['archive_estimate_s'])}")


def evidence_cell(evidence: list[dict], most: int = 5) -> Text:
    """The first ``most`` pieces of evidence, one a line (each name made one line by
    :func:`shown`; the lines joined here, so no newline is shown as ``\\n``)."""
    lines = [_t(f"{e['source']} ({e['kind']})") for e in evidence[:most]]
    if len(evidence) > most:
        lines.append(Text(f"… and {len(evidence) - most} more"))
    return Text("\n").join(lines)


def _table(title: str, *cols: str) -> Table:
    t = Table(title=title, title_justify="left", show_lines=False, expand=False)
    for c in cols:
        t.add_column(c, overflow="fold")
    return t


def render(doc: dict, console) -> None:
    """The summary, then what was there, what used it, what was done, what remains."""
    summary(doc, console)
    now = time.time()
    t = _table("what was there", "item", "kind", "size", "apparent", "modified", "status",
               "action")
    inside: dict[str, list] = {}
    for i in doc["there"]["inside"]:
        inside.setdefault(i["parent"], []).append(i)
    for row in doc["there"]["rows"]:
        t.add_row(_t(row["path"]), _t(row["label"] or row["kind"]),
                  human_bytes(row["disk_bytes"]), human_bytes(row["apparent_bytes"]),
                  human_age(row["newest_mtime"], now),
                  _t(row["status"], STATUS_STYLE.get(row["status"], "")),
                  _t(row.get("action_text") or row["action"] or "-"))
        for i in inside.get(row["path"], []):
            t.add_row(_t("  " + i["path"]), _t(i["label"] or i["kind"]),
                      human_bytes(i["disk_bytes"]), human_bytes(i["apparent_bytes"]),
                      human_age(i["newest_mtime"], now), "", "")
    console.print(t)
    if doc["used"]:
        by_id = {c["id"]: c for c in doc["used"]}
        t = _table("what used it", "who", "through", "evidence")
        for g in doc["used_by"]:
            for n, cid in enumerate(g["consumers"]):
                c = by_id[cid]
                # the group (a unit, a container) once; a consumer only where it is not the
                # group itself; each line of evidence shown as its own line of the cell
                t.add_row(_t(f"{g['type']} {g['name']}") if n == 0 else "",
                          "" if cid == g["key"] else _t(f"{c['type']} {c['name']}"),
                          evidence_cell(c["evidence"]))
        console.print(t)
    steps = doc["done"]["steps"]
    if steps:
        t = _table("what was done", "step", "status", "took", "what", "detail")
        for x in steps:
            took = human_duration(x["ended"] - x["started"]) \
                if x["ended"] and x["started"] else "-"
            t.add_row(_t(x["id"]), _t(x["status"], STATUS_STYLE.get(x["status"], "")), took,
                      _t(x["summary"]), _t(x["detail"][:300]))
        console.print(t)
    left = doc["remains"]["left"] or doc["would"]
    if left:
        t = _table("steps left" if doc["done"]["steps"] else "what would be done",
                   "step", "what", "command")
        for x in left:
            t.add_row(_t(x["id"]), _t(x["summary"]),
                      _t(shlex.join(x["command"]) if x["command"] else ""))
        console.print(t)
    refs = doc["remains"]["references"] + doc["done"]["fixed"]
    if refs:
        t = _table("what still names a path that is gone", "where", "path", "where it went")
        for x in refs:
            t.add_row(_t(x["at"]), _t(x["path"]),
                      _t(f"fixed by step {x['fixed']}" if x.get("fixed") else went(x)))
        console.print(t)
