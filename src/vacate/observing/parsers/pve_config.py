"""Proxmox VE guest configs: ``/etc/pve/lxc/CTID.conf`` and ``/etc/pve/qemu-server/VMID.conf``.

``key: value`` lines; ``#`` lines are the guest's description, URL-encoded (``%3A``); ``[name]``
starts a snapshot section (``[PENDING]``/``[pve:pending]`` hold pending changes,
``[special:...]`` other state). Disk-like values are ``VOLUME[,opt=value...]`` where VOLUME is a
volume id ``storage:volname``, an absolute path (bind mount or device) or ``none``/``cdrom``.
Pure: text in, values out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem
from vacate.observing.parsers.redact import shown_text

# keys whose value names storage: containers (rootfs, mpN, unusedN) and VMs (disks, unusedN)
_DISK_KEY = re.compile(
    r"^(rootfs|mp\d+|unused\d+|ide\d+|sata\d+|scsi\d+|virtio\d+|efidisk\d+|tpmstate\d+)$")


@dataclass(frozen=True, **SLOTS)
class PveLine:
    """One ``key: value`` line of a Proxmox guest config."""
    line: int
    key: str
    value: str
    raw: str


@dataclass(frozen=True, **SLOTS)
class PveSection:
    """The current config (``name`` None) or a snapshot / pending section."""

    name: str | None
    lines: tuple[PveLine, ...]
    description: str            # decoded comment lines

    @property
    def is_snapshot(self) -> bool:
        return self.name is not None and self.name not in ("PENDING", "pve:pending") \
            and not self.name.startswith("special:")

    def get(self, key: str) -> str | None:
        for ln in self.lines:
            if ln.key == key:
                return ln.value
        return None


@dataclass(frozen=True, **SLOTS)
class PveConfig:
    """A Proxmox guest config: the current section first, then pending and snapshots."""
    sections: tuple[PveSection, ...]

    @property
    def current(self) -> PveSection:
        return self.sections[0]


@dataclass(frozen=True, **SLOTS)
class PveVolume:
    """A disk-like value taken apart."""

    volume: str                 # volume id, path, or none/cdrom
    options: dict[str, str]

    @property
    def storage(self) -> str | None:
        """The storage id of a volume id (``scratch:subvol-129-disk-0`` -> ``scratch``)."""
        if self.volume.startswith("/") or ":" not in self.volume:
            return None
        return self.volume.split(":", 1)[0]

    @property
    def volname(self) -> str | None:
        if self.storage is None:
            return None
        return self.volume.split(":", 1)[1]

    @property
    def path(self) -> str | None:
        """An absolute host path (bind mount point source or device)."""
        return self.volume if self.volume.startswith("/") else None

    @property
    def guest_path(self) -> str | None:
        return self.options.get("mp")


def is_disk_key(key: str) -> bool:
    return bool(_DISK_KEY.match(key))


def parse_volume(value: str) -> PveVolume:
    """``scratch:subvol-129-disk-0,mp=/data,size=0T`` / ``volume=/x,mp=/y`` / ``/dev/sdb``."""
    parts = value.split(",")
    volume = ""
    opts: dict[str, str] = {}
    for i, part in enumerate(parts):
        k, sep, v = part.partition("=")
        if i == 0 and (not sep or "/" in k or ":" in k):
            volume = part
        elif sep and k in ("volume", "file"):
            volume = v
        elif sep:
            opts[k] = v
        else:
            opts[k] = ""
    return PveVolume(volume.strip(), opts)


def parse(text: str, source: str = "conf") -> tuple[PveConfig, tuple[Problem, ...]]:
    sections: list[PveSection] = []
    problems: list[Problem] = []
    name: str | None = None
    lines: list[PveLine] = []
    desc: list[str] = []

    def close() -> None:
        sections.append(PveSection(name, tuple(lines), "\n".join(desc)))

    for n, t in enumerate(text.splitlines(), 1):
        s = t.strip()
        if not s:
            continue
        if s.startswith("[") and s.endswith("]"):
            close()
            name, lines, desc = s[1:-1], [], []
            continue
        if s.startswith("#"):
            desc.append(unquote(s[1:]))
            continue
        key, sep, value = s.partition(":")
        if not sep or not key or " " in key.strip():
            problems.append(Problem("malformed-config", f"not a key: value line: {shown_text(s, 120)!r}",
                                    f"{source}:{n}"))
            continue
        lines.append(PveLine(n, key.strip(), value.strip(), t.rstrip("\n")))
    close()
    return PveConfig(tuple(sections)), tuple(problems)
