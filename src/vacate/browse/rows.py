"""One line of the listing as rich segments, and the detail of an entry as rich Text: names
are always plain text (markup off) and escaped as ``ls -b`` shows them, so a name can
neither move the cursor nor change the screen."""

from __future__ import annotations

import time

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from vacate.browse.model import About, Entry, View, Volume, ages
from vacate.observing.human import human_bytes
from vacate.observing.model.sentence import render as render_actions
from vacate.output.report_names import shown

STATUS_STYLE = {"active": Style(color="red", bold=True), "referenced": Style(color="yellow"),
                "cold": Style(color="cyan"), "disposable": Style(color="green"),
                "artifact": Style(dim=True)}
ACTION_STYLE = {"keep": Style(color="blue"), "archive": Style(color="magenta"),
                "delete": Style(color="red", bold=True), "migrate": Style(color="green")}
DIM = Style(dim=True)
BAR = 10
WIDE = 120      # from this width on, the apparent size, files, age and kind are shown too


def size_of(e: Entry, view: View) -> int:
    return e.apparent_bytes if view.apparent else e.disk_bytes


def line(vol: Volume, e: Entry, about: About | None, view: View, biggest: int, width: int,
         *, now: float | None = None) -> list[Segment]:
    """The segments of one row, exactly ``width`` cells wide."""
    now = time.time() if now is None else now
    mark = vol.marks.get(e.path)
    size = size_of(e, view)
    fill = round(BAR * size / biggest) if biggest > 0 else 0
    segs = [Segment(("*" if mark else " ") + " ", ACTION_STYLE.get(mark) or DIM),
            Segment(f"{human_bytes(size):>9} "),
            Segment("[" + "#" * fill, Style(color="green")),
            Segment(" " * (BAR - fill) + "] ", DIM)]
    status = about.status if about and e.markable else None
    action = about.action if about and e.markable else None
    if mark:
        action = mark
    segs += [Segment(f"{(status or ''):<10} ", STATUS_STYLE.get(status, DIM)),
             Segment(f"{(action or ''):<8}", ACTION_STYLE.get(action, DIM))]
    if width >= WIDE:
        other = e.disk_bytes if view.apparent else e.apparent_bytes
        kind = ""
        if about is not None and about.item is not None and about.own:
            c = about.item.classification
            kind = c.kind if c is not None else ""
        segs += [Segment(f"{human_bytes(other):>9}{'D' if view.apparent else 'A'} ", DIM),
                 Segment(f"{e.files:>8} " if e.kind == "dir" else " " * 9, DIM),
                 Segment(f"{ages(e.newest_mtime, now):>4} ", DIM),
                 Segment(f"{kind[:14]:<14} ", DIM)]
    used = sum(cell_len(s.text) for s in segs)
    name = shown(e.name) + ("/" if e.is_dir else "")
    style = DIM if e.kind == "rest" else (Style(bold=True) if e.is_dir else Style())
    segs.append(Segment(" " + set_cell_size(name, max(width - used - 1, 0)), style))
    return segs


def header(vol: Volume, cwd: str, view: View, at: tuple[int, int] | None = None) -> Text:
    """Two lines: the volume and the verdict; the directory shown, where the cursor is in
    it (``at``: entry, entries; the list has no scrollbar), the sort, the filters and the
    marks."""
    obs, t = vol.obs, vol.obs.target
    host = (obs.host.via or obs.host.hostname) if obs.host is not None else ""
    top = Text(no_wrap=True, overflow="ellipsis")
    v = vol.check.verdict
    if v.safe_to_unmount is True:
        top.append("safe to unmount", Style(color="green", bold=True))
    elif v.safe_to_unmount is False:
        n = len(v.blockers)
        top.append(f"not safe to unmount: {n} blocker" + ("s" if n != 1 else ""),
                   Style(color="red", bold=True))
    else:
        top.append("could not tell (unknown is never safe)", Style(color="yellow", bold=True))
    top.append("  ")
    if host:
        top.append(shown(host) + ": ", Style(bold=True))
    top.append(shown(t.path), Style(bold=True))
    top.append(f" on {shown(t.mount.source)} ({t.mount.fstype})  {human_bytes(t.used_bytes)} "
               f"used of {human_bytes(t.size_bytes)}")
    top.append("\n")
    top.append(shown(cwd) + "/", Style(bold=True))
    bits = [f"sort: {view.sort}", "apparent sizes" if view.apparent else "sizes on disk"]

    if view.status:
        bits.append(f"status: {view.status}")
    if view.kind:
        bits.append(f"kind: {view.kind}")
    if vol.marks:
        bits.append(f"{len(vol.marks)} marked")
    if vol.loaded_plan is not None:
        bits.append("editing a plan")
    if vol.listed is not None:
        bits.append("every file listed")
    if at is not None and at[1]:
        bits.append(f"{at[0] + 1}/{at[1]}")     # last: the first to be cut off
    top.append("  " + " · ".join(bits), DIM)
    return top


def detail(vol: Volume, e: Entry | None) -> Text:
    """What is known of the selected entry, as plain text with styles."""
    out = Text()
    if e is None:
        out.append("(empty)", DIM)
        return out
    if e.kind == "rest":
        out.append(f"{shown(e.name)} in {shown(e.path)}/\n", Style(bold=True))
        out.append(f"{human_bytes(e.disk_bytes)} on disk, {human_bytes(e.apparent_bytes)} "
                   "apparent (the directory itself included). The observation counts these "
                   "files without naming them one by one.", DIM)
        return out
    a = vol.about(e.path)
    out.append(shown(e.path) + ("/" if e.is_dir else ""), Style(bold=True))
    out.append(f"  {human_bytes(e.disk_bytes)} on disk, {human_bytes(e.apparent_bytes)} "
               f"apparent, {e.files} file" + ("s" if e.files != 1 else "") + "\n")
    if a.status:
        out.append("status: ")
        out.append(a.status, STATUS_STYLE.get(a.status, Style()))
    mark = vol.marks.get(e.path)
    if a.action or mark:
        out.append("   planned: ")
        out.append(mark or a.action, ACTION_STYLE.get(mark or a.action, Style()))
        if mark:
            out.append(" (marked here)")
        elif a.reason:
            out.append(f" ({shown(a.reason)})", DIM)
    out.append("\n")
    it = a.item
    c = it.classification if it is not None else None
    if it is not None:
        where = "" if a.own else f" (inside {shown(it.path)})"
        if c is not None:
            out.append(f"{c.kind}{where}: ", Style(bold=True))
            out.append(shown(c.label) + (" (a guess from its name)" if c.guess else "") + "\n")
        else:
            out.append(f"{'directory' if it.is_dir else 'file'}{where}\n")
    if vol.plan_error:
        out.append(f"the planner refuses the marks: {shown(vol.plan_error)}\n",
                   Style(color="red"))
    for b in a.blockers:
        out.append("blocker: ", Style(color="red", bold=True))
        out.append(shown(b.reason) + "\n")
        out.append("  next: " + shown(render_actions(b.actions)) + "\n")
    if a.consumers:
        out.append("used by:\n", Style(bold=True))
        for u in a.consumers:
            out.append(f"  {shown(who(u))}\n")
            for ev in u.evidence[:4]:
                if ev.path is None or _related(ev.path, e.path):
                    out.append(f"    {ev.kind} {shown(ev.source)}"
                               + (f": {shown(ev.detail)}" if ev.detail else "") + "\n", DIM)
    else:
        out.append("nothing was seen using it\n", DIM)
    if c is not None:
        if c.source:
            out.append(f"get it again: {shown(c.source)} ({c.recoverable or 'unknown'})\n")
        else:
            out.append("no source to get it again is known"
                       + (f" ({c.recoverable})" if c.recoverable else "") + "\n")
    if a.get_back and not mark:
        out.append(f"way back if {a.action}d: {shown(a.get_back)}\n", DIM)
    if c is not None and a.own and c.details:
        keys = [k for k in c.details if isinstance(c.details[k], (str, int, float))]
        out.append("  ".join(f"{k}: {shown(str(c.details[k]))}" for k in keys[:8]) + "\n", DIM)
    return out


def _related(p: str, path: str) -> bool:
    from vacate.observing.parsers.paths import is_under

    return is_under(p, path) or is_under(path, p)


def who(c) -> str:
    from vacate.output.check_view import _who

    return _who(c)
