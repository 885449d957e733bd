"""``vacate verify ARCHIVE [--against SRC] [--verify-pool POOL]``: read everything back and
check it; a native (zfs send) archive is received into a scratch dataset under POOL."""

from __future__ import annotations

import argparse

from vacate.cli import paths
from vacate.cli.archive_opts import ARCHIVE_HELP, add_common, show
from vacate.cli.env import Env
from vacate.observing.errors import UsageError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("verify", help="read an archive back: every part and file checksum")
    p.add_argument("archive", type=paths.archive_place, help=ARCHIVE_HELP)
    p.add_argument("--against", action="append", metavar="SRC",
                   help="also compare this source tree with the archive (repeatable)")
    p.add_argument("--verify-pool", metavar="POOL",
                   help="a native (zfs send) archive: receive it into a scratch dataset "
                   "POOL/vacate-verify-… and compare it with the source snapshot (guid, "
                   "referenced bytes, every entry and its sha256), then destroy the scratch. "
                   "Without it the stream is only parsed to its END: the weaker check, said "
                   "so, which never allows freeing the dataset")
    add_common(p)
    return p


def run(args, env: Env) -> int:
    from vacate.archive.target import open_target
    from vacate.archive.verify import verify
    from vacate.archive.zfs_verify import is_native
    from vacate.output import archive_view

    target = open_target(args.archive, endpoint=args.endpoint, environ=env.environ)
    if is_native(target):
        return _native(target, args, env)
    if args.verify_pool:
        raise UsageError("--verify-pool is for a native (zfs send) archive",
                         hint=f"{args.archive} is a tar archive")
    with archive_view.progress_bar(env, "verify", not args.no_progress) as prog:
        r = verify(target, against=args.against, progress=prog)
    show(r, args, env, archive_view.verify_doc, archive_view.render_verify)
    return r.exit_code


def _native(target, args, env: Env) -> int:
    from vacate.archive.zfs_verify import verify_native
    from vacate.output import archive_view, native_view

    if args.against:
        raise UsageError("--against is for a tar archive: a native one is compared with its "
                         "source snapshot by --verify-pool")
    with archive_view.progress_bar(env, "verify", not args.no_progress) as prog:
        r = verify_native(target, verify_pool=args.verify_pool,
                          **({"progress": prog} if prog else {}))
    show(r, args, env, native_view.verify_doc, native_view.render_verify)
    return r.exit_code
