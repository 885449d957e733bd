"""``vacate archive SRC... --to DEST [--name NAME]``: cold backup."""

from __future__ import annotations

import argparse
import os

from vacate.cli.archive_opts import add_common
from vacate.cli.env import Env
from vacate.errors import EXIT_IN_USE, EXIT_OK, EXIT_UNKNOWN, UsageError

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    num, unit = (t[:-1], t[-1]) if t and t[-1] in _UNITS else (t, "")
    try:
        n = int(float(num) * _UNITS[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 1G)") from None
    if n < 1:
        raise argparse.ArgumentTypeError("size must be positive")
    return n


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("archive", help="cold backup: zstd-compressed pax tar parts, SHA256SUMS, "
                       "a manifest and a restore README",
                       description="Exit 0 done; 1 a file changed while it was read; 3 "
                       "something could not be read (see the warnings); 2 usage error.")
    p.add_argument("sources", nargs="+", metavar="SRC", help="directories or files to archive")
    p.add_argument("--to", required=True, metavar="DEST",
                   help="a directory, or s3://bucket/prefix")
    p.add_argument("--name", help="archive name under DEST (default: the first SRC's name); "
                   "rerunning with the same name resumes an interrupted archive")
    p.add_argument("--part-size", type=parse_size, default=1 << 30, metavar="SIZE",
                   help="close a part once it holds this much tar data (default 1G); a bigger "
                   "file goes whole into one part")
    p.add_argument("--level", type=int, default=3, help="zstd level (default 3)")
    add_common(p)
    return p


def location(dest: str, name: str) -> str:
    if dest.startswith("s3://"):
        return dest.rstrip("/") + "/" + name
    return os.path.join(dest, name)


def run(args, env: Env) -> int:
    from vacate.archive.target import open_target
    from vacate.archive.writer import archive
    from vacate.output import archive_view, jsonfmt

    name = args.name or os.path.basename(os.path.abspath(args.sources[0]).rstrip("/"))
    if not name or "/" in name or name in (".", ".."):
        raise UsageError(f"bad archive name {name!r}", hint="pass --name NAME")
    target = open_target(location(args.to, name), endpoint=args.endpoint, environ=env.environ)
    with archive_view.progress_bar(env, "archive", not args.no_progress) as prog:
        r = archive(list(args.sources), target, name, part_size=args.part_size,
                    level=args.level, progress=prog)
    if args.json:
        env.stdout.write(jsonfmt.dumps(archive_view.archive_doc(r)))
    else:
        archive_view.render_archive(r, env.console())
    if r.changed:
        return EXIT_IN_USE            # something was archived while it changed
    if any(w.blocks_verdict for w in r.warnings):
        return EXIT_UNKNOWN           # something could not be read: the archive is not whole
    return EXIT_OK
