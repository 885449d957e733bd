"""Options the cold-backup commands (archive, verify, restore) share."""

from __future__ import annotations

import argparse

ARCHIVE_HELP = "the archive: DEST/NAME or s3://bucket/prefix/NAME"


def add_common(p: argparse.ArgumentParser, progress_help: str = "no progress bar on stderr"
               ) -> None:
    """``--endpoint`` for S3 targets, ``--json``, ``--no-progress``."""
    p.add_argument("--endpoint", help="S3 endpoint URL (default: $AWS_ENDPOINT_URL)")
    p.add_argument("--json", action="store_true", help="versioned JSON on stdout")
    p.add_argument("--no-progress", action="store_true", help=progress_help)


def show(r, args, env, doc, render) -> None:
    """The result: its versioned JSON document (``doc(r)``) on stdout with ``--json``, else
    rendered for people (``render(r, console)``)."""
    if args.json:
        from vacate.output import jsonfmt
        env.stdout.write(jsonfmt.dumps(doc(r)))
    else:
        render(r, env.console())
