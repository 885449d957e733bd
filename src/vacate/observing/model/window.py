"""Which units a failed migrate left stopped: a pure function of the plan, read by the act
that brings them back (here or on a far host) and by the report that says so.

Standard library only, CPython 3.8.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List

if TYPE_CHECKING:
    from vacate.observing.model.plan import Plan, Step


def window_of(plan: Plan, failed_index: int) -> List[Step]:
    """The start-unit steps whose unit was stopped before the failed step and is not started
    yet: each is brought back from the old path."""
    ids = {s.id: i for i, s in enumerate(plan.steps)}
    out = []
    for i, s in enumerate(plan.steps):
        if s.kind != "start-unit" or i < failed_index:
            continue
        stop = ids.get(s.params.stop_step, len(plan.steps))
        if stop < failed_index:
            out.append(s)
    return out
