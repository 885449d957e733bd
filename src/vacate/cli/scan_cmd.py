"""``vacate scan PATH``: what is on the volume."""

from __future__ import annotations

import argparse
from contextlib import contextmanager

from vacate import remote
from vacate.cli import paths
from vacate.cli.env import Env
from vacate.observing.errors import EXIT_OK, EXIT_UNKNOWN, UsageError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("scan", help="what is on a volume, item by item, byte-exact",
                       usage="%(prog)s [options] PATH\n       %(prog)s --from FILE [options]")
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="the volume's mount point, or any directory on it (its entries "
                        "become the items: that is the drill-down)")
    p.add_argument("--from", dest="saved", metavar="FILE", type=paths.readable_or_stdin,
                   help="show the inventory of a saved observation (vacate observe; - for "
                        "stdin) instead of walking")
    p.add_argument("--json", action="store_true", help="versioned JSON on stdout")
    p.add_argument("--top", type=int, default=10, metavar="N", help="largest files to show")
    p.add_argument("--ncdu", metavar="FILE", type=paths.writable_file,
                   help="also write the whole tree in ncdu's JSON format (browse: ncdu -f FILE)")
    p.add_argument("--no-recognise", dest="recognise", action="store_false",
                   help="sizes only: do not read files to tell what each item is")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress on stderr (default: when stderr is a terminal)")
    remote.add_arguments(p)
    return p


@contextmanager
def progress_on_stderr(env: Env, enabled: bool | None, what: str):
    """A progress callback ``(entries, bytes)`` drawing on stderr, or None when not wanted."""
    if enabled is None:
        enabled = env.stderr_isatty
    if not enabled:
        yield None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from vacate.observing.human import human_bytes

    console = env.console(stderr=True)
    # no refresh thread: the walk forks worker processes, so draw from the callback instead
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True, auto_refresh=False) as bar:
        task = bar.add_task(what)

        def update(entries: int, nbytes: int) -> None:
            bar.update(task, description=f"{what}: {entries:,} entries, "
                                         f"{human_bytes(nbytes)} on disk")
            bar.refresh()

        yield update
        if not console.is_terminal:
            console.print(f"{what}: done")


@contextmanager
def reaching(args, env: Env, enabled: bool | None = None):
    """``remote.reach(args)``, drawing a far walk's progress on stderr as a local scan's
    (where stderr is a terminal, unless ``enabled`` says otherwise)."""
    far = getattr(args, "remote", None)
    if far is None:
        with remote.reach(args, env.host) as where:
            yield where
        return
    with progress_on_stderr(env, enabled, f"walking {args.path} on {far}") as progress, \
            remote.reach(args, env.host, progress=progress) as where:
        yield where


def run(args, env: Env) -> int:
    from vacate.output import jsonfmt

    if (args.path is None) == (args.saved is None):
        raise UsageError("give either PATH or --from FILE")
    if args.saved is not None:
        from vacate.cli.saved import load_observation

        if args.ncdu:
            raise UsageError("--ncdu needs the whole tree: scan the volume itself")
        obs = load_observation(args.saved, env)
        if not obs.scanned:
            raise UsageError(f"{args.saved}: the observation was made with --no-scan: "
                             "it holds no inventory")
        return show(obs.inventory, args, env)
    if args.remote is not None or args.ct is not None:
        if args.ncdu:
            raise UsageError("--ncdu needs the whole tree here: scan on the host itself")
        with reaching(args, env, args.progress) as where:
            obs = where.observe(args.path, users=False, recognise=args.recognise,
                                keep_largest=max(args.top, 50))
        return show(obs.inventory, args, env, host=obs.host)
    from vacate.observing.scan import scan

    encoded: list[str] = []
    with progress_on_stderr(env, args.progress, f"scanning {args.path}") as progress:
        # the drill-down's JSON (most of the document) is encoded while the recognisers'
        # other processes look, not after
        result = scan(args.path, host=env.host, keep_largest=max(args.top, 50),
                      progress=progress, record_tree=bool(args.ncdu),
                      recognise_items=args.recognise,
                      meanwhile=(lambda dirs: encoded.append(jsonfmt.dir_table_json(dirs)))
                      if args.json else None)
    if args.ncdu:
        from vacate.output import ncdu

        ncdu.write_file(result, args.ncdu)
    return show(result, args, env, encoded[0] if encoded else None)


def show(result, args, env: Env, dirs_json: str | None = None, host=None) -> int:
    """Print a scan (the document or the tables) and give its exit status."""
    from vacate.output import jsonfmt

    if args.json:
        # one line: a scan of millions of files has a drill-down row per directory, and
        # indenting it would take longer than the walk (pipe it through jq to read it)
        # (the C encoder; json.dump to a stream would use the pure-Python one)
        env.stdout.write(jsonfmt.scan_json(result, dirs_json, host=host) + "\n")
    else:
        from vacate.output import scan_view  # (rich: not needed for --json)

        scan_view.render(result, env.console(), top=args.top,
                         via=host.via if host is not None else "")
        if args.ncdu:
            env.console().print(f"ncdu export: {args.ncdu}  (browse it: ncdu -f {args.ncdu})")
    return EXIT_UNKNOWN if incomplete(result) else EXIT_OK


def incomplete(result) -> bool:
    """Whether something could not be counted (the totals are then a lower bound)."""
    return any(w.blocks_verdict for w in result.warnings)
