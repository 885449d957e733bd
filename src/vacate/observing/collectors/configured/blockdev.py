"""Which block device a config names, and whether it is the volume's: ``UUID=``/``LABEL=``/
``PARTUUID=`` tags (through ``/dev/disk/by-*`` links or ``blkid``), device nodes, loop image
files and ZFS datasets. Standard library only (``blkid`` is run when present).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from vacate.observing.collectors.configured.match import fs_path
from vacate.observing.compat import SLOTS
from vacate.observing.host import Host
from vacate.observing.model.mount import ZFS_FSTYPES, Target

_BY = {"UUID": "by-uuid", "LABEL": "by-label", "PARTUUID": "by-partuuid",
       "PARTLABEL": "by-partlabel", "ID": "by-id"}


def _blkid(*args: str) -> str:
    exe = shutil.which("blkid")
    if exe is None:
        return ""
    try:
        r = subprocess.run([exe, "-c", "/dev/null", *args], capture_output=True, text=True,
                           timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout


def _loop_backing(dev: str) -> str | None:
    name = os.path.basename(dev)
    if not name.startswith("loop"):
        return None
    try:
        with open(f"/sys/block/{name}/loop/backing_file") as f:
            return f.read().strip()
    except OSError:
        return None


def _rdev(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.major(st.st_rdev), os.minor(st.st_rdev)) if st.st_rdev else None


@dataclass(frozen=True, **SLOTS)
class VolumeDevice:
    """What identifies the volume's own device: its numbers, node, tags and backing file."""

    devnums: frozenset[tuple[int, int]]
    node: str | None
    tags: dict[str, str]               # UUID, LABEL, PARTUUID... from blkid
    backing_file: str | None           # the image file of a loop device
    zfs_dataset: str | None
    fs_root: str = "/"                 # the target's path inside its filesystem (btrfs subvol)

    @classmethod
    def of(cls, target: Target) -> VolumeDevice:
        m = target.mount
        nums = {(m.major, m.minor)}
        node = m.source if m.source.startswith("/dev/") else None
        tags: dict[str, str] = {}
        if node:
            r = _rdev(node)
            if r:
                nums.add(r)
            for line in _blkid("-o", "export", node).splitlines():
                k, sep, v = line.partition("=")
                if sep and k in _BY:
                    tags[k] = v
        return cls(frozenset(nums), node, tags, _loop_backing(node) if node else None,
                   target.zfs_dataset, fs_path(m, target.path) or m.root)

    def matches(self, host: Host, spec: str, fstype: str = "") -> str | None:
        """How ``spec`` (an fstab-style source) names this volume, or None."""
        key, sep, value = spec.partition("=")
        if sep and key.upper() in _BY:
            value = value.strip('"')
            if self.tags.get(key.upper()) == value:
                return f"{key.upper()} of the volume's device {self.node}"
            dev = resolve_tag(host, key.upper(), value)
            if dev and self._is_dev(host, dev):
                return f"{key.upper()} resolves to {dev}"
            return None
        if fstype in ZFS_FSTYPES and self.zfs_dataset and spec == self.zfs_dataset:
            return f"the volume's ZFS dataset {spec}"
        if spec.startswith("/"):
            if self._is_dev(host, spec):
                return f"the volume's device {spec}"
            if self.backing_file and os.path.normpath(spec) == self.backing_file:
                return f"the image file behind {self.node}"
        return None

    def _is_dev(self, host: Host, dev: str) -> bool:
        if self.node and os.path.normpath(dev) == self.node:
            return True
        r = _rdev(host.path(dev))
        return r is not None and r in self.devnums


def resolve_tag(host: Host, key: str, value: str) -> str | None:
    """The device node a tag names on ``host``, through ``/dev/disk/by-*`` or ``blkid``."""
    link = host.path(f"/dev/disk/{_BY[key]}/{value}")
    try:
        dest = os.readlink(link)
        return os.path.normpath(os.path.join(f"/dev/disk/{_BY[key]}", dest))
    except OSError:
        pass
    if host.root != "/":
        return None
    out = _blkid("-o", "device", "-t", f"{key}={value}").split()
    return out[0] if out else None
