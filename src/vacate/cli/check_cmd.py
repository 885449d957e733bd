"""``vacate check PATH``: everything that uses the volume, and the verdict.

Exit status: 0 safe to unmount, 1 in use, 2 usage or runtime error, 3 could not tell."""

from __future__ import annotations

import argparse
import os

from vacate import remote
from vacate.cli import check_fleet, paths
from vacate.cli.env import Env
from vacate.cli.scan_cmd import reaching
from vacate.observing.errors import EXIT_IN_USE, EXIT_OK, EXIT_UNKNOWN, Unanswered, UsageError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("check", help="everything that uses a volume, and whether it is safe "
                                     "to unmount (exit 0 safe, 1 in use, 3 could not tell)",
                       usage="%(prog)s [options] PATH\n"
                             "       %(prog)s --from FILE [options]\n"
                             "       %(prog)s --inventory FILE [options] PATH")
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="the volume's mount point, or any directory on it (required, but "
                        "with --from)")
    p.add_argument("--from", dest="saved", metavar="FILE", type=paths.readable_or_stdin,
                   help="decide from a saved observation (vacate observe; - for stdin) "
                        "instead of looking at this machine")
    p.add_argument("--json", action="store_true", help="versioned JSON on stdout")
    p.add_argument("--no-scan", action="store_true",
                   help="do not walk the volume: list its top level only (fast; sizes are "
                        "the entries' own)")
    p.add_argument("--no-config", action="store_true",
                   help="skip configured users (unit files, fstab, containers...)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="also write the document (vacate.check/1; with --inventory, the list "
                        "of them) to FILE, crash-safe")
    remote.add_arguments(p)
    check_fleet.add_arguments(p)
    return p


def exit_code(safe: bool | None) -> int:
    return EXIT_OK if safe is True else EXIT_IN_USE if safe is False else EXIT_UNKNOWN


def _output(args, env: Env) -> None:
    """``-o`` names a file, as for every command. ``-o DIR`` with --inventory, an existing
    directory, is taken as ``--output-dir DIR`` (scripts written so keep working), said."""
    out = args.output
    if out is None:
        return
    if os.path.isdir(out) and args.inventory is not None and args.output_dir is None:
        env.stderr.write(f"vacate: note: -o names a file now; -o {out}, a directory, is taken "
                         f"as --output-dir {out} (one file per host): say --output-dir\n")
        args.output_dir, args.output = out, None
        return
    try:
        paths.writable_file(out)
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"-o {e}", hint="--output-dir DIR (with --inventory) writes one file "
                         "per host" if os.path.isdir(out) else None) from None


def run(args, env: Env) -> int:
    _output(args, env)
    if check_fleet.wanted(args):
        return check_fleet.run(args, env)
    if (args.path is None) == (args.saved is None):
        raise UsageError("give either PATH or --from FILE")
    if args.saved is not None:
        from vacate.cli.saved import load_observation
        from vacate.decide import verdict

        if args.no_scan or args.no_config:
            raise UsageError("--no-scan and --no-config are for observing, not with --from")
        obs = load_observation(args.saved, env)
        if not obs.users:
            raise UsageError(f"{args.saved}: the observation was made with --no-users: it "
                             "holds no users to decide on")
        return show(verdict.check(obs), args, env)
    try:
        result = _look(args, env)
    except Unanswered as e:
        if args.json:         # a script still gets a document: the verdict is "could not tell"
            from vacate.observing.model.common import Problem
            from vacate.output import jsonfmt

            why = Problem("filesystem-not-answering", e.message, e.target.mountpoint,
                          blocks_verdict=True)
            env.stdout.write(jsonfmt.dumps(jsonfmt.unanswered_check_doc(e.target, why)))
        raise                 # the message and exit status 3, as for people
    return show(result, args, env)


def _look(args, env: Env):
    """Observe (here, or where --host / --ct say) and decide."""
    from vacate.decide import verdict

    if args.remote is not None or args.ct is not None:
        with reaching(args, env) as where:
            obs = where.observe(args.path, scan_tree=not args.no_scan,
                                configured=not args.no_config)
        return verdict.check(obs)
    early = None
    if env.host.live and env.host.proc == "/proc":
        # The first look over /proc runs on C threads or in a forked child (started by the
        # entry point, or now) while the rest of vacate is imported (collectors.procs_probe).
        from vacate.observing.collectors import procs_probe

        early = procs_probe.take_pending(args.path) or procs_probe.Early.start(args.path)
    try:
        from vacate.flow.check import check

        return check(args.path, host=env.host, scan_tree=not args.no_scan,
                     configured=not args.no_config, early=early)
    finally:
        if early is not None:
            early.close()


def show(result, args, env: Env) -> int:
    """Print a check's result (the document or the table) and give its exit status."""
    if args.json or args.output:
        from vacate.output import jsonfmt

        text = jsonfmt.dumps(jsonfmt.check_doc(result))
        if args.output:
            from vacate.observing.fsio import write_atomic

            write_atomic(args.output, text.encode("ascii"))
    if args.json:
        env.stdout.write(text)
    else:
        from vacate.output import check_view

        check_view.render(result, env.console())
    return exit_code(result.verdict.safe_to_unmount)
