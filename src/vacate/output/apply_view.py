"""The people's view of an apply: a line per step as it ends, progress bars for the long
ones, and at the end the summary: what is gone, what is left and why, space freed, the manual
steps with their commands, and every reference to a removed or archived path."""

from __future__ import annotations

from contextlib import contextmanager

from rich.markup import escape
from rich.text import Text

from vacate.output.report_names import shown

STYLE = {"ok": "green", "skipped": "cyan", "failed": "bold red", "manual": "yellow",
         "would": "dim", "pending": "dim", "started": "bold red"}


def step_line(r, console) -> None:
    """One step's line; every status a journal can hold has one (an unknown one is shown
    plain), and names are text, never markup."""
    line = Text.assemble((f"{r.status:>7}", STYLE.get(r.status, "")), " ", shown(r.id), "  ",
                         shown(r.summary))
    if r.earlier:
        line.append(" (earlier run)", style="dim")
    if r.detail:
        line.append("  " + shown(r.detail[:300]), style="dim")
    console.print(line)


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
    from vacate.output import report_text

    report_text.summary(report(plan, _records(result)), console)


def _records(result) -> list[dict]:
    from vacate.observing.model.journal import path_for, read_records

    return read_records(path_for(result.plan_path))
