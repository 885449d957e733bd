"""``vacate restore ARCHIVE [PATTERN...] --to DIR``: restore all or part, checking every file;
``vacate restore ARCHIVE --into POOL/NAME``: a native (zfs send) archive as a new dataset."""

from __future__ import annotations

import argparse

from vacate.cli import paths
from vacate.cli.archive_opts import ARCHIVE_HELP, add_common, show
from vacate.cli.env import Env
from vacate.observing.errors import UsageError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("restore", help="restore all or part of an archive, checking each file")
    p.add_argument("archive", type=paths.archive_place, help=ARCHIVE_HELP)
    p.add_argument("patterns", nargs="*", metavar="PATTERN",
                   help="archive paths or shell patterns (a directory selects what it holds)")
    p.add_argument("--to", metavar="DIR", help="restore into this directory (a tar archive)")
    p.add_argument("--into", metavar="POOL/NAME",
                   help="a native (zfs send) archive: receive it as this new dataset (it "
                   "must not exist)")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    p.add_argument("--preserve-special", action="store_true",
                   help="also create device nodes and keep set-user-ID/set-group-ID bits "
                   "(left out by default, each one named)")
    add_common(p)
    return p


def run(args, env: Env) -> int:
    from vacate.archive.restore import restore
    from vacate.archive.target import open_target
    from vacate.archive.zfs_verify import is_native
    from vacate.output import archive_view

    target = open_target(args.archive, endpoint=args.endpoint, environ=env.environ)
    if is_native(target):
        return _native(target, args, env)
    if args.into or not args.to:
        raise UsageError(f"{args.archive} is a tar archive: restore it --to DIR")
    with archive_view.progress_bar(env, "restore", not args.no_progress) as prog:
        r = restore(target, args.to, args.patterns, force=args.force,
                    preserve_special=args.preserve_special, progress=prog)
    show(r, args, env, archive_view.restore_doc, archive_view.render_restore)
    return r.exit_code


def _native(target, args, env: Env) -> int:
    from vacate.archive.zfs_restore import restore_native
    from vacate.output import archive_view, native_view

    if not args.into or args.to or args.patterns:
        raise UsageError(f"{args.archive} is a native (zfs send) archive: it is restored "
                         "whole, --into POOL/NAME")
    with archive_view.progress_bar(env, "restore", not args.no_progress) as prog:
        r = restore_native(target, args.into, **({"progress": prog} if prog else {}))
    show(r, args, env, native_view.restore_doc, native_view.render_restore)
    return r.exit_code
