"""``vacate report SOURCE [--html FILE] [--json] [--hide-names]``: what was there, what used
it, what was done and what remains, from a saved observation, a plan, or an applied plan (its
journal beside it); nothing on the machine is read (but the journal, and the manifest of a
local archive for the part that holds a path)."""

from __future__ import annotations

import argparse

from vacate.cli import paths
from vacate.cli.env import Env
from vacate.observing.errors import EXIT_OK, VacateError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help="what was there, what used it, what was done and what "
                                      "remains, from an observation, a plan and its journal")
    p.add_argument("plan", metavar="SOURCE", type=paths.readable_file,
                   help="a saved observation (vacate observe -o), or a plan file (its journal "
                        "beside it, when it was applied)")
    p.add_argument("--json", action="store_true", help="vacate.report/1 on stdout")
    p.add_argument("--html", metavar="FILE", type=paths.writable_file,
                   help="write the report as one self-contained page to FILE")
    p.add_argument("--hide-names", action="store_true",
                   help="on the page, names below the volume's top level are replaced by "
                        "their kind and size (for pages that leave the team)")
    return p


def _load(path: str):
    """(observation, plan, plan's sha256) of the file ``path``: a plan, or else an
    observation."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise VacateError(f"cannot read {path}: {e.strerror or e}") from None
    text = head.decode("ascii", "replace")
    if '"vacate.plan/' in text:
        from vacate.flow.apply import load

        plan, sha = load(path)
        return plan.observation, plan, sha
    from vacate.cli.saved import load_observation

    return load_observation(path, None), None, None


def run(args, env: Env) -> int:
    from vacate.output import jsonfmt
    from vacate.output.report import report_of, report_of_observation

    obs, plan, sha = _load(args.plan)
    doc = report_of(args.plan, plan, sha) if plan is not None else report_of_observation(obs)
    if args.html:
        from vacate.observing.fsio import write_atomic
        from vacate.output.html.page import render

        write_atomic(args.html, render(doc, obs, hide_names=args.hide_names).encode("utf-8"))
    if args.json:
        env.stdout.write(jsonfmt.dumps(doc))
    else:
        from vacate.output import report_text

        (report_text.summary if args.html else report_text.render)(doc, env.console())
    return EXIT_OK
