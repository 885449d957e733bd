"""Whether a plan still holds: what changed on the volume since it was made, from a new
observation, pure. Changes this apply made itself (its journal says which steps started)
are not staleness.

Stale: another filesystem at the path (or none); a user that was not there (a new holder, a
new unit, a planned process replaced by another: its id carries its start time), except the
processes of a unit the plan stops; an item to archive or delete whose entries are not what
the plan recorded (new or changed files), or that is gone; something new at the top of the
volume that no item of the plan covers.
"""

from __future__ import annotations

import os

from vacate.decide import verdict
from vacate.observing.model.conditions import MountPin
from vacate.observing.model.observation import Observation
from vacate.observing.model.plan import Identity, Plan, Step
from vacate.observing.parsers.paths import is_under

OWN_NAMES = (".vacate-snapshots",)     # what apply itself puts on the volume


def unmounted_by_us(plan: Plan, started: set[str]) -> bool:
    """Whether an earlier run of this apply began the volume's own unmount (after which its
    path shows another filesystem, by our doing)."""
    return any(s.id in started for s in plan.steps if own_unmount(s, plan))


def own_unmount(step: Step, plan: Plan) -> bool:
    """Whether ``step`` unmounts the volume itself (its precondition pins the plan's
    mount)."""
    return step.kind == "unmount" and isinstance(step.precondition, MountPin) and \
        step.precondition.mount_id == plan.mount_id


def differences(plan: Plan, now: Observation | None, identities: dict[str, Identity | None],
                started: set[str]) -> list[str]:
    """One line per change since ``plan`` was made (empty: it holds). ``now``: the volume
    observed again (None: nothing is mounted at its path); ``identities``: each archive or
    delete item as it is now (None where it is gone); ``started``: the ids of the steps an
    earlier run of this apply began."""
    if unmounted_by_us(plan, started):
        return []        # the volume is down: nothing on it can have changed but by us
    if now is None:
        return [f"nothing is mounted at {plan.target_path} any more"]
    m = now.target.mount
    if (m.mount_id, m.dev) != (plan.mount_id, plan.mount_dev) or \
            now.target.path != plan.target_path:
        return [(f"another filesystem is at {plan.target_path} (mount {m.mount_id}, device "
                f"{m.dev}; the plan was made for mount {plan.mount_id}, device "
                f"{plan.mount_dev})")]
    out = []
    planned = {c.id for c in plan.observation.consumers}
    stopped = {s.action.subject for s in plan.steps if s.kind == "stop-unit" and s.action}
    for b in verdict.check(now).verdict.blockers:
        if b.consumer in planned:
            continue
        c = next(c for c in now.consumers if c.id == b.consumer)
        if c.type == "process" and c.attrs.unit in stopped:
            continue     # its unit is stopped by the plan, whichever process it runs now
        out.append(f"a new user of the volume: {b.reason}")
    touched = {getattr(s.params, "item", None) for s in plan.steps if s.id in started}
    for it in plan.items:
        if it.action in ("keep", "migrate") or it.path in touched:
            continue     # a migrate item may change: each pass copies what changed
        got = identities.get(it.path)
        if got is None:
            out.append(f"{it.path} (to {it.action}) is gone")
        elif it.identity is not None and got.digest != it.identity.digest:
            out.append(f"{it.path} (to {it.action}) holds new or changed files since the "
                       "plan was made")
    covered = [it.path for it in plan.items]
    for item in now.inventory.items:
        if item.parent is None and not any(is_under(item.path, p) for p in covered) and \
                os.path.basename(item.path) not in OWN_NAMES:
            out.append(f"{item.path} is new on the volume since the plan was made")
    return out
