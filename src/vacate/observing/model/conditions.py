"""What a step or an action relies on and what proves it done: a small closed set of frozen,
typed values, each named by the fact it pins (a process by pid and start time, a unit, a mount
by its id, an archive complete at its location).

Each step kind names the ones it may hold (``PRE`` and ``POST`` on its class in
:mod:`steps`), each action kind in :data:`vacate.observing.model.action.ACTION_PRE`; a plan
file keeps each as an object of its fields, so the object's fields say which value it is
(:func:`decode`). A field with a default is left out while at it; a field without one is
always written, ``null`` included (a fact seen as not known). Standard library only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model import codec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal


class Condition:
    """A condition's fields, written as a plan file spells them (``SPELLED``: a field whose
    name there is a Python keyword: ``(field, name)`` pairs)."""

    __slots__ = ()
    SPELLED: tuple = ()

    def encode_fields(self) -> dict:
        """The object a plan file holds: fields left at their default left out."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            out[dict(self.SPELLED).get(f.name, f.name)] = codec.encode(v)
        return out

    @classmethod
    def decode_fields(cls, data, where: str) -> dict:
        named = {v: k for k, v in cls.SPELLED}
        return codec.fields_of(cls, {named.get(k, k): v for k, v in data.items()}, where)

    @classmethod
    def shape(cls) -> tuple[frozenset, frozenset]:
        """The names a plan file must hold, and those it may."""
        fs = dataclasses.fields(cls)
        name = dict(cls.SPELLED).get
        return (frozenset(name(f.name, f.name) for f in fs if f.default is dataclasses.MISSING),
                frozenset(name(f.name, f.name) for f in fs))


@dataclass(frozen=True, **SLOTS)
class Nothing(Condition):
    """Nothing is relied on (or nothing proves it but the step's own outcome)."""


NOTHING = Nothing()


# -- what a step relies on -----------------------------------------------------------------------
@dataclass(frozen=True, **SLOTS)
class ItemKnown(Condition):
    """Whether the plan recorded the item's identity (checked again before acting); for a
    migrated item deleted, where it runs from now."""

    identity: bool
    migrated_to: str | None = None


@dataclass(frozen=True, **SLOTS)
class Process(Condition):
    """A process by its pid and start time (None: not known)."""

    pid: int
    start_time: int | None


@dataclass(frozen=True, **SLOTS)
class Unit(Condition):
    """A unit by name."""

    unit: str


@dataclass(frozen=True, **SLOTS)
class UnitProcess(Condition):
    """A unit stopped for its processes, and the process seen in it (its start time None:
    not known)."""

    unit: str
    pid: int
    start_time: int | None


@dataclass(frozen=True, **SLOTS)
class UnitState(Condition):
    """A unit and the states seen (None: not known)."""

    unit: str
    active: bool | None
    enabled: bool | None


@dataclass(frozen=True, **SLOTS)
class Running(Condition):
    """Whether a container ran (None: not known); as a postcondition, that it does not."""

    running: bool | None


@dataclass(frozen=True, **SLOTS)
class Backing(Condition):
    """The file a loop device was backed by (None: not known)."""

    backing_file: str | None


@dataclass(frozen=True, **SLOTS)
class MountPin(Condition):
    """A mount by its id; for the volume's own, its device too."""

    mount_id: int | None
    dev: str | None = None


@dataclass(frozen=True, **SLOTS)
class Freeable(Condition):
    """What freeing a volume relies on, checked just before it acts: the steps of this apply
    whose outcomes prove its archives (each verified in this apply: a native archive
    received and compared, with the snapshot's guid now; a tar archive read back), and no
    snapshot but the plan's own and those it lists, none held or cloned, no child dataset,
    the dataset unmounted."""

    verified_by: tuple[str, ...]


# -- what proves a step done ---------------------------------------------------------------------
@dataclass(frozen=True, **SLOTS)
class Archived(Condition):
    """The archive lies complete at its location."""

    archive: str
    complete: bool


@dataclass(frozen=True, **SLOTS)
class NativeArchived(Condition):
    """The native archive at ``native_archive`` is finished, of the snapshot ``origin``
    (``DATASET@SNAP``): its manifest holds that snapshot's guid."""

    native_archive: str
    origin: str


@dataclass(frozen=True, **SLOTS)
class Destroyed(Condition):
    """The dataset does not exist (``zfs list`` says so)."""

    destroyed: str


@dataclass(frozen=True, **SLOTS)
class ReadBack(Condition):
    """Read back with this many mismatches."""

    mismatches: int


@dataclass(frozen=True, **SLOTS)
class CopyOf(Condition):
    """The destination holds a copy of this path."""

    copy_of: str


@dataclass(frozen=True, **SLOTS)
class UnitActive(Condition):
    """The unit is (not) active; stopped, its processes gone; started, holding files under
    the new paths."""

    active: bool
    pids_gone: tuple[int, ...] | None = None
    holds_under: tuple[str, ...] | None = None


@dataclass(frozen=True, **SLOTS)
class Enabled(Condition):
    """The unit is (not) enabled."""

    enabled: bool


@dataclass(frozen=True, **SLOTS)
class Gone(Condition):
    """The process or the item is gone."""

    gone: bool


@dataclass(frozen=True, **SLOTS)
class Held(Condition):
    """The pids still holding a GPU."""

    held: tuple[int, ...]


@dataclass(frozen=True, **SLOTS)
class Exists(Condition):
    """The snapshot exists."""

    exists: bool


@dataclass(frozen=True, **SLOTS)
class Unmounted(Condition):
    """The volume is (not) mounted."""

    mounted: bool


@dataclass(frozen=True, **SLOTS)
class Immutable(Condition):
    """The mount point is immutable."""

    immutable: bool


@dataclass(frozen=True, **SLOTS)
class Shows(Condition):
    """The unit's manager shows it with these paths."""

    shows: tuple[str, ...]


@dataclass(frozen=True, **SLOTS)
class Names(Condition):
    """The lines name these paths."""

    names: tuple[str, ...]


@dataclass(frozen=True, **SLOTS)
class PointsTo(Condition):
    """The link points here."""

    points_to: str


@dataclass(frozen=True, **SLOTS)
class MountPointSet(Condition):
    """A container's mount point ``key`` (``mp0``) holds ``value``: written as
    ``{key: value}``."""

    key: str
    value: str

    def encode_fields(self) -> dict:
        return {self.key: self.value}

    @classmethod
    def decode_fields(cls, data, where: str) -> dict:
        (key, value), = data.items()
        if not isinstance(value, str):
            raise codec.Malformed(f"{where}.{key}", f"expected a string, found "
                                                   f"{codec.kind_of(value)}")
        return {"key": key, "value": value}

    @classmethod
    def shape(cls) -> tuple[frozenset, frozenset]:
        return frozenset(), frozenset()


@dataclass(frozen=True, **SLOTS)
class Freed(Condition):
    """A guest's volume is freed: no key of its config names it and its dataset is gone."""

    freed: bool


# -- an action's own fields ----------------------------------------------------------------------
ENGINES = ("docker", "lxc", "pct", "qm")


@dataclass(frozen=True, **SLOTS)
class Engine(Condition):
    """How a container is stopped or removed: its engine; ``restart_policy`` set instead of
    a stop; ``instead`` what a person may do in its place."""

    SPELLED = (("instead", "or"),)
    engine: Literal["docker", "lxc", "pct", "qm"]
    restart_policy: Literal["no"] | None = None
    instead: str | None = None


@dataclass(frozen=True, **SLOTS)
class DisableNow(Condition):
    """Whether the unit is disabled ``--now`` (it was active)."""

    now: bool


@dataclass(frozen=True, **SLOTS)
class Todo(Condition):
    """What an edit or a person does (``do``: its sentence in ``model/sentence.py``), where
    (``file``, ``line``), what follows it (``then``); ``autostart`` an LXC container's,
    ``keys`` a guest's mount points, ``last`` its last snapshot, ``storage`` a Proxmox
    storage."""

    do: str | None = None
    file: str | None = None
    line: int | None = None
    then: str | None = None
    autostart: bool | None = None
    keys: tuple[str, ...] | None = None
    last: bool | None = None
    storage: str | None = None


def decode(choices: tuple, data, where: str) -> Condition:
    """The value of ``choices`` that the object ``data`` is (its fields say which; every one
    checked); :class:`codec.Malformed` naming the field."""
    if not isinstance(data, dict):
        raise codec.Malformed(where, f"expected an object, found {codec.kind_of(data)}")
    keys = set(data)
    choices = tuple(dict.fromkeys(choices))
    for cls in choices:
        must, may = cls.shape()
        if cls is MountPointSet and len(keys) == 1 or must <= keys <= may:
            return codec.decode(cls, data, where)
    extra = sorted(keys - set().union(*(c.shape()[1] for c in choices)))
    if extra:
        raise codec.Malformed(f"{where}.{extra[0]}", "not a field here")
    missing = sorted(next(c.shape()[0] for c in choices if c.shape()[0]) - keys)
    raise codec.Malformed(f"{where}.{missing[0]}", "missing")


codec.register(Nothing, ItemKnown, Process, Unit, UnitProcess, UnitState, Running, Backing, MountPin,
               Freeable, Destroyed, Archived, NativeArchived, ReadBack, CopyOf, UnitActive, Enabled, Gone, Held, Exists, Unmounted,
               Immutable, Shows, Names, PointsTo, MountPointSet, Engine, DisableNow, Todo,
               Freed)
