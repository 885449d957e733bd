"""``vacate scan PATH``: what is on the volume."""

from __future__ import annotations

import argparse

from vacate.cli.env import Env
from vacate.errors import EXIT_OK


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("scan", help="what is on a volume, item by item, byte-exact")
    p.add_argument("path", help="the volume's mountpoint, or any directory on it")
    p.add_argument("--json", action="store_true", help="versioned JSON on stdout")
    p.add_argument("--top", type=int, default=20, metavar="N", help="largest files to show")
    return p


def run(args, env: Env) -> int:
    from vacate.core.scan import scan
    from vacate.output import jsonfmt, scan_view

    result = scan(args.path, host=env.host, keep_largest=max(args.top, 50))
    if args.json:
        env.stdout.write(jsonfmt.dumps(jsonfmt.scan_doc(result)))
    else:
        scan_view.render(result, env.console(), top=args.top)
    return EXIT_OK
