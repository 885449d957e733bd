"""``vacate apply PLAN``: carry out a reviewed plan, journaled and resumable.

Exit status: 0 retired (every step done, unmounted, nothing left to do); 4 all that vacate
can do is done and manual steps remain; 1 a step failed (it stops there; the journal says
where; a rerun resumes); 2 refused (not approved, stale, edited) or usage; 3 could not
tell."""

from __future__ import annotations

import argparse

from vacate import remote
from vacate.cli import paths
from vacate.cli.env import Env
from vacate.observing.errors import UsageError

DOES = (
    "Carries out the plan's steps, in order, on the machine the plan was made for (here, or "
    "its --host over ssh), and only those: it stops, disables or masks systemd units; ends "
    "processes (SIGTERM, then SIGKILL after the plan's --grace); stops containers; turns off "
    "swap, detaches loop devices, stops NFS/Samba exports; archives items and reads the "
    "archives back; takes a snapshot (ZFS, btrfs) and deletes what the plan deletes; copies "
    "what it migrates and repoints the units and links that used it; comments out or "
    "repoints config lines (fstab, exports, crontabs, a Proxmox container's mount point); "
    "unmounts the volume; and makes the empty mount point immutable (chattr +i) so nothing "
    "writes there. It shows the plan and asks first (--yes: without asking). Each step's "
    "intent and outcome go to PLAN.journal before and after; a stale or edited plan is "
    "refused. --dry-run checks every step against the machine and changes nothing.")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("apply", help="carry out a reviewed plan (vacate plan -o FILE): "
                                     "journaled, resumable; asks first",
                       description=DOES)
    p.add_argument("plan", metavar="PLAN", type=paths.readable_file, help="the plan file")
    p.add_argument("--yes", action="store_true",
                   help="approve without asking (needed without a terminal)")
    p.add_argument("--dry-run", action="store_true",
                   help="check the plan against the machine and say what each step would "
                        "do; change nothing")
    p.add_argument("--json", action="store_true",
                   help="the report (vacate.report/1) on stdout at the end")
    p.add_argument("--undo", action="store_true",
                   help="reverse what this plan's apply repointed (as vacate undo PLAN)")
    p.add_argument("--host", dest="remote", metavar="[USER@]HOST[:PORT]",
                   help="the host the plan is for (a plan made with --host is applied there "
                        "by itself; given, it must name the same host)")
    remote.add_stall_argument(p, "a stall fails the step under way, resumably: apply the "
                                 "plan again to go on")
    return p


def _approve(plan, env: Env) -> None:
    from vacate.output import plan_view

    if not env.stdin_isatty:
        raise UsageError("not approved: vacate apply asks on a terminal; without one, pass "
                         "--yes")
    plan_view.render(plan, env.console(stderr=True))
    on = f" on {plan.observation.host.via}" if plan.observation.host.via else ""
    env.stderr.write(f"Apply this plan to {plan.target_path}{on}? [y/N] ")
    env.stderr.flush()
    answer = (env.stdin.readline() or "").strip().lower()
    if answer not in ("y", "yes"):
        raise UsageError("not approved: nothing was changed")


def stopped_at(plan_path: str) -> str:
    """Where an interrupted apply stopped (the step its journal has begun and not ended)
    and the command that resumes it."""
    from vacate.observing.model.journal import path_for, read_records

    try:
        recs = read_records(path_for(plan_path))
    except (OSError, ValueError):
        recs = []
    open_steps: dict[str, dict] = {}
    for r in recs:
        if r.get("event") == "intent":
            open_steps[r.get("step")] = r
        elif r.get("event") == "outcome":
            open_steps.pop(r.get("step"), None)
    resume = f"vacate apply {plan_path} --yes"
    if not any(r.get("event") == "intent" for r in recs):
        return f"stopped before any step: nothing was changed. To apply it: {resume}"
    if open_steps:
        step = list(open_steps)[-1]
        return (f"stopped in step {step}, begun and not finished (the journal says so; it is "
                f"checked again, never taken as done). To resume: {resume}")
    return f"stopped between steps (the journal says which are done). To resume: {resume}"


def run(args, env: Env) -> int:
    from vacate.flow import apply as ap
    from vacate.output import apply_view, jsonfmt

    if args.undo:
        from vacate.cli import undo_cmd

        return undo_cmd.run(args, env)

    loaded = None
    if not args.dry_run and not args.yes:
        loaded = ap.read(args.plan)
        ap.check_plan(loaded.plan, args.plan)
        _approve(loaded.plan, env)
    console = env.console(stderr=True)
    try:
        with apply_view.progress(env) as progress:
            result = ap.apply(args.plan, host=env.host, dry_run=args.dry_run, loaded=loaded,
                              remote=args.remote, progress=progress,
                              stall_s=remote.stall_of(args),
                              on_step=lambda r: apply_view.step_line(r, console))
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt) or type(e).__name__ == "_Terminated":
            e.add_note(stopped_at(args.plan))
        raise
    if args.json:
        from vacate.output.report import report_of

        env.stdout.write(jsonfmt.dumps(report_of(args.plan, result.plan)))
    else:
        apply_view.summary(result, env.console())
    return ap.exit_code(result)
