"""``python3 -m vacate.observing`` (or ``python3 vacate-observe.pyz``, what ``vacate payload``
writes): observe a volume on a host where only the observing layer is, and print the
``vacate.observation/1`` document for ``vacate check --from`` / ``scan --from`` elsewhere.
``--worker`` answers framed requests on stdin instead (what ``--host`` runs). Standard
library only."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="vacate-observe",
        description="what vacate sees of a volume, as JSON for vacate check --from FILE")
    p.add_argument("path", nargs="?", help="the volume's mount point, or a directory on it")
    p.add_argument("-o", "--output", metavar="FILE", help="write the document to FILE")
    p.add_argument("--no-scan", action="store_true", help="list the top level only")
    p.add_argument("--no-config", action="store_true", help="skip configured users")
    p.add_argument("--no-users", action="store_true", help="the inventory only")
    p.add_argument("--ct", metavar="CTID", help="PATH as Proxmox container CTID sees it")
    p.add_argument("--worker", action="store_true",
                   help="answer framed requests on stdin (what vacate --host runs)")
    args = p.parse_args(argv)
    if args.worker:
        from vacate.observing import worker

        return worker.serve()
    if args.path is None:
        p.error("PATH is required")
    from vacate.observing import ops
    from vacate.observing.errors import VacateError
    from vacate.observing.fsio import write_atomic
    from vacate.observing.host import Host

    try:
        obs = ops.observe(Host.local(), args.path, scan_tree=not args.no_scan,
                          users=not args.no_users, configured=not args.no_config, ct=args.ct)
    except VacateError as e:
        print(f"vacate-observe: error: {e.message}", file=sys.stderr)
        return e.exit_code
    text = obs.dumps() + "\n"
    if args.output:
        write_atomic(args.output, text.encode("ascii"))
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
