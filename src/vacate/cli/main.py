"""``vacate`` entry point: parse arguments, dispatch to one command module, map errors to
exit codes. ``main(argv, env)`` returns the exit status instead of exiting."""

from __future__ import annotations

import importlib
import os
import sys

from vacate import __version__
from vacate.errors import EXIT_ERROR, VacateError

# argparse, signal and Env (dataclasses) are imported when used: `vacate check` starts its
# /proc pass in entry() first, so that it runs while they are imported.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from vacate.cli.env import Env

# (command, module under vacate.cli). Each module has add_parser(subparsers) and run(args, env).
COMMANDS = (
    ("demo", "demo_cmd"),
    ("scan", "scan_cmd"),
    ("check", "check_cmd"),
    ("archive", "archive_cmd"),
    ("verify", "verify_cmd"),
    ("restore", "restore_cmd"),
)


def _modules(only: str | None = None):
    for name, modname in COMMANDS:
        if only is not None and name != only:
            continue
        try:
            mod = importlib.import_module(f"vacate.cli.{modname}")
        except ModuleNotFoundError as e:
            if e.name == f"vacate.cli.{modname}":
                continue   # command not built yet
            raise
        yield name, mod


def _invoked(argv: list[str]) -> str | None:
    """The command ``argv`` names first (``vacate check ...``), so that only its module is
    imported (start-up time); None for ``--help``, ``--version`` or no command."""
    if argv and argv[0] in {name for name, _ in COMMANDS}:
        return argv[0]
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with only the command ``only``."""
    import argparse

    class Formatter(argparse.HelpFormatter):
        def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
            super().__init__(prog, indent_increment, max_help_position, width or _columns())

    class Parser(argparse.ArgumentParser):      # every command's parser uses Formatter
        def __init__(self, *args, formatter_class=Formatter, **kwargs):
            super().__init__(*args, formatter_class=formatter_class, **kwargs)

    p = Parser(
        prog="vacate",
        description="Is anything still using this volume? Audit it, back it up cold, retire it.",
    )
    p.add_argument("--version", action="version", version=f"vacate {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, mod in _modules(only):
        sp = mod.add_parser(sub)
        sp.set_defaults(_run=mod.run)
    return p


class _Terminated(Exception):
    pass


def _on_term(signum, frame):
    import signal

    raise _Terminated(signal.Signals(signum).name)


def _columns() -> int:
    """The terminal's width for --help, as argparse would find it, without the import of
    shutil (and bz2, lzma) that argparse's formatter makes for it."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


def main(argv: list[str] | None = None, env: Env | None = None) -> int:
    from vacate.cli.env import Env

    env = env or Env()
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(_invoked(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:   # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    if not getattr(args, "_run", None):
        parser.print_help(env.stderr)
        return EXIT_ERROR
    try:
        return int(args._run(args, env))
    except VacateError as e:
        print(f"vacate: error: {e.message}", file=env.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=env.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("vacate: interrupted", file=env.stderr)
        return 130
    except _Terminated as e:
        print(f"vacate: stopped by {e}", file=env.stderr)
        return 143


def entry() -> None:
    from vacate.collectors import procs_probe

    procs_probe.start_for_argv(sys.argv[1:])      # `vacate check PATH`: the /proc pass starts
    import signal

    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGHUP, _on_term)
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(EXIT_ERROR)
    finally:
        procs_probe.close_pending()
