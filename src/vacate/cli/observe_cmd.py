"""``vacate observe PATH``: what vacate sees of a volume, as a ``vacate.observation/1``
document that ``check --from`` and ``scan --from`` decide on later, or elsewhere."""

from __future__ import annotations

import argparse

from vacate import remote
from vacate.cli import paths
from vacate.cli.env import Env
from vacate.cli.scan_cmd import reaching
from vacate.observing.errors import EXIT_OK, UsageError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("observe", help="what vacate sees of a volume, as JSON for check --from "
                                       "/ scan --from (nothing is decided)")
    p.add_argument("path", help="the volume's mount point, or any directory on it")
    p.add_argument("-o", "--output", metavar="FILE", type=paths.writable_file,
                   help="write the observation to FILE (crash-safe) instead of stdout")
    p.add_argument("--no-scan", action="store_true",
                   help="do not walk the volume: list its top level only")
    p.add_argument("--no-config", action="store_true",
                   help="skip configured users (unit files, fstab, containers...)")
    p.add_argument("--no-users", action="store_true",
                   help="the inventory only, as a scan sees it (no processes, no configs)")
    p.add_argument("--files", action="store_true",
                   help="also keep every file's name and size in FILE.files beside the "
                        "observation (-o FILE), so vacate browse lists the files of a "
                        "directory; the volume must be here")
    remote.add_arguments(p)
    return p


def run(args, env: Env) -> int:
    if args.no_users and args.no_scan:
        raise UsageError("--no-users with --no-scan would observe nothing")
    if args.files:
        return _with_files(args, env)
    with reaching(args, env) as where:
        obs = where.observe(args.path, scan_tree=not args.no_scan, users=not args.no_users,
                            configured=not args.no_config)
    text = obs.dumps() + "\n"
    if args.output:
        from vacate.observing.fsio import write_atomic

        write_atomic(args.output, text.encode("ascii"))
    else:
        env.stdout.write(text)
    return EXIT_OK


def _with_files(args, env: Env) -> int:
    """The observation made here with the walk's record of every entry, written with its
    file listing beside it (:mod:`vacate.output.files_listing`)."""
    if not args.output:
        raise UsageError("--files writes FILE.files beside the observation: give -o FILE")
    if args.no_scan:
        raise UsageError("--files needs the walk: leave out --no-scan")
    if getattr(args, "remote", None) is not None or getattr(args, "ct", None) is not None:
        raise UsageError("--files needs the whole tree here: observe on the host itself")
    from vacate.observing.fsio import write_atomic
    from vacate.observing.observe import observe
    from vacate.output import files_listing

    obs = observe(args.path, host=env.host, users=not args.no_users,
                  configured=not args.no_config, record_tree=True)
    record = obs.inventory.listing
    try:
        data = (obs.dumps() + "\n").encode("ascii")
        files_listing.write(files_listing.beside(args.output), record, obs.target.path, data)
        write_atomic(args.output, data)
    finally:
        record.close()
    return EXIT_OK
