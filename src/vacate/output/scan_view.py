"""The people's view of a scan."""

from __future__ import annotations

import os

from rich.markup import escape
from rich.table import Table

from vacate.observing.human import human_age, human_bytes
from vacate.observing.model.inventory import ScanResult


def _shown(name: str) -> str:
    """A name as people can read it on one line: control characters and bytes that are not
    UTF-8 are shown escaped (``\\n``, ``\\xe9``); rich markup is escaped too."""
    if name.isprintable():
        return escape(name)
    raw = os.fsencode(name)
    return escape(raw.decode("utf-8", "backslashreplace").encode("unicode_escape")
                  .decode("ascii").replace("\\\\", "\\"))


def render(result: ScanResult, console, *, top: int = 20, via: str = "") -> None:
    t = result.target
    console.print((f"[bold]{escape(via)}:[/] " if via else "") + f"[bold]{escape(t.path)}[/] on {t.mount.source} ({t.mount.fstype}"
                  + (f", dataset {t.zfs_dataset}" if t.zfs_dataset else "") + ")"
                  + f"  {human_bytes(t.used_bytes)} used of {human_bytes(t.size_bytes)}")
    if not t.atime_reliable:
        console.print(f"[yellow]atime:[/] {t.atime_note}")
    table = Table(show_edge=False)
    for col, just in (("item", "left"), ("on disk", "right"), ("apparent", "right"),
                      ("files", "right"), ("modified", "right"), ("accessed", "right"),
                      ("what it is", "left")):
        table.add_column(col, justify=just)
    for it in sorted(result.items, key=lambda i: i.stats.disk_bytes, reverse=True):
        s = it.stats
        name = _shown(os.path.relpath(it.path, t.path)) + ("/" if it.is_dir else "")
        what = it.classification.label if it.classification else ""
        table.add_row(name, human_bytes(s.disk_bytes), human_bytes(s.apparent_bytes),
                      f"{s.files:,}", human_age(s.newest_mtime), human_age(s.newest_atime), what)
    tot = result.totals
    table.add_row("[bold]total[/]", human_bytes(tot.disk_bytes), human_bytes(tot.apparent_bytes),
                  f"{tot.files:,}", human_age(tot.newest_mtime), human_age(tot.newest_atime), "")
    console.print(table)
    if top > 0 and result.largest_files:
        files = Table(title="largest files", show_edge=False, title_justify="left")
        for col, just in (("file", "left"), ("apparent", "right"), ("on disk", "right"),
                          ("modified", "right"), ("accessed", "right")):
            files.add_column(col, justify=just)
        for f in result.largest_files[:top]:
            files.add_row(_shown(os.path.relpath(f.path, t.path)), human_bytes(f.apparent_bytes),
                          human_bytes(f.disk_bytes), human_age(f.mtime), human_age(f.atime))
        console.print(files)
    console.print(f"{tot.files:,} files, {tot.dirs:,} directories in {result.elapsed_s:.1f} s"
                  + ("" if t.atime_reliable else "  (access times not reliable here)"))
    for m in t.nested_mounts:
        console.print(f"[yellow]nested mount:[/] {m.mountpoint} ({m.fstype} {m.source})")
    gaps = [w for w in result.warnings if w.blocks_verdict]
    if gaps:
        console.print(f"[red]incomplete:[/] {len(gaps)} place(s) could not be read; the totals "
                      "above are a lower bound")
    for w in result.warnings[:20]:
        console.print(f"[yellow]warning:[/] {w.message}")
    if len(result.warnings) > 20:
        console.print(f"[yellow]... and {len(result.warnings) - 20} more warnings (see --json)[/]")
