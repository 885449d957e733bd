"""What each kind of step is: one frozen, typed value per kind, its name on the class
(``KIND``). decide builds them; act only reads them; a plan file keeps each as the step's
``params`` object (fields left at their default left out, so a plan of the earlier code reads
the same), and :mod:`codec` checks every field when one is read back.

How a kind acts (``done`` / ``ready`` / ``run`` and its policy) is its act module's; what a
step of it says is here. Adding a kind: its value here (one class and one line in
:data:`KINDS`), its act module, one line of ``vacate.act.registry``.

Standard library only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model import codec
from vacate.observing.model.conditions import (
    Archived,
    Backing,
    CopyOf,
    Destroyed,
    Enabled,
    Exists,
    Freeable,
    Freed,
    Gone,
    Held,
    Immutable,
    ItemKnown,
    MountPin,
    MountPointSet,
    Names,
    NativeArchived,
    Nothing,
    PointsTo,
    Process,
    ReadBack,
    Running,
    Shows,
    UnitActive,
    UnitProcess,
    Unmounted,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal


class Params:
    """A step's parameters (each kind's own class below). ``KIND``: the step kind it is;
    ``PRE`` and ``POST``: the conditions (:mod:`conditions`) its steps may rely on and be
    proved by."""

    __slots__ = ()
    KIND = ""
    PRE: tuple = (Nothing,)
    POST: tuple = (Nothing,)

    def encode_fields(self) -> dict:
        """The step's ``params`` object: fields left at their default are left out (an
        older plan without them reads the same)."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            if f.default_factory is not dataclasses.MISSING and v == f.default_factory():
                continue
            out[f.name] = codec.encode(v)
        return out

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


# -- steps that say everything in their action (the unit, the mount, the pid) ---------------
def _action_only(name: str, kind: str, doc: str, pre: tuple = (Nothing,),
                 post: tuple = (Nothing,)) -> type:
    """A kind whose step says everything in its action: a value without fields."""
    return dataclass(frozen=True, **SLOTS)(type(name, (Params,), {
        "__doc__": doc, "__module__": __name__, "KIND": kind, "PRE": pre, "POST": post}))


StopUnit = _action_only("StopUnit", "stop-unit", "Stop a systemd unit in its manager.",
                        (UnitProcess, Nothing), (UnitActive,))
DisableUnit = _action_only("DisableUnit", "disable-unit", "Disable a systemd unit.",
                           post=(Enabled,))
MaskUnit = _action_only("MaskUnit", "mask-unit", "Mask a unit that names what goes away.")
StopContainer = _action_only("StopContainer", "stop-container",
                             "Stop a container (or keep a docker one from coming back).",
                             (Running, Process, Nothing), (Running, Nothing))
Swapoff = _action_only("Swapoff", "swapoff", "Stop swapping to a file or device of the volume.")
DetachLoop = _action_only("DetachLoop", "detach-loop",
                          "Detach a loop device backed by a file of the volume.", (Backing,))
Unmount = _action_only("Unmount", "unmount", "Unmount a mount (the volume, or one on it).",
                       (MountPin,), (Unmounted, Nothing))
Unexport = _action_only("Unexport", "unexport", "Stop exporting a path over NFS.")


# -- steps with parameters of their own ---------------------------------------------------------
@dataclass(frozen=True, **SLOTS)
class Archive(Params):
    """The item, the destination, the archive's name there, the sub-items left out."""

    KIND = "archive"
    PRE = (ItemKnown,)
    POST = (Archived,)
    item: str
    to: str
    name: str
    exclude: tuple[str, ...]


@dataclass(frozen=True, **SLOTS)
class Verify(Params):
    """The item, its archive's location, what it is checked against."""

    KIND = "verify"
    POST = (ReadBack,)
    item: str
    archive: str
    against: str


@dataclass(frozen=True, **SLOTS)
class ArchiveDataset(Params):
    """The volume's ZFS dataset archived natively: the snapshot taken (named for the plan),
    then ``zfs send`` of it (with ``send_flags``) compressed into parts in ``to/name``."""

    KIND = "archive-dataset"
    POST = (NativeArchived,)
    dataset: str
    snapshot: str
    to: str
    name: str
    send_flags: tuple[str, ...] = ("-p",)


@dataclass(frozen=True, **SLOTS)
class VerifyDataset(Params):
    """The native archive at ``archive`` proved receivable into a scratch dataset of
    ``verify_pool`` (and compared with the snapshot), or, with no pool, its stream parsed
    end to end (the weaker check)."""

    KIND = "verify-dataset"
    POST = (ReadBack,)
    archive: str
    verify_pool: str | None = None


@dataclass(frozen=True, **SLOTS)
class DestroyDataset(Params):
    """The volume's ZFS dataset freed (``zfs destroy -r``, never ``-R``), the plan's last
    step (``--free-volume``); ``snapshots``: those it had when planned besides the plan's
    own, neither held nor cloned, destroyed with it; ``restore``: what gives it back (the
    native archive's receive, or its tar archives)."""

    KIND = "destroy-dataset"
    PRE = (Freeable,)
    POST = (Destroyed,)
    dataset: str
    snapshots: tuple[str, ...] = ()
    restore: str = ""


@dataclass(frozen=True, **SLOTS)
class Check(Params):
    """What is looked at again: ``freed`` (the space) or ``retired`` (the volume, by its
    device and source)."""

    KIND = "check"
    what: Literal["freed", "retired"]
    mount_dev: str | None = None
    source: str | None = None


@dataclass(frozen=True, **SLOTS)
class EditConfig(Params):
    """A line of a file with its sha256 (``lines``: every line of an smb share's section,
    each ``(number, sha256)``); or, for ``do == "delete-disks"``, a guest's mount points
    (``keys``) deleted through its tool."""

    KIND = "edit-config"
    file: str | None = None
    line: int | None = None
    line_sha256: str | None = None
    lines: tuple[tuple[int, str], ...] | None = None
    do: Literal["delete-disks"] | None = None
    tool: Literal["pct", "qm"] | None = None
    vmid: str | None = None
    keys: tuple[str, ...] = ()
    config: str | None = None
    moves: tuple[tuple[str, str], ...] = ()
    ct: str | None = None         # the file is inside this Proxmox container, as it spells it


@dataclass(frozen=True, **SLOTS)
class RepointConfig(EditConfig):
    """Lines of a file (as :class:`EditConfig`) kept behind the marker, each followed by
    itself with the migrated paths (``moves``: each ``(old, new)`` as the line spells it)."""

    KIND = "repoint-config"
    POST = (Names,)


@dataclass(frozen=True, **SLOTS)
class Delete(Params):
    """The item, and the sub-items left on the volume."""

    KIND = "delete"
    PRE = (ItemKnown,)
    POST = (Gone,)
    item: str
    exclude: tuple[str, ...]


@dataclass(frozen=True, **SLOTS)
class Snapshot(Params):
    """The volume's filesystem, its dataset (ZFS) and the items about to be deleted."""

    KIND = "snapshot"
    POST = (Exists,)
    fstype: Literal["zfs", "btrfs"]
    dataset: str | None
    items: tuple[str, ...]


GPU_WAIT_S = 30.0


@dataclass(frozen=True, **SLOTS)
class ReleaseGpu(Params):
    """The pids whose GPUs must be released, and how long to wait for the driver."""

    KIND = "release-gpu"
    POST = (Held,)
    pids: tuple[int, ...]
    wait_s: float = GPU_WAIT_S


@dataclass(frozen=True, **SLOTS)
class LockDir(Params):
    """The empty mount point to make immutable."""

    KIND = "lock-dir"
    POST = (Immutable,)
    path: str


@dataclass(frozen=True, **SLOTS)
class Manual(Params):
    """Where the person acts: a line of a file (with its sha256 when known), or the
    consumer the step is about."""

    KIND = "manual"
    file: str | None = None
    line: int | None = None
    line_sha256: str | None = None
    consumer: str | None = None


@dataclass(frozen=True, **SLOTS)
class Copy(Params):
    """The item, its new path, and whether this is the pass after the stop."""

    KIND = "copy"
    POST = (CopyOf,)
    item: str
    to: str
    final: bool


@dataclass(frozen=True, **SLOTS)
class VerifyCopy(Params):
    """The item and the copy of it to read back."""

    KIND = "verify-copy"
    POST = (ReadBack,)
    item: str
    to: str


@dataclass(frozen=True, **SLOTS)
class RepointUnit(Params):
    """The unit; the step that stopped it (its manager is reached the same way); each
    ``(old, new)`` path."""

    KIND = "repoint-unit"
    POST = (Shows,)
    unit: str
    stop_step: str
    moves: tuple[tuple[str, str], ...]


@dataclass(frozen=True, **SLOTS)
class StartUnit(Params):
    """The unit, the step that stopped it, the new places its processes must use, the
    volume they must not."""

    KIND = "start-unit"
    POST = (UnitActive,)
    unit: str
    stop_step: str
    into: tuple[str, ...]
    away: str


@dataclass(frozen=True, **SLOTS)
class EndProcess(Params):
    """How long to wait after TERM before KILL."""

    KIND = "end-process"
    PRE = (Process,)
    POST = (Gone,)
    grace_s: float


@dataclass(frozen=True, **SLOTS)
class RepointMountPoint(Params):
    """A container's bind mount point repointed: its config, the key (``mp0``), the value
    planned and the new one; ``start``: it ran when planned (the plan stops it), so it is
    started again once repointed."""

    KIND = "repoint-mount-point"
    POST = (MountPointSet,)
    vmid: str
    config: str
    key: str
    value: str
    new: str
    start: bool = False


@dataclass(frozen=True, **SLOTS)
class RepointLink(Params):
    """The link (as the host spells it), the target it read when planned, the new one."""

    KIND = "repoint-link"
    POST = (PointsTo,)
    link: str
    target: str
    to: str


@dataclass(frozen=True, **SLOTS)
class FreeGuestVolume(Params):
    """A Proxmox container's volume freed through ``pct`` once the deletion of its mount
    point took effect: ``pct set VMID --delete unusedN`` (N as the config has it when the
    step acts), the volume id, the mount point it was (``key``), its ZFS dataset (proved
    gone after)."""

    KIND = "free-guest-volume"
    PRE = (Freeable,)
    POST = (Freed,)
    vmid: str
    config: str
    key: str
    volume: str
    dataset: str
    tool: Literal["pct"] = "pct"


KINDS: dict[str, type] = {c.KIND: c for c in (
    Archive, ArchiveDataset, Check, Copy, Delete, DestroyDataset, DetachLoop, DisableUnit,
    EditConfig, EndProcess, FreeGuestVolume, LockDir, Manual, MaskUnit, ReleaseGpu, RepointConfig, RepointLink,
    RepointMountPoint, RepointUnit, Snapshot, StartUnit, StopContainer, StopUnit, Swapoff,
    Unexport, Unmount, Verify, VerifyCopy, VerifyDataset)}


def decode(kind: str, data, where: str) -> Params:
    """The ``kind`` step's parameters from the plan file's ``params`` object; every field
    checked (:class:`codec.Malformed` naming it)."""
    cls = KINDS.get(kind)
    if cls is None:
        raise codec.Malformed(where.rsplit(".", 1)[0] + ".kind",
                              f"not a step kind: {kind!r}")
    return codec.decode(cls, data, where)


codec.register(*KINDS.values())
