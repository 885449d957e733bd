"""LXC container configuration (lxc.container.conf(5)): ``key = value`` lines.

``#`` starts a comment line; blank lines are skipped; a value runs to the end of the line.
Proxmox writes raw LXC keys into its own configs as ``lxc.key: value``, so a colon separator
is accepted as well when the key starts with ``lxc.``. Pure: text in, values out; following
``lxc.include`` and ``lxc.mount.fstab`` is the collector's job.
"""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem
from vacate.observing.parsers.lines import parse_lines
from vacate.observing.parsers.redact import shown_text

# keys that moved in LXC 2.1; the old spelling means the same
LEGACY_KEYS = {"lxc.rootfs": "lxc.rootfs.path", "lxc.mount": "lxc.mount.fstab",
               "lxc.utsname": "lxc.uts.name"}


@dataclass(frozen=True, **SLOTS)
class LxcLine:
    """One ``lxc.key = value`` line of an LXC config."""
    line: int
    key: str      # normalised (legacy spellings mapped to current ones)
    value: str
    raw: str


@dataclass(frozen=True, **SLOTS)
class Rootfs:
    """``lxc.rootfs.path`` taken apart: the backend and the host paths / dataset it uses."""

    backend: str               # dir, overlay, btrfs, zfs, loop, lvm, nbd, rbd
    paths: tuple[str, ...]     # host paths (directories or image files)
    dataset: str | None = None  # zfs dataset


def parse_line(text: str, line: int = 0) -> LxcLine | None:
    stripped = text.strip()
    if not stripped or stripped.startswith("#"):
        return None
    key, sep, value = stripped.partition("=")
    if not sep or ":" in key:
        k2, sep2, v2 = stripped.partition(":")
        if sep2 and k2.strip().startswith("lxc."):
            key, sep, value = k2, sep2, v2
    if not sep:
        raise ValueError(f"not a key = value line: {shown_text(stripped, 120)!r}")
    key = key.strip()
    return LxcLine(line, LEGACY_KEYS.get(key, key), value.strip(), text.rstrip("\n"))


def parse(text: str, source: str = "config") -> tuple[tuple[LxcLine, ...], tuple[Problem, ...]]:
    return parse_lines(text, source, parse_line)


def parse_rootfs(value: str) -> Rootfs:
    """``dir:/p``, ``/p``, ``overlay:/lower:/upper`` (also ``overlayfs:``), ``btrfs:/p``,
    ``zfs:pool/ds`` (or a path), ``loop:/file.img``, ``lvm:/dev/vg/lv``, ``nbd:/file``."""
    v = value.strip()
    if v.startswith("/"):
        return Rootfs("dir", (v,))
    backend, _, rest = v.partition(":")
    if backend in ("overlay", "overlayfs"):
        return Rootfs("overlay", tuple(p for p in rest.split(":") if p))
    if backend == "zfs":
        if rest.startswith("/"):
            return Rootfs("zfs", (rest,))
        return Rootfs("zfs", (), dataset=rest)
    if backend in ("rbd", "ceph"):
        return Rootfs(backend, ())
    return Rootfs(backend or "dir", (rest,) if rest else ())
