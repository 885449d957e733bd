"""``vacate`` entry point: parse arguments, dispatch to one command module, map errors to
exit codes. ``main(argv, env)`` returns the exit status instead of exiting."""

from __future__ import annotations

import importlib
import os
import sys

from vacate import __version__
from vacate.observing.errors import EXIT_ERROR, VacateError

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
    ("observe", "observe_cmd"),
    ("plan", "plan_cmd"),
    ("apply", "apply_cmd"),
    ("undo", "undo_cmd"),
    ("report", "report_cmd"),
    ("browse", "browse_cmd"),
    ("archive", "archive_cmd"),
    ("verify", "verify_cmd"),
    ("restore", "restore_cmd"),
    ("payload", "payload_cmd"),
    ("collection", "collection_cmd"),
)


def _modules(only: str | None = None):
    """(command, module) for every command, or for the command ``only``."""
    for name, modname in COMMANDS:
        if only is None or name == only:
            yield name, importlib.import_module(f"vacate.cli.{modname}")


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

        def _fill_text(self, text, width, indent):
            """Each line of a description or epilog filled alone; a line that starts with
            spaces (a list: the exit status) keeps them, and its continuation is indented
            under its text."""
            import textwrap

            out = []
            for line in text.splitlines() or [""]:
                lead = line[:len(line) - len(line.lstrip())]
                hang = lead + " " * (len(line.lstrip().split(" ", 1)[0]) + 2) if lead else ""
                out.append(textwrap.fill(" ".join(line.split()), width,
                                         initial_indent=indent + lead,
                                         subsequent_indent=indent + hang) or indent)
            return "\n".join(out)

    class Parser(argparse.ArgumentParser):      # every command's parser uses Formatter
        def __init__(self, *args, formatter_class=Formatter, **kwargs):
            super().__init__(*args, formatter_class=formatter_class, **kwargs)

    p = Parser(
        prog="vacate",
        description="Is anything still using this volume? Audit it, back it up cold, retire it.",
        epilog="Sizes are shown in powers of 1000 (kB, MB, GB, TB: 1 GB is 10^9 bytes, as df -H "
               "shows them) and read the same way (--part-size 1G; 1GiB for 2^30). "
               "vacate COMMAND --help says what each command does and its exit status.",
    )
    p.add_argument("--version", action="version", version=f"vacate {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    from vacate.cli import exits

    for name, mod in _modules(only):
        sp = mod.add_parser(sub)
        sp.set_defaults(_run=mod.run)
        sp.epilog = exits.epilog(name)
    return p


class _Terminated(Exception):
    """SIGTERM or SIGHUP, raised where the process is so that cleanup runs (exit 143)."""


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
    except OSError as e:
        if e.filename is None or isinstance(e, BrokenPipeError):
            raise
        # a file the command line named, met deep inside the command: its name and what is
        # wrong, not a traceback (a temporary file beside it stands for the file itself)
        name = os.fsdecode(e.filename2 if e.filename2 is not None else e.filename)
        print(f"vacate: error: {name}: {e.strerror or e}", file=env.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as e:
        print("vacate: interrupted (Ctrl-C)" + _where(e), file=env.stderr)
        return 130
    except _Terminated as e:
        print(f"vacate: stopped by {e}" + _where(e), file=env.stderr)
        return 143


def _where(e: BaseException) -> str:
    """What the command was doing when it was stopped, and how to resume it, where the
    command said so (its notes on the exception)."""
    notes = getattr(e, "__notes__", ())
    return "".join(f"\n{n}" for n in notes)


# Commands that only read: nothing is left to finish when main() returns, so the process
# ends without the interpreter's teardown (every module and object freed one by one).
QUICK_EXIT = frozenset({"check", "scan"})


def _lazy_inspect() -> None:
    """Load ``inspect`` when first used instead of when imported. dataclasses imports it (and
    with it ast, dis, tokenize, ...) for one call made only for a class without a docstring:
    about a fifth of the instructions `vacate check` spends on imports. A stand-in module
    (PEP 562 ``__getattr__``) takes its place in ``sys.modules`` and imports the real one at
    the first attribute asked of it. (importlib.util.LazyLoader does not help here: on 3.11
    the next ``import inspect`` reads ``__spec__`` and so loads it at once.)"""
    if "inspect" in sys.modules:
        return
    stand_in = type(sys)("inspect")

    def load(name: str):
        if sys.modules.get("inspect") is stand_in:
            del sys.modules["inspect"]
        real = importlib.import_module("inspect")
        vars(stand_in).update(vars(real))     # later lookups find the names directly
        return getattr(real, name)

    stand_in.__getattr__ = load
    sys.modules["inspect"] = stand_in


def _quick_exit(code: int) -> None:
    """Flush the streams and end the process now (os._exit): no teardown. Where the output
    could not be written (the reader went away: ``| head``), the answer did not arrive: exit
    status 2, without a traceback."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):          # a broken pipe, a full disk; a closed stream
            code = EXIT_ERROR
    os._exit(code)


def entry() -> None:
    from vacate.observing.collectors import procs_probe

    procs_probe.start_for_argv(sys.argv[1:])      # `vacate check PATH`: the /proc pass starts
    _lazy_inspect()
    import signal

    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGHUP, _on_term)
    quick = _invoked(sys.argv[1:]) in QUICK_EXIT
    try:
        code = main()
    except BrokenPipeError:
        code = EXIT_ERROR
    finally:
        procs_probe.close_pending()
    if quick or code in (130, 143):
        # interrupted: what had to be undone was undone while the interruption went up
        # (temp parts removed, the journal fsynced); the interpreter's teardown would wait on
        # worker threads a stopped step left behind, and a late interrupt there would end
        # the process by the signal instead of with the exit status that names it
        _quick_exit(code)
    sys.exit(code)
