"""``vacate plan PATH``: what would happen to each item, and the ordered teardown, as a file a
person reviews before ``vacate apply`` carries it out.

Exit status: 0 the plan can be applied; 4 it cannot as it stands (an item to archive has no
destination, or what uses the volume could not be told); 2 refused or usage."""

from __future__ import annotations

import argparse
import os

from vacate import remote
from vacate.cli import paths
from vacate.cli.env import Env
from vacate.observing.errors import EXIT_OK, UsageError

EXIT_INCOMPLETE = 4


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("plan", help="plan the retirement of a volume: per item keep / archive / "
                                    "delete, then the ordered teardown (changes nothing)",
                       usage="%(prog)s [options] PATH\n"
                             "       %(prog)s --from EDITED -o NEW [options]")
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="the volume's mount point itself (a plan retires a whole volume; "
                        "required, but with --from)")
    p.add_argument("--from", dest="from_plan", metavar="EDITED", type=paths.readable_file,
                   help="a plan file whose items' actions were edited by hand: make its steps "
                        "again from them (with -o NEW to write it)")
    p.add_argument("--archive-to", metavar="DEST",
                   help="where archived items go (a directory or s3://bucket/prefix; not on "
                        "the volume)")
    p.add_argument("--archive-format", choices=("tar", "zfs", "both"), default="tar",
                   help="tar (the default): each archived item as a tar archive, files "
                        "restored anywhere; zfs: the volume's ZFS dataset itself, its "
                        "snapshot (named for the plan, taken once nothing holds it, before any "
                        "delete) sent with zfs send into zstd parts in --archive-to, the whole "
                        "dataset restored on any ZFS (zfs receive); both: the two")
    p.add_argument("--verify-pool", metavar="POOL",
                   help="with --archive-format zfs or both: prove the dataset's archive "
                        "receivable by receiving it into a scratch dataset of POOL (destroyed "
                        "after) and comparing it with the snapshot; without it the stream is "
                        "only parsed end to end (the weaker check, named so)")
    p.add_argument("--free-volume", action="store_true",
                   help="free the volume itself as the plan's last steps, once every archive "
                        "of it is verified in the apply: its ZFS dataset destroyed (zfs "
                        "destroy), or on Proxmox its mount point deleted and the volume freed "
                        "(pct set --delete mpN, then unusedN); refused while a snapshot the "
                        "plan did not take is held, cloned or otherwise kept")
    for a in ("keep", "archive", "delete"):
        p.add_argument(f"--{a}", action="append", default=[], metavar="P",
                       help=f"{a} P (relative to PATH or absolute under it; globs allowed; the "
                            "deepest match wins)")
    p.add_argument("--migrate", action="append", default=[], metavar="P=DEST",
                   help="copy P to the directory DEST on another volume (metadata kept, read "
                        "back from the disk), repoint what uses it (systemd units by a drop-in "
                        "of vacate's own, started again from there; fstab, crontab, "
                        "environment-file and LXC lines; symlinks; Proxmox mount points) and "
                        "leave P on the volume; with --delete P too, P is deleted once what "
                        "used it runs from DEST (vacate undo PLAN reverses the repointing); "
                        "with --ct, DEST as the container spells it, like PATH")
    p.add_argument("--grace", type=float, default=10.0, metavar="S",
                   help="seconds between TERM and KILL when ending a holder (default 10)")
    p.add_argument("--no-snapshot", action="store_true",
                   help="no snapshot before deleting on ZFS or btrfs")
    p.add_argument("--mask-references", action="store_true",
                   help="mask the units that still name archived or deleted paths (by "
                        "default they are listed in the report, left as they are)")
    p.add_argument("-o", "--output", metavar="FILE", type=paths.writable_file,
                   help="write the plan to FILE")
    p.add_argument("--json", action="store_true", help="the plan as JSON on stdout")
    remote.add_arguments(p, "a stall exits 3, with no plan written")
    return p


def run(args, env: Env) -> int:
    if args.from_plan:
        from vacate.cli import plan_from

        return plan_from.run(args, env)
    if not args.path:
        raise UsageError("vacate plan needs the volume's mount point (or --from EDITED)")
    from vacate.flow.plan import plan

    overrides = [(a, p) for a in ("keep", "archive", "delete") for p in getattr(args, a)]
    migrations = {}
    for m in args.migrate:
        src, sep, dest = m.partition("=")
        if not sep or not src or not dest.startswith("/"):
            raise UsageError(f"--migrate {m}: expected P=DEST with DEST an absolute directory")
        migrations[src] = os.path.normpath(dest)
    from vacate.cli.scan_cmd import reaching

    with reaching(args, env) as reach:
        result = plan(args.path, reach=reach, archive_to=args.archive_to,
                      overrides=overrides, grace_s=args.grace, snapshot=not args.no_snapshot,
                      outputs=(args.output,) if args.output else (),
                      mask_references=args.mask_references, migrations=migrations,
                      archive_format=args.archive_format, verify_pool=args.verify_pool,
                      free_volume=args.free_volume)
    text = result.dumps()
    if args.output:
        from vacate.observing.fsio import write_atomic

        write_atomic(args.output, text.encode("ascii"))
    if args.json:
        env.stdout.write(text)
    else:
        from vacate.output import plan_view

        plan_view.render(result, env.console())
    return EXIT_INCOMPLETE if result.blocked else EXIT_OK
