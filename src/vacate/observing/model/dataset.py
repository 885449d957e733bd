"""What freeing a ZFS dataset depends on, as ``zfs list`` says it: its snapshots (each with
its holds and the datasets cloned from it), its child datasets, whether it is mounted.
Gathered when a plan is asked to free the volume (``--free-volume``), and again by the step
that frees it, just before it acts (:mod:`vacate.observing.collectors.zfs`).

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS


@dataclass(frozen=True, **SLOTS)
class ZfsSnapshot:
    """A snapshot of the dataset: its name after the ``@``; ``holds`` the tags of ``zfs
    hold`` that keep it (its ``userrefs``; None: not known); ``clones`` the datasets whose
    origin it is (none can be destroyed with it)."""

    name: str
    holds: int | None = None
    clones: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class DatasetFacts:
    """The dataset ``dataset`` as ZFS saw it: its snapshots, its child datasets (a ``zfs
    destroy -r`` would take them), whether it is mounted (None: not known); ``error``: why
    it could not be read ("" when it was: what could not be read is never taken as free)."""

    dataset: str
    snapshots: tuple[ZfsSnapshot, ...] = ()
    children: tuple[str, ...] = ()
    mounted: bool | None = None
    exists: bool = True
    error: str = ""

    def snapshot(self, name: str) -> ZfsSnapshot | None:
        return next((s for s in self.snapshots if s.name == name), None)
