"""The people's view of an apply: a line per step as it ends, progress bars for the long
ones, and at the end the summary: what is gone, what is left and why, space freed, the manual
steps with their commands, and every reference to a removed or archived path."""

from __future__ import annotations

import shlex
from contextlib import contextmanager

from rich.markup import escape

from vacate.observing.units import human_bytes

STYLE = {"ok": "green", "skipped": "cyan", "failed": "bold red", "manual": "yellow",
         "would": "dim", "pending": "dim"}


def step_line(r, console) -> None:
    tag = f"[{STYLE.get(r.status, '')}]{r.status:>7}[/]"
    more = f"  [dim]{escape(r.detail[:300])}[/]" if r.detail else ""
    earlier = " [dim](earlier run)[/]" if r.earlier else ""
    console.print(f"{tag} {r.id}  {escape(r.summary)}{earlier}{more}")


@contextmanager
def progress(env):
    """A progress callback ``(step, done, total, what)`` drawing a bar on a terminal."""
    if not env.stderr_isatty:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(),
                  console=env.console(stderr=True), transient=True) as bar:
        tasks: dict[str, int] = {}

        def update(step, done, total, what):
            if step.id not in tasks:
                tasks[step.id] = bar.add_task(f"{what} {step.id}", total=total or None)
            bar.update(tasks[step.id], completed=done, total=total or None)

        yield update


def summary(result, console) -> None:
    from vacate.output.report import report

    plan = result.plan
    if result.dry_run:
        console.print(f"[bold]dry run of {escape(plan.target_path)}[/]: nothing was changed")
        for s in result.steps:
            step_line(s, console)
        return
    doc = report(plan, _records(result))
    items = {i.path: i for i in plan.items}
    gone = [p for p in items if items[p].action == "delete" and any(
        s.kind == "delete" and s.status == "ok" and s.data and s.data.get("item") == p
        for s in result.steps)]
    console.print(f"\n[bold]{escape(plan.target_path)}[/]: "
                  + ("retired" if result.complete else "not finished"))
    for p in gone:
        console.print(f"  gone: {escape(p)} ({human_bytes(items[p].disk_bytes)}; "
                      f"{escape(items[p].get_back)})")
    for k in doc["remains"]["kept"]:
        where = "archived, and left on the volume" if k["action"] == "archive" else \
            "left on the volume"
        console.print(f"  {where}: {escape(k['path'])} ({escape(k['why'])})")
    d = doc["done"]
    if d["archived_bytes"]:
        console.print(f"  archived: {human_bytes(d['archived_bytes'])} read")
    if d["freed_bytes"] is not None:
        console.print(f"  space freed: {human_bytes(max(d['freed_bytes'], 0))}")
    for s in d["snapshots"]:
        console.print(f"  a snapshot holds the deleted data: {escape(s['name'])} (destroy it: "
                      f"{escape(shlex.join(s['destroy']))})")
    for m in doc["remains"]["manual"]:
        console.print(f"  [yellow]to do by hand:[/] {escape(m['detail'] or m['summary'])}")
    for f in doc["remains"]["failed"]:
        console.print(f"  [red]failed:[/] {f['id']} {escape(f['detail'])} (fix it, then run "
                      "vacate apply again: it resumes)")
    for r in doc["remains"]["references"]:
        console.print(f"  [yellow]still refers to it:[/] {escape(r['at'])} names "
                      f"{escape(r['path'])} ({escape(_went(r))})")


def _records(result) -> list[dict]:
    from vacate.act.journal import path_for, read_records

    return read_records(path_for(result.plan_path))


def render_report(doc, console) -> None:
    p = doc["plan"]
    console.print(f"[bold]{escape(p['target_path'])}[/] ({p['fstype']}, device "
                  f"{p['mount_dev']}): " + ("retired" if doc["complete"] else
                                            "applied in part" if doc["done"]["steps"] else
                                            "planned, not applied"))
    for x in doc["done"]["steps"]:
        console.print(f"  [{STYLE.get(x['status'], '')}]{x['status']:>7}[/] {x['id']}  "
                      f"{escape(x['summary'])}")
    for x in doc["would"]:
        console.print(f"  [dim]  would[/] {x['id']}  {escape(x['summary'])}")
    for r in doc["remains"]["references"]:
        console.print(f"  [yellow]still refers to it:[/] {escape(r['at'])} names "
                      f"{escape(r['path'])} ({escape(_went(r))})")


def _went(r: dict) -> str:
    """Where the data a reference names went."""
    if r.get("archive"):
        return f"archived at {r['archive']}; restore it: {shlex.join(r['restore'])}"
    return "deleted" if r["action"] == "delete" else r["action"]
