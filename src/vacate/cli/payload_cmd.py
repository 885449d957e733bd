"""``vacate payload [-o FILE]``: the observing layer as one self-contained zipapp, to copy to a
host by hand (``python3 vacate-observe.pyz PATH -o obs.json`` there, ``vacate check --from
obs.json`` here). It is what ``--host`` sends over ssh."""

from __future__ import annotations

import argparse

from vacate.cli import paths
from vacate.cli.env import Env
from vacate.observing.errors import EXIT_OK, UsageError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("payload", help="the observing layer as one zipapp (python3 3.8+, "
                                       "standard library only) to run on another host")
    p.add_argument("-o", "--output", metavar="FILE", default="vacate-observe.pyz",
                   type=paths.writable_file,
                   help="where to write it (default: vacate-observe.pyz)")
    return p


def run(args, env: Env) -> int:
    import hashlib
    import os

    from vacate.observing.fsio import write_atomic
    from vacate.remote import payload

    data = payload.build(zipapp=True)
    if args.output == "-":
        if env.stdout_isatty:
            raise UsageError("-o -: the zipapp is binary; not written to a terminal")
        env.stdout.flush()
        os.write(env.stdout.fileno(), data)
        return EXIT_OK
    write_atomic(args.output, data, mode=0o755)
    print(f"{args.output}: {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}",
          file=env.stderr)
    print(f"run it there: python3 {os.path.basename(args.output)} PATH -o obs.json; "
          "decide here: vacate check --from obs.json", file=env.stderr)
    return EXIT_OK
