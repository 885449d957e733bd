"""The people's view of a fleet: one row per host (host, volume, verdict, blockers, errors),
the unsafe first, then a count of each verdict."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from vacate.observing.human import human_bytes
from vacate.output.check_view import _who

VERDICTS = {False: ("in use", "bold red"), None: ("could not tell", "bold yellow"),
            True: ("safe", "bold green")}
ORDER = {False: 0, None: 1, True: 2}


def ordered(checks) -> list:
    """In use first, then could not tell, then safe; the inventory's order within each."""
    return sorted(checks, key=lambda c: ORDER[c.safe])


def _volume(c) -> str:
    r = c.result
    if r is None:
        return ""
    t = r.target
    return (f"{escape(t.path)} on {escape(t.mount.source)} ({escape(t.mount.fstype)}), "
            f"{human_bytes(t.used_bytes)} used")


def _blockers(c, limit: int = 2) -> str:
    if c.result is None or not c.result.verdict.blockers:
        return ""
    by_id = {x.id: x for x in c.result.consumers}
    names = list(dict.fromkeys(_who(by_id[b.consumer]) if b.consumer in by_id else b.consumer
                               for b in c.result.verdict.blockers))
    more = f" +{len(names) - limit} more" if len(names) > limit else ""
    return f"{len(names)}: " + escape("; ".join(names[:limit])) + more


def _errors(c) -> str:
    if c.result is None:
        return f"[red]{escape(c.error or '')}[/]"
    unknowns = c.result.verdict.unknowns
    if not unknowns:
        return ""
    more = f" (+{len(unknowns) - 1} more)" if len(unknowns) > 1 else ""
    return f"[yellow]{escape(unknowns[0].message)}[/]{more}"


def render(checks, path: str, console) -> None:
    table = Table(show_edge=False)
    for col in ("host", "volume", "verdict", "blockers", "errors"):
        table.add_column(col, overflow="fold")
    for c in ordered(checks):
        text, style = VERDICTS[c.safe]
        host = escape(c.name) + (f"\n[dim]{escape(c.label)}[/]" if c.label != c.name else "")
        table.add_row(host, _volume(c), f"[{style}]{text}[/]", _blockers(c), _errors(c))
    console.print(f"[bold]{escape(path)}[/] on {len(checks)} host"
                  + ("s" if len(checks) != 1 else ""))
    console.print(table)
    counts = {k: sum(1 for c in checks if c.safe is k) for k in (False, None, True)}
    console.print(", ".join(f"[{VERDICTS[k][1]}]{counts[k]} {VERDICTS[k][0]}[/]"
                            for k in (False, None, True)))
