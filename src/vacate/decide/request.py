"""What a person asks of a plan, as one frozen value: :func:`vacate.decide.plan.make_plan`
takes an :class:`~vacate.observing.model.observation.Observation` (what the machine is,
its destinations' free space included) and a :class:`PlanRequest` (what is asked of it).

A plan records its request in its own fields (``archive_to``, ``grace_s``, ``snapshot``,
``mask_references``, ``archive_format``, ``verify_pool``, ``free_volume``, and its items' actions, migrations, identities and entries);
:func:`request_of` takes it back from a plan, as :func:`vacate.decide.plan.rebuild` and
``plan --from`` make it again."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from vacate.observing.model.plan import Identity, Plan


def _pairs(v) -> tuple:
    """A mapping, or pairs, as a tuple of pairs (the value stays frozen whatever it was
    given)."""
    return tuple((k, x) for k, x in (v.items() if isinstance(v, dict) else v or ()))


@dataclass(frozen=True)
class PlanRequest:
    """What is asked of a plan. ``overrides``: ``(action, pattern)`` as ``--keep/--archive/
    --delete/--migrate P`` give them; ``migrations``: ``(pattern, destination)`` as
    ``--migrate P=DEST`` gives them, the destination as the host has it; ``identities`` and
    ``entries``: what the caller recorded of each item to archive or delete, by path (its
    :class:`Identity`, and an item to delete's entries file reference, ``vacate.entries/1``);
    ``created_at``: when the plan is made (POSIX seconds). Mappings given for the pairs are
    kept as tuples of pairs."""

    archive_to: str | None = None
    overrides: tuple[tuple[str, str], ...] = ()
    grace_s: float = 10.0
    snapshot: bool = True
    mask_references: bool = False
    migrations: tuple[tuple[str, str], ...] = ()
    identities: tuple[tuple[str, Identity], ...] = field(default=(), repr=False)
    entries: tuple[tuple[str, dict], ...] = field(default=(), repr=False)
    created_at: float = 0.0
    archive_format: str = "tar"          # tar | zfs | both (the plan's ARCHIVE_FORMATS)
    verify_pool: str | None = None
    free_volume: bool = False            # free the volume itself last (--free-volume)

    def __post_init__(self):
        for name in ("overrides", "migrations", "identities", "entries"):
            object.__setattr__(self, name, _pairs(getattr(self, name)))


def overrides_of(plan: Plan) -> tuple[tuple[str, str], ...]:
    """The items' actions as the ``--keep/--archive/--delete/--migrate`` that make them
    (a migrate item whose source is deleted after: ``--migrate`` and ``--delete``)."""
    target = plan.observation.target.path
    out = [(it.action, os.path.relpath(it.path, target)) for it in plan.items]
    return tuple(out + [("delete", os.path.relpath(it.path, target)) for it in plan.items
                        if it.action == "migrate" and it.delete_source])


def migrations_of(plan: Plan) -> tuple[tuple[str, str], ...]:
    """The plan's migrations, ``(item, destination)``, as :class:`PlanRequest` takes them."""
    target = plan.observation.target.path
    return tuple((os.path.relpath(it.path, target), os.path.dirname(it.migrate_to))
                 for it in plan.items if it.action == "migrate" and it.migrate_to)


def request_of(plan: Plan, **changes) -> PlanRequest:
    """The request ``plan`` was made from (its items' actions as a person left them, the
    identities and entries it took), with ``changes``."""
    asked = {"archive_to": plan.archive_to, "overrides": overrides_of(plan),
             "grace_s": plan.grace_s, "snapshot": plan.snapshot,
             "mask_references": plan.mask_references, "migrations": migrations_of(plan),
             "identities": {it.path: it.identity for it in plan.items if it.identity},
             "entries": {it.path: it.entries for it in plan.items if it.entries},
             "created_at": plan.created_at, "archive_format": plan.archive_format,
             "verify_pool": plan.verify_pool, "free_volume": plan.free_volume}
    return PlanRequest(**{**asked, **changes})
