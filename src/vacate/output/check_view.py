"""The people's view of a check: one row per item (path, size, last used, what it is, status,
used by), then the verdict and each blocker with its next action."""

from __future__ import annotations

import os

from rich.markup import escape
from rich.table import Table

from vacate.observing.human import human_age, human_bytes
from vacate.observing.model.sentence import render as render_actions
from vacate.observing.model.usage import CheckResult, Consumer

STATUS_STYLE = {"active": "bold red", "referenced": "yellow", "cold": "cyan",
                "disposable": "green", "artifact": "dim"}


def _who(c: Consumer) -> str:
    a = c.attrs
    if c.type == "process":
        s = a.unit or c.name
        s += f" (pid {a.pid}, {'+'.join(a.access or [])})"
        if a.container:
            s += f" in {a.container['type']} {a.container['name']}"
        if a.gpus:
            s += f", {len(a.gpus)} GPU" + ("s" if len(a.gpus) > 1 else "")
        return s
    if c.type == "systemd-unit":
        flags = [("enabled" if a.enabled else "disabled") if a.enabled is not None
                 else None, ("running" if a.active else "stopped")
                 if a.active is not None else None]
        flags = [f for f in flags if f]
        return c.name + (f" ({', '.join(flags)})" if flags else "")
    return f"{c.type} {c.name}"


def _used_by(ids: tuple[str, ...], by_id: dict[str, Consumer], limit: int = 3) -> str:
    names = list(dict.fromkeys(_who(by_id[i]) for i in ids if i in by_id))
    more = f" +{len(names) - limit} more" if len(names) > limit else ""
    return "; ".join(names[:limit]) + more


def _size(stats) -> str:
    """Size on disk; sparse content (weights, images) also shows its apparent size."""
    disk, apparent = stats.disk_bytes, stats.apparent_bytes
    if apparent > 2 * disk and apparent - disk > 1 << 20:
        return f"{human_bytes(disk)}\n[dim]{human_bytes(apparent)} apparent[/]"
    return human_bytes(disk)


def render(result: CheckResult, console) -> None:
    """The summary first (the verdict, each blocker with its next step, what could not be
    told), then the detail: the notes (each said once), the items, who uses the volume as a
    whole."""
    t = result.target
    via = result.host.via if result.host is not None else ""
    if result.ct is not None:
        console.print(f"[bold]{escape(via)}: {escape(result.ct.path)}[/] is "
                      f"{escape(result.ct.host_path)} on the host"
                      + ("" if result.ct.running else " (the container is stopped)"))
        via = ""
    console.print((f"[bold]{escape(via)}:[/] " if via else "") + f"[bold]{escape(t.path)}[/] on {t.mount.source} ({t.mount.fstype})  "
                  f"{human_bytes(t.used_bytes)} used of {human_bytes(t.size_bytes)}")
    by_id = {c.id: c for c in result.consumers}
    _verdict(result, console)
    console.print("\n[bold]detail[/]")
    once = {}
    for w in result.warnings:
        if not w.blocks_verdict:
            once.setdefault((w.code, w.path) if w.path else w.message, w.message)
    rest = list(once.values())
    for w in rest[:10]:
        console.print(f"[yellow]note:[/] {w}")
    if len(rest) > 10:
        console.print(f"[yellow]... and {len(rest) - 10} more notes (see --json)[/]")
    table = Table(show_edge=False)
    for col, just in (("path", "left"), ("size", "right"), ("last used", "right"),
                      ("what it is", "left"), ("status", "left"), ("used by", "left")):
        table.add_column(col, justify=just)
    tops = [u for u in result.items if u.item.parent is None]
    subs = [u for u in result.items if u.item.parent is not None]
    for u in sorted(tops, key=lambda u: u.item.stats.disk_bytes, reverse=True):
        rows = [u] + sorted((s for s in subs if s.item.parent == u.item.path),
                            key=lambda s: s.item.path)
        for r in rows:
            it = r.item
            rel = os.path.relpath(it.path, t.path) + ("/" if it.is_dir else "")
            name = rel if it.parent is None else "  " + rel
            last = max((x for x in (it.stats.newest_mtime, it.stats.newest_atime
                                    if t.atime_reliable else None) if x is not None),
                       default=None)
            what = it.classification.label if it.classification else ""
            style = STATUS_STYLE.get(r.status, "")
            size = _size(it.stats) if result.scanned or not it.is_dir else "-"
            table.add_row(name, size, human_age(last), what, f"[{style}]{r.status}[/]",
                          _used_by(r.users, by_id))
    console.print(table)
    if result.whole_volume:
        console.print("[bold]the volume itself[/] is used by: "
                      + _used_by(result.whole_volume, by_id, limit=6))


def _verdict(result: CheckResult, console) -> None:
    v = result.verdict
    if v.safe_to_unmount is True:
        console.print("[bold green]safe to unmount[/]: nothing uses it")
    elif v.safe_to_unmount is False:
        console.print(f"[bold red]not safe to unmount[/]: {len(v.blockers)} blocker"
                      + ("s" if len(v.blockers) != 1 else ""))
    else:
        console.print("[bold yellow]could not tell[/]: something could not be read "
                      "(unknown is never safe)")
    for b in v.blockers:
        console.print(f"  [red]-[/] {b.reason}\n      next: [bold]{render_actions(b.actions)}[/]")
    for p in v.unknowns[:10]:
        console.print(f"  [yellow]?[/] {p.message}")
