"""Mounts and the volume being audited."""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS

# the kernel's ZFS, and zfs-fuse's (its mounts are FUSE's)
ZFS_FSTYPES = frozenset({"zfs", "fuse.zfs"})


@dataclass(frozen=True, **SLOTS)
class Mount:
    """One line of ``/proc/PID/mountinfo``, unescaped."""

    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str            # path inside the filesystem that is mounted here ("/" for the whole fs)
    mountpoint: str      # where, in the reading process's mount namespace
    options: tuple[str, ...]
    optional: tuple[str, ...]   # shared:N, master:N, propagate_from:N, unbindable
    fstype: str
    source: str
    super_options: tuple[str, ...]

    @property
    def dev(self) -> str:
        return f"{self.major}:{self.minor}"

    @property
    def is_zfs(self) -> bool:
        return self.fstype in ZFS_FSTYPES

    @property
    def deleted(self) -> bool:
        """The mounted file or directory was deleted (``//deleted`` root or `` (deleted)``)."""
        return self.root.endswith("//deleted") or self.mountpoint.endswith(" (deleted)")

    def has_option(self, name: str) -> bool:
        return name in self.options

    def super_option(self, name: str) -> str | None:
        for opt in self.super_options:
            key, _, value = opt.partition("=")
            if key == name:
                return value
        return None

    def as_json(self) -> dict:
        return {
            "mount_id": self.mount_id,
            "mountpoint": self.mountpoint,
            "root": self.root,
            "source": self.source,
            "fstype": self.fstype,
            "dev": self.dev,
            "options": list(self.options),
        }


@dataclass(frozen=True, **SLOTS)
class LoopBacking:
    """The loop device a volume is on, as ``/sys/block/loopN/loop`` says: the file behind
    it and whether the kernel detaches it at the last unmount (``autoclear``, as ``mount -o
    loop`` sets it; a device attached by hand with ``losetup`` stays)."""

    device: str
    backing_file: str
    autoclear: bool


@dataclass(frozen=True, **SLOTS)
class Target:
    """The volume under audit: the path asked for and the mount that holds it."""

    path: str                   # absolute, symlinks resolved
    mount: Mount
    st_dev: int                 # stat(path).st_dev (differs from mount.major:minor on btrfs)
    size_bytes: int | None
    used_bytes: int | None
    avail_bytes: int | None
    atime_reliable: bool
    atime_note: str
    zfs_dataset: str | None
    nested_mounts: tuple[Mount, ...]    # mounted below path: they block an unmount
    other_mounts: tuple[Mount, ...]     # the same filesystem mounted elsewhere (binds)
    loop: LoopBacking | None = None     # the volume is on a loop device

    @property
    def mountpoint(self) -> str:
        return self.mount.mountpoint

    def as_json(self) -> dict:
        return {
            "path": self.path,
            "mountpoint": self.mount.mountpoint,
            "source": self.mount.source,
            "fstype": self.mount.fstype,
            "dev": self.mount.dev,
            "mount_id": self.mount.mount_id,
            "zfs_dataset": self.zfs_dataset,
            "size_bytes": self.size_bytes,
            "used_bytes": self.used_bytes,
            "avail_bytes": self.avail_bytes,
            "options": list(self.mount.options),
            "super_options": list(self.mount.super_options),
            "atime_reliable": self.atime_reliable,
            "atime_note": self.atime_note,
            "nested_mounts": [m.as_json() for m in self.nested_mounts],
            "other_mounts": [m.as_json() for m in self.other_mounts],
            **({"loop": {"device": self.loop.device, "backing_file": self.loop.backing_file,
                         "autoclear": self.loop.autoclear}} if self.loop else {}),
        }
