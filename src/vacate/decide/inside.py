"""What a plan item holds that the plan does not act on apart: the recognised items inside
it (a hub repo, a hidden-state cache, a checkpoint) that go with it, each with the action it
would have on its own, so a reviewer sees what the archive holds and costs before approving
it. Pure: from the plan's own observation."""

from __future__ import annotations

import os
from dataclasses import dataclass

from vacate.observing.model.inventory import Item
from vacate.observing.model.plan import Plan
from vacate.observing.model.usage import ItemUsage
from vacate.observing.parsers.paths import is_under


@dataclass(frozen=True, slots=True)
class Inside:
    """A recognised item that goes with the plan item ``within``; ``suggested`` and ``why``:
    the action it would take on its own, and the override that gives it that."""

    item: Item
    within: str
    suggested: str
    why: str
    override: str


def inside(plan: Plan) -> dict[str, tuple[Inside, ...]]:
    """Plan item path -> the recognised items inside it that are not items of the plan."""
    from vacate.decide.plan import default_action

    target = plan.target_path
    planned = {i.path: i for i in plan.items}
    subs = [it for it in plan.observation.inventory.items
            if it.parent is not None and it.path not in planned and it.classification]
    out: dict[str, list[Inside]] = {}
    for it in subs:
        if any(o.path != it.path and is_under(it.path, o.path) and not any(
                is_under(p, o.path) and is_under(it.path, p) for p in planned) for o in subs):
            continue          # shown with the recognised item around it
        within = max((p for p in planned if is_under(it.path, p)), key=len, default=None)
        if within is None:
            continue
        action, why = default_action(ItemUsage(it, "cold", ()))
        rel = os.path.relpath(it.path, target)
        out.setdefault(within, []).append(Inside(it, within, action, why, f"--{action} {rel}"))
    return {k: tuple(v) for k, v in out.items()}
