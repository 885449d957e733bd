"""``vacate verify ARCHIVE [--against SRC]``: read everything back and check it."""

from __future__ import annotations

import argparse

from vacate.cli.env import Env
from vacate.errors import EXIT_IN_USE, EXIT_OK


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("verify", help="read an archive back: every part and file checksum")
    p.add_argument("archive", help="the archive: DEST/NAME or s3://bucket/prefix/NAME")
    p.add_argument("--against", action="append", metavar="SRC",
                   help="also compare this source tree with the archive (repeatable)")
    p.add_argument("--endpoint", help="S3 endpoint URL (default: $AWS_ENDPOINT_URL)")
    p.add_argument("--json", action="store_true", help="versioned JSON on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
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
    return EXIT_OK if r.ok else EXIT_IN_USE
