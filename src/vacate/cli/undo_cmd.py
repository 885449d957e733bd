"""``vacate undo PLAN``: reverse what ``vacate apply PLAN`` repointed (vacate's drop-ins
removed, rewritten lines put back, links pointed back; nothing else touched), from the apply's
journal.

Exit status: 0 every repointing reversed (or none to reverse); 1 one could not be (edited
since: named); 2 refused or usage."""

from __future__ import annotations

import argparse

from vacate.cli import paths
from vacate.cli.env import Env


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("undo", help="reverse what an apply repointed (vacate's own drop-ins "
                                    "removed, lines and links put back; nothing else "
                                    "touched)")
    p.add_argument("plan", metavar="PLAN", type=paths.readable_file, help="the plan file that was applied")
    return p


def run(args, env: Env) -> int:
    from vacate.flow.undo import undo

    done = undo(args.plan, host=env.host)
    if not done:
        env.stdout.write("nothing to undo: the journal records no repointing\n")
    for u in done:
        env.stdout.write(f"{u.status:8} {u.unit}: {u.detail}\n")
    return 1 if any(u.status == "failed" for u in done) else 0
