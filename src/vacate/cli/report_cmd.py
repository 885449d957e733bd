"""``vacate report PLAN``: what was there, what used it, what was done and what remains, from
the plan and its journal (nothing on the machine is read)."""

from __future__ import annotations

import argparse

from vacate.cli.env import Env
from vacate.observing.errors import EXIT_OK


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help="what was there, what used it, what was done and what "
                                      "remains, from a plan and its journal")
    p.add_argument("plan", metavar="PLAN", help="the plan file (its journal beside it)")
    p.add_argument("--json", action="store_true", help="vacate.report/1 on stdout")
    return p


def run(args, env: Env) -> int:
    from vacate.act.apply import load
    from vacate.output.report import report_of
    from vacate.output import apply_view, jsonfmt

    plan, _sha = load(args.plan)
    doc = report_of(args.plan, plan)
    if args.json:
        env.stdout.write(jsonfmt.dumps(doc))
    else:
        apply_view.render_report(doc, env.console())
    return EXIT_OK
