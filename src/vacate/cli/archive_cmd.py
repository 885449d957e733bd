"""``vacate archive SRC... --to DEST [--name NAME] [--exclude P]...``: cold backup;
``vacate archive --zfs DATASET@SNAP --to DEST``: the dataset itself, as a ``zfs send``
stream (a native archive)."""

from __future__ import annotations

import argparse
import os

from vacate.cli.archive_opts import add_common, show
from vacate.cli.env import Env
from vacate.observing.errors import UsageError

# one unit convention everywhere (units.human_bytes): k/M/G/T are powers of 1000, as vacate
# shows sizes (and df -H, du --si); KiB/MiB/GiB/TiB, said so, are powers of 1024
_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
          "KI": 1 << 10, "MI": 1 << 20, "GI": 1 << 30, "TI": 1 << 40}
ZSTD_LEVELS = (1, 22)       # zstd's levels (20-22 are its --ultra ones)
PROGRESS_EVERY_S = 30.0


def parse_size(text: str) -> int:
    t = text.strip().upper().removesuffix("B")
    unit = next((u for u in ("KI", "MI", "GI", "TI", "K", "M", "G", "T") if t.endswith(u)), "")
    num = t[:len(t) - len(unit)]
    try:
        n = int(float(num) * _UNITS[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 1G)") from None
    if n < 1:
        raise argparse.ArgumentTypeError("size must be positive")
    return n


def zstd_level(text: str) -> int:
    lo, hi = ZSTD_LEVELS
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a zstd level: {text!r}") from None
    if not lo <= n <= hi:
        raise argparse.ArgumentTypeError(f"zstd levels are {lo} to {hi}, not {n}")
    return n


def seconds(text: str) -> float:
    try:
        n = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError("seconds must be 0 or more")
    return n


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("archive", help="cold backup: zstd-compressed pax tar parts, SHA256SUMS, "
                       "a manifest and a restore README")
    p.add_argument("sources", nargs="*", metavar="SRC", help="directories or files to archive")
    p.add_argument("--zfs", metavar="DATASET@SNAP",
                   help="instead of SRC: a native archive of the dataset, `zfs send` of the "
                   "snapshot compressed with zstd into parts NAME.zfs.zst.NNNNNN, with "
                   "SHA256SUMS, ZFS-MANIFEST.json and a README (restore: cat the parts | "
                   "zstd -dc | zfs receive POOL/NAME); it gives back the whole dataset on any "
                   "ZFS, where a tar archive gives files anywhere. Rerunning resumes an "
                   "interrupted one (the stream is sent again)")
    p.add_argument("--take-snapshot", action="store_true",
                   help="with --zfs: take the snapshot where it is not there yet")
    p.add_argument("--send-flags", default="-p", metavar="FLAGS",
                   help="with --zfs: flags for zfs send, of -R (the dataset's children and "
                   "earlier snapshots) and -p (its own properties); default -p, '' for none. "
                   "Never -D: newer ZFS cannot receive it")
    p.add_argument("--to", required=True, metavar="DEST",
                   help="a directory, or s3://bucket/prefix")
    p.add_argument("--name", help="archive name under DEST (default: the first SRC's name); "
                   "rerunning with the same name resumes an interrupted archive, and onto a "
                   "complete one says whether it is up to date")
    p.add_argument("--exclude", action="append", default=[], metavar="P",
                   help="leave out P and all below it (relative to the source, or absolute "
                   "under it; repeatable); recorded in the manifest as excluded")
    p.add_argument("--part-size", type=parse_size, default=10**9, metavar="SIZE",
                   help="close a part once it holds this much tar data (default 1G); a bigger "
                   "file goes whole into one part. K, M, G, T are powers of 1000, as every "
                   "size vacate shows; KiB, MiB, GiB, TiB powers of 1024")
    p.add_argument("--level", type=zstd_level, default=3,
                   help=f"zstd level, {ZSTD_LEVELS[0]}-{ZSTD_LEVELS[1]} (default 3)")
    p.add_argument("--progress-every", type=seconds, default=PROGRESS_EVERY_S, metavar="S",
                   help="without a progress bar (stderr not a terminal, or --no-progress), a "
                   f"line on stderr every S seconds (default {PROGRESS_EVERY_S:g}; 0: none)")
    add_common(p, progress_help="no progress bar on stderr (the line every "
               "--progress-every seconds stays: a long archive of huge sparse files would "
               "say nothing for hours otherwise)")
    return p


def location(dest: str, name: str) -> str:
    if dest.startswith("s3://"):
        return dest.rstrip("/") + "/" + name
    return os.path.join(dest, name)


def run(args, env: Env) -> int:
    if args.zfs:
        return _native(args, env)
    if not args.sources:
        raise UsageError("nothing to archive", hint="name SRC..., or --zfs DATASET@SNAP")
    from vacate.archive.target import open_target
    from vacate.archive.writer import archive, exit_code
    from vacate.output import archive_view

    name = args.name or os.path.basename(os.path.abspath(args.sources[0]).rstrip("/"))
    if not name or "/" in name or name in (".", ".."):
        raise UsageError(f"bad archive name {name!r}", hint="pass --name NAME")
    target = open_target(location(args.to, name), endpoint=args.endpoint, environ=env.environ)
    bar = not args.no_progress and env.stderr_isatty
    view = archive_view.progress_bar(env, "archive") if bar else \
        archive_view.progress_lines(env, "archive", args.progress_every)
    with view as prog:
        r = archive(list(args.sources), target, name, part_size=args.part_size,
                    level=args.level, progress=prog, exclude=args.exclude)
    show(r, args, env, archive_view.archive_doc, archive_view.render_archive)
    return exit_code(r)



def _native(args, env: Env) -> int:
    from vacate.archive.target import LocalTarget
    from vacate.archive.zfs_tool import props
    from vacate.archive.zfs_write import split_origin, write_native
    from vacate.output import archive_view, native_view

    if args.sources or args.exclude:
        raise UsageError("--zfs archives the whole dataset: no SRC or --exclude with it")
    if "://" in args.to:
        raise UsageError("a native archive is written to a directory",
                         hint="--to a local directory (S3 is for tar archives, for now)")
    dataset, snap = split_origin(args.zfs)
    name = args.name or dataset.rsplit("/", 1)[-1]
    if not name or "/" in name or name.startswith("."):
        raise UsageError(f"bad archive name {name!r}", hint="pass --name NAME")
    flags = tuple(args.send_flags.split())
    total = int(props(dataset, "referenced")["referenced"])     # about the stream's size
    bar = not args.no_progress and env.stderr_isatty
    view = archive_view.progress_bar(env, "archive") if bar else \
        archive_view.progress_lines(env, "archive", args.progress_every)
    with view as prog:
        def progress(phase: str, n: int) -> None:
            if prog and phase == "part-writing":
                prog(n, max(total, n))
        r = write_native(dataset, snap, LocalTarget(location(args.to, name)), name,
                         part_size=args.part_size, level=args.level, send_flags=flags,
                         take_snapshot=args.take_snapshot, progress=progress)
    show(r, args, env, native_view.archive_doc, native_view.render_archive)
    return r.exit_code
