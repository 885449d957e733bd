"""``vacate verify ARCHIVE [--against SRC]``: read everything back and check it."""

from __future__ import annotations

import argparse

from vacate.cli import paths
from vacate.cli.archive_opts import ARCHIVE_HELP, add_common
from vacate.cli.env import Env


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("verify", help="read an archive back: every part and file checksum")
    p.add_argument("archive", type=paths.archive_place, help=ARCHIVE_HELP)
    p.add_argument("--against", action="append", metavar="SRC",
                   help="also compare this source tree with the archive (repeatable)")
    add_common(p)
    return p


def run(args, env: Env) -> int:
    from vacate.archive.target import open_target
    from vacate.archive.verify import verify
    from vacate.output import archive_view, jsonfmt

    target = open_target(args.archive, endpoint=args.endpoint, environ=env.environ)
    with archive_view.progress_bar(env, "verify", not args.no_progress) as prog:
        r = verify(target, against=args.against, progress=prog)
    if args.json:
        env.stdout.write(jsonfmt.dumps(archive_view.verify_doc(r)))
    else:
        archive_view.render_verify(r, env.console())
    return r.exit_code
