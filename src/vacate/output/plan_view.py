"""The people's view of a plan: per item the action, size, why and what it takes to get it
back; then the steps in order as the commands a person would type."""

from __future__ import annotations

import os

from rich.markup import escape
from rich.table import Table

from vacate.decide.inside import inside
from vacate.observing.human import human_bytes, human_duration
from vacate.observing.model.plan import RESTORE_MEANS, Plan
from vacate.observing.model.sentence import command
from vacate.output.report_migrate import action_text

ACTION_STYLE = {"keep": "cyan", "archive": "yellow", "delete": "red", "migrate": "green"}


def step_line(s) -> str:
    """A step as a person would do it: its command, or what vacate does itself."""
    if s.action is not None and s.action.argv:
        return command(s.action)
    return s.summary


def _size(it) -> str:
    """Size on disk; sparse content also shows its apparent size (as check's table)."""
    if it.apparent_bytes > 2 * it.disk_bytes and it.apparent_bytes - it.disk_bytes > 1 << 20:
        return f"{human_bytes(it.disk_bytes)}\n[dim]{human_bytes(it.apparent_bytes)} apparent[/]"
    return human_bytes(it.disk_bytes)


def _inside_row(t, plan: Plan, it, x) -> None:
    """A recognised item that goes with ``it``: what it is, and what it would take on its
    own (the override that makes it so)."""
    st = x.item.stats
    c = x.item.classification
    rel = os.path.relpath(x.item.path, plan.target_path)
    what = c.label + (f" ({c.recoverable})" if c.recoverable else "")
    own = f"on its own: {x.suggested}, {x.why}"
    if x.suggested != it.action:
        own += f"; {x.override} to plan it so"
    t.add_row(f"[dim]  {escape(rel)}{'/' if x.item.is_dir else ''}[/]",
              f"[dim]with {escape(os.path.relpath(it.path, plan.target_path))}[/]",
              f"[dim]{_size(st)}[/]", f"[dim]{escape(what)}[/]", f"[dim]{escape(own)}[/]")


def render(plan: Plan, console, *, steps: bool = True) -> None:
    console.print(f"[bold]plan to retire {escape(plan.target_path)}[/] ({plan.fstype}, mount "
                  f"{plan.mount_id}, device {plan.mount_dev})")
    t = Table(show_edge=False)
    for col, just in (("item", "left"), ("action", "left"), ("size", "right"),
                      ("why", "left"), ("to get it back", "left")):
        t.add_column(col, justify=just)
    within = inside(plan)
    for it in plan.items:
        t.add_row(escape(os.path.relpath(it.path, plan.target_path)) + ("/" if it.files != 1
                                                                        or it.kind == "directory"
                                                                        else ""),
                  f"[{ACTION_STYLE[it.action]}]{escape(action_text(it))}[/]", _size(it),
                  escape(it.reason),
                  escape(it.get_back))
        for x in within.get(it.path, ()):
            _inside_row(t, plan, it, x)
    console.print(t)
    if plan.archive_to:
        console.print(f"archive: {human_bytes(plan.archive_bytes)} to "
                      f"{escape(plan.archive_to)}, about "
                      f"{human_duration(plan.archive_estimate_s)} at the hashing rate")
    if plan.archive_format != "tar":
        for f in plan.archive_formats:
            console.print(f"archive format {f}: gives back {escape(RESTORE_MEANS[f])}")
        console.print("the dataset's archive is verified " + (
            f"by receiving it into {escape(plan.verify_pool)}" if plan.verify_pool else
            "by parsing its stream end to end (the weaker check: no --verify-pool)"))
    if plan.expected_freed_bytes or any(i.action == "delete" for i in plan.items):
        console.print(f"space freed by the deletes: {human_bytes(plan.expected_freed_bytes)}"
                      + (" (a snapshot holds it until destroyed)"
                         if plan.snapshot and plan.fstype in ("zfs", "btrfs") else ""))
    for s in plan.steps:
        if s.kind == "destroy-dataset":
            p = s.params
            console.print(f"[red]the dataset {escape(p.dataset)} will be destroyed[/] (zfs "
                          "destroy -r), last, once every archive of it is verified in the "
                          "apply" + (f"; with it its snapshots "
                                     f"{escape(', '.join('@' + n for n in p.snapshots))}"
                                     if p.snapshots else "")
                          + f"; what restores it: {escape(p.restore)}")
    for it in plan.items:
        if it.action == "migrate":
            free = "not known" if it.dest_free_bytes is None else \
                human_bytes(it.dest_free_bytes)
            console.print(f"migrate: {escape(os.path.relpath(it.path, plan.target_path))} "
                          f"({human_bytes(it.disk_bytes)}) to {escape(it.migrate_to)}; free "
                          f"there when planned: {free}" + ("; its source deleted once what "
                                                           "used it runs from there"
                                                           if it.delete_source else ""))
    if not steps:
        return
    console.print("\n[bold]steps[/]")
    for s in plan.steps:
        tag = "" if not s.downtime else " [dim](downtime)[/]"
        console.print(f"  {s.id}  {escape(step_line(s))}{tag}")
    for why in plan.blocked:
        console.print(f"[red]cannot be applied:[/] {escape(why)}")
