"""The people's view of a scan."""

from __future__ import annotations

import os

from rich.table import Table

from vacate.model.inventory import ScanResult
from vacate.output.units import human_age, human_bytes


def render(result: ScanResult, console, *, top: int = 20) -> None:
    t = result.target
    console.print(f"[bold]{t.path}[/] on {t.mount.source} ({t.mount.fstype}"
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
        name = os.path.relpath(it.path, t.path) + ("/" if it.is_dir else "")
        what = it.classification.label if it.classification else ""
        table.add_row(name, human_bytes(s.disk_bytes), human_bytes(s.apparent_bytes),
                      f"{s.files:,}", human_age(s.newest_mtime), human_age(s.newest_atime), what)
    tot = result.totals
    table.add_row("[bold]total[/]", human_bytes(tot.disk_bytes), human_bytes(tot.apparent_bytes),
                  f"{tot.files:,}", human_age(tot.newest_mtime), human_age(tot.newest_atime), "")
    console.print(table)
    for m in t.nested_mounts:
        console.print(f"[yellow]nested mount:[/] {m.mountpoint} ({m.fstype} {m.source})")
    for w in result.warnings[:20]:
        console.print(f"[yellow]warning:[/] {w.message}")
    if len(result.warnings) > 20:
        console.print(f"[yellow]... and {len(result.warnings) - 20} more warnings (see --json)[/]")
