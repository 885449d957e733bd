"""``vacate demo``: build the story's /data as a small real volume and show what vacate says
about it, with every command that exists (scan, then check, ...)."""

from __future__ import annotations

import argparse

from vacate.cli.env import Env
from vacate.errors import EXIT_OK, VacateError

# the commands the demo runs on the volume, in order, when they exist
STEPS: tuple[tuple[str, ...], ...] = (("scan",), ("check",))


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("demo", help="build an example /data volume (sparse files standing in "
                                    "for a 223 GB model, 4.8 TB of EAGLE-3 data...) and audit it")
    p.add_argument("--keep", action="store_true",
                   help="leave the volume in place (mounted) and print how to remove it")
    p.add_argument("--dir", metavar="DIR",
                   help="build it as a plain directory DIR/data instead of a loop-mounted image")
    return p


def run(args, env: Env) -> int:
    from vacate import demo
    from vacate.cli import main as cli

    try:
        vol = demo.create(args.dir, loop=False if args.dir else None)
    except (OSError, ValueError) as e:
        raise VacateError(f"cannot build the example volume: {e}",
                          hint="run as root for a loop-mounted image, or pass --dir DIR") from None
    out = env.console()
    status = EXIT_OK
    try:
        out.print(f"[bold]The example /data[/] is a {vol.kind} at [bold]{vol.path}[/]"
                  + (f" ({vol.device}, image {vol.image})" if vol.device else "") + ".")
        out.print("It holds what the story's volume held, as sparse files (real headers, "
                  "holes for the bytes).\n")
        commands = dict(cli.COMMANDS)
        for step in STEPS:
            if step[0] not in commands or not _exists(commands[step[0]]):
                continue
            out.print(f"[bold cyan]$ vacate {' '.join(step)} {vol.path}[/]")
            rc = cli.main([*step, vol.path], env)
            out.print("")
            if step[0] == "check":
                status = rc
    finally:
        if args.keep:
            out.print(f"Kept: {vol.path}. Remove it with:")
            for c in vol.teardown_commands():
                out.print(f"  {c}")
        else:
            problems = vol.close()
            for p in problems:
                print(f"vacate: cleanup: {p}", file=env.stderr)
    # the demo's own success does not depend on the verdict it shows
    return EXIT_OK if status in (0, 1, 3) else status


def _exists(modname: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(f"vacate.cli.{modname}") is not None
