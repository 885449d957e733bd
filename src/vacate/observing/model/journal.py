"""What an apply's journal says (``PLAN.journal``, written by :mod:`vacate.act.journal`):
its records read back, each step's :class:`StepState`, and whether it belongs to a plan. A
value of the model, so the flows, the report and the CLI read a journal without importing
the code that acts.

Standard library only, CPython 3.8.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.errors import VacateError

MAX_LINE = 1 << 20


class JournalError(VacateError):
    """The journal cannot be used (another apply holds it, or it belongs to another plan)."""


@dataclass(frozen=True, **SLOTS)
class StepState:
    """What the journal says of one step: its last record's ``event`` (intent or outcome),
    the outcome's status and detail, and the times."""

    step: str
    event: str
    status: str | None
    detail: str
    started: float | None
    ended: float | None
    data: dict


def path_for(plan_path: str) -> str:
    return plan_path + ".journal"


def check_belongs(path: str, plan_sha256: str) -> list[dict]:
    """The journal's records, refused when it was written for another version of the
    plan."""
    recs = read_records(path)
    if recs and recs[0].get("plan_sha256") != plan_sha256:
        raise JournalError(
            f"{path} belongs to another version of this plan (sha256 "
            f"{str(recs[0].get('plan_sha256'))[:12]}…, the plan is now "
            f"{plan_sha256[:12]}…): a plan is not changed while it is applied",
            hint="make a new plan, or move the journal away to start over")
    return recs


def read_records(path: str) -> list[dict]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    out = []
    for line in data.split(b"\n"):
        if not line or len(line) > MAX_LINE:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue            # the line a crash cut short
        if isinstance(rec, dict):
            out.append(rec)
    return out


def states_of(records: list[dict]) -> dict[str, StepState]:
    """Each step's state: its last record wins."""
    out: dict[str, StepState] = {}
    for r in records:
        sid = r.get("step")
        if not isinstance(sid, str):
            continue
        prev = out.get(sid)
        if r.get("event") == "intent":
            out[sid] = StepState(sid, "intent", None, "", r.get("t"), None, {})
        elif r.get("event") == "outcome":
            out[sid] = StepState(sid, "outcome", r.get("status"), str(r.get("detail", "")),
                                 prev.started if prev else None, r.get("t"),
                                 r.get("data") if isinstance(r.get("data"), dict) else {})
    return out
