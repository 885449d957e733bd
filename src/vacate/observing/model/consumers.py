"""What each type of consumer holds of its own: one frozen, typed value per consumer type
(``TYPE`` on the class), the ``attrs`` of :class:`~vacate.observing.model.usage.Consumer`.

The collectors write what they saw and leave out what they did not: a field may be absent
(``given`` does not name it; it reads as None), or present, ``null`` included (systemd's
``active`` / ``enabled``, a container's ``running``: seen as not known). ``given`` holds the
present fields in the order they are written, so an observation (and a plan holding one, and
a ``vacate.check/1`` document) is written back byte for byte; a type's ``REQUIRED`` fields
must be present. A document is checked field by field on the way in (:func:`decode`): a
value of the wrong type, a field the type does not have, a required field missing, or an
unknown type is refused (:class:`codec.Malformed` naming the field). The values are kept as
JSON spells them (lists stay lists).

``container`` (the container it was found in, or that a process runs in) is a field of every
type. Adding a consumer type: its class here and its line in :data:`TYPES`. Standard library
only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model import codec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Attrs:
    """A consumer's own fields (each type's class below): ``given`` names those present, in
    their order; an absent one reads as None."""

    __slots__ = ()
    TYPE = ""
    REQUIRED: tuple = ()
    user = None        # the user it runs as, on the types that have one (else None)

    def updated(self, **changes):
        """This value with ``changes`` (each present from now on; a new one after the
        others)."""
        return type(self).of({**{k: getattr(self, k) for k in self.given}, **changes})

    def encode_fields(self) -> dict:
        """The ``attrs`` object: the fields present, in their order."""
        return {k: codec.encode(getattr(self, k)) for k in self.given}

    @classmethod
    def decode_fields(cls, data, where: str) -> dict:
        """The fields of ``data`` (an object), each checked against its annotation."""
        if not isinstance(data, dict):
            raise codec.Malformed(where, f"expected an object, found {codec.kind_of(data)}")
        types = {f.name: f.type for f in dataclasses.fields(cls) if f.name != "given"}
        for k, v in data.items():
            at = f"{where}.{k}" if where else k
            ann = types.get(k)
            if ann is None:
                raise codec.Malformed(at, f"not a field of a {cls.TYPE} consumer")
            codec.decode_annotation(ann, v, at)   # checked; kept as JSON spells it
        for k in cls.REQUIRED:
            if k not in data:
                raise codec.Malformed(f"{where}.{k}" if where else k, "missing")
        return {**data, "given": tuple(data)}

    @classmethod
    def of(cls, data: dict, where: str = "attrs"):
        """The value holding ``data`` (a collector's fields), checked as a document is."""
        return cls(**cls.decode_fields(data, where))


@dataclass(frozen=True, **SLOTS)
class ProcessAttrs(Attrs):
    """A process holding something on the volume (``/proc/PID``)."""

    TYPE = "process"
    REQUIRED = ("pid",)
    pid: int | None = None
    start_time: int | None = None
    ppid: int | None = None
    cmdline: str | None = None          # shell-quoted, secrets redacted
    user: str | None = None
    uid: int | None = None
    access: list[str] | None = None
    writing: bool | None = None
    deleted_paths: list[str] | None = None
    unit: str | None = None
    user_manager: int | None = None
    container: dict[str, Any] | None = None
    lxc_monitor: bool | None = None
    cgroup: str | None = None
    pid_namespace: str | None = None
    ns_pid: int | None = None
    gpus: list[dict[str, Any]] | None = None
    gpu_note: str | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class UnitAttrs(Attrs):
    """A systemd unit (system or a user's) naming the volume."""

    TYPE = "systemd-unit"
    enabled: bool | None = None
    active: bool | None = None
    unit_file: str | None = None
    dropins: list[str] | None = None
    scope: str | None = None
    fields: dict[str, list[str]] | None = None
    unit_file_state: str | None = None
    active_state: str | None = None
    sub_state: str | None = None
    state_from: str | None = None
    user: str | None = None
    mounts: str | None = None
    mounts_target: bool | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class MountAttrs(Attrs):
    """A mount of the volume, or one on it (``nested``), in a mount namespace."""

    TYPE = "mount"
    mount_id: int | None = None
    mountpoint: str | None = None
    root: str | None = None
    fstype: str | None = None
    source: str | None = None
    namespace: str | None = None
    nested: bool | None = None
    pid: int | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class FstabAttrs(Attrs):
    """A line of an fstab."""

    TYPE = "fstab"
    file: str | None = None
    line: int | None = None
    source: str | None = None
    mountpoint: str | None = None
    fstype: str | None = None
    options: list[str] | None = None
    relations: list[str] | None = None
    noauto: bool | None = None
    nofail: bool | None = None
    line_sha256: str | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class SwapAttrs(Attrs):
    """An active swap file or device of the volume."""

    TYPE = "swap"
    size_kb: int | None = None
    used_kb: int | None = None
    swap_path: str | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class LoopAttrs(Attrs):
    """A loop device backed by a file of the volume."""

    TYPE = "loop-device"
    device: str | None = None
    backing_file: str | None = None
    mounted_at: list[str] | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class ExportAttrs(Attrs):
    """An NFS export: a line of an exports file (``file``, ``line``, ``relation``,
    ``clients``), or one the kernel exports now (``client``, ``active``)."""

    TYPE = "nfs-export"
    file: str | None = None
    line: int | None = None
    export: str | None = None
    relation: str | None = None
    clients: list[dict[str, str]] | None = None
    line_sha256: str | None = None
    client: str | None = None
    active: bool | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class ShareAttrs(Attrs):
    """An smb share (its section of smb.conf, ``section_lines``: each ``[number, sha256]``),
    or a user's share (``usershare``)."""

    TYPE = "smb-share"
    relations: list[str] | None = None
    available: bool | None = None
    read_only: bool | None = None
    file: str | None = None
    section_lines: list[tuple[int, str]] | None = None
    usershare: bool | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class LxcAttrs(Attrs):
    """An LXC container whose config names the volume (``running`` None: not known)."""

    TYPE = "lxc-container"
    config: str | None = None
    lxcpath: str | None = None
    running: bool | None = None
    state_from: str | None = None
    autostart: bool | None = None
    relations: list[str] | None = None
    mount_entries: list[dict[str, Any]] | None = None
    pid: int | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class GuestAttrs(Attrs):
    """A Proxmox guest whose config names the volume: its keys (``rootfs``, ``mpN``,
    ``unusedN``), pending ones, snapshots; ``binds``: key to value of its bind mount points;
    ``volumes``: key to the storage volume it mounts; its replication jobs; protection."""

    TYPE = "pve-container"
    vmid: int | None = None
    config: str | None = None
    running: bool | None = None
    state_from: str | None = None
    onboot: bool | None = None
    relations: list[str] | None = None
    in_current_config: bool | None = None
    keys: list[str] | None = None
    pending_keys: list[str] | None = None
    snapshots: list[str] | None = None
    binds: dict[str, str] | None = None
    node: str | None = None
    pid: int | None = None
    container: dict[str, Any] | None = None
    # the current config's storage volumes that are the volume: key -> {volume, storage,
    # storage_type, dataset, owner, backup, replicate} (what freeing it depends on)
    volumes: dict[str, Any] | None = None
    replication: list[str] | None = None    # its pvesr jobs (/etc/pve/replication.cfg)
    protection: bool | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class VmAttrs(GuestAttrs):
    """A Proxmox VM (as :class:`GuestAttrs`)."""

    TYPE = "pve-vm"


@dataclass(frozen=True, **SLOTS)
class DockerAttrs(Attrs):
    """A docker container: ``binds`` each ``[path on the volume, in the container, mode]``."""

    TYPE = "docker-container"
    container_id: str | None = None
    image: str | None = None
    running: bool | None = None
    status: str | None = None
    data_root: str | None = None
    restart_policy: str | None = None
    autostart: bool | None = None
    relations: list[str] | None = None
    binds: list[list[str]] | None = None
    pid: int | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class CronAttrs(Attrs):
    """A line of a crontab (or a run-parts script)."""

    TYPE = "cron"
    file: str | None = None
    line: int | None = None
    user: str | None = None
    schedule: str | None = None
    entry: str | None = None
    crontab: str | None = None
    line_sha256: str | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class LinkAttrs(Attrs):
    """A symlink pointing into the volume."""

    TYPE = "symlink"
    target: str | None = None
    resolved: str | None = None
    dangling: bool | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


@dataclass(frozen=True, **SLOTS)
class ConfigAttrs(Attrs):
    """A configuration file naming the volume; its shape says which: an environment file
    (``format``, ``used_by``, ``lines``, ``line_sha256s``: each ``[number, sha256]``), LXC's
    defaults (``relations``, ``note``), a Proxmox storage (``storage``, ``storage_type``),
    smb's ``[global]`` (``section``), docker's data root (``data_root``)."""

    TYPE = "config-file"
    file: str | None = None
    format: str | None = None
    used_by: list[str] | None = None
    lines: list[int] | None = None
    line_sha256s: list[tuple[int, str]] | None = None
    relations: list[str] | None = None
    note: str | None = None
    storage: str | None = None
    storage_type: str | None = None
    section: str | None = None
    data_root: str | None = None
    container: dict[str, Any] | None = None
    given: tuple[str, ...] = ()


TYPES: dict[str, type] = {c.TYPE: c for c in (
    ProcessAttrs, UnitAttrs, MountAttrs, FstabAttrs, SwapAttrs, LoopAttrs, ExportAttrs,
    ShareAttrs, LxcAttrs, GuestAttrs, VmAttrs, DockerAttrs, CronAttrs, LinkAttrs, ConfigAttrs)}


def decode(type_: str, data, where: str) -> Attrs:
    """The ``type_`` consumer's attrs from a document's ``attrs`` object, every field
    checked (:class:`codec.Malformed` naming it)."""
    cls = TYPES.get(type_)
    if cls is None:
        raise codec.Malformed(where.rsplit(".", 1)[0] + ".type",
                              f"not a consumer type: {type_!r}")
    return cls(**cls.decode_fields(data, where))


def of(type_: str, attrs) -> Attrs:
    """``attrs`` (a collector's dict, or already a value) as the ``type_`` consumer's value."""
    if isinstance(attrs, Attrs):
        return attrs
    return decode(type_, dict(attrs), "attrs")


codec.register(*TYPES.values())
