"""Proxmox VE ``/etc/pve/storage.cfg``: storage definitions, and where a volume id lives.

A definition is a ``type: id`` line followed by indented ``key value`` lines (tabs or spaces);
``#`` lines are comments. :func:`resolve` turns ``storage:volname`` into the host path and/or
ZFS dataset it names, following pve-storage's layout rules. Pure: text in, values out.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem
from vacate.observing.parsers.redact import shown_text

# storage types whose volumes are files below ``path``
_FILE_TYPES = ("dir", "nfs", "cifs", "glusterfs", "cephfs", "btrfs")
# default subdirectory per content type (``content-dirs`` overrides)
_CONTENT_DIRS = {"images": "images", "rootdir": "images", "iso": "template/iso",
                 "vztmpl": "template/cache", "backup": "dump", "snippets": "snippets",
                 "import": "import"}
_VOLNAME_KIND = (
    (re.compile(r"^iso/"), "iso"), (re.compile(r"^vztmpl/"), "vztmpl"),
    (re.compile(r"^backup/"), "backup"), (re.compile(r"^snippets/"), "snippets"),
    (re.compile(r"^import/"), "import"),
)
_GUEST_VOL = re.compile(r"^(?:(?P<base>\d+/[^/]+)/)?(?:(?P<vmid>\d+)/)?(?P<name>[^/]+)$")


@dataclass(frozen=True, **SLOTS)
class Storage:
    """One storage of Proxmox's storage.cfg: its id, type and properties."""
    id: str
    type: str
    props: dict[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def path(self) -> str | None:
        return self.props.get("path")


@dataclass(frozen=True, **SLOTS)
class Location:
    """Where a volume id lives: a host path (file, directory or block device) and/or a dataset."""

    storage: Storage
    path: str | None
    dataset: str | None = None


def parse(text: str, source: str = "storage.cfg") -> tuple[dict[str, Storage], tuple[Problem, ...]]:
    storages: dict[str, Storage] = {}
    problems: list[Problem] = []
    cur: tuple[str, str, int] | None = None
    props: dict[str, str] = {}

    def close() -> None:
        if cur is not None:
            storages[cur[1]] = Storage(cur[1], cur[0], dict(props), cur[2])

    for n, t in enumerate(text.splitlines(), 1):
        s = t.strip()
        if not s or s.startswith("#"):
            continue
        if not t[:1].isspace():
            typ, sep, sid = s.partition(":")
            if not sep or not sid.strip():
                problems.append(Problem("malformed-config", f"not a 'type: id' line: {shown_text(s, 120)!r}",
                                        f"{source}:{n}"))
                close()               # the section before it stands
                cur = None
                continue
            close()
            cur, props = (typ.strip(), sid.strip(), n), {}
            continue
        if cur is None:
            problems.append(Problem("malformed-config", f"property outside a storage: {shown_text(s, 120)!r}",
                                    f"{source}:{n}"))
            continue
        key, _, value = s.partition(" ")
        props[key] = value.strip()   # a bare flag (``sparse``) gets ""
    close()
    return storages, tuple(problems)


_OWNED = re.compile(r"^(?:(?:base|basevol)-\d+-\S+/)?(?:base|basevol|vm|subvol)-(\d+)-\S+$")


def owner(volname: str) -> int | None:
    """The guest that owns a volume, as the storage plugins' ``parse_volname`` tells it
    (ZFSPoolPlugin: ``(base|basevol|vm|subvol)-VMID-...``, after an optional base volume;
    file storages: ``VMID/NAME``); None when the name says none."""
    m = _OWNED.match(volname) or _OWNED.match(volname.split("/", 1)[-1])
    if m:
        return int(m.group(1))
    g = _GUEST_VOL.match(volname)
    return int(g.group("vmid")) if g and g.group("vmid") else None


def _content_dir(st: Storage, kind: str) -> str:
    for item in st.props.get("content-dirs", "").split(","):
        k, sep, v = item.partition("=")
        if sep and k.strip() == kind:
            return v.strip().strip("/")
    return _CONTENT_DIRS[kind]


def resolve(storages: dict[str, Storage], volume_id: str) -> Location | None:
    """Where ``storage:volname`` lives, or None when the storage is unknown."""
    sid, sep, volname = volume_id.partition(":")
    st = storages.get(sid)
    if not sep or st is None:
        return None
    if st.type == "zfspool":
        pool = st.props.get("pool", "").strip("/")
        name = volname.split("/")[-1]        # base-100-disk-0/vm-101-disk-0 (linked clone)
        dataset = f"{pool}/{name}" if pool else name
        if name.startswith(("subvol-", "basevol-")):
            mnt = st.props.get("mountpoint")
            path = posixpath.join(mnt, name) if mnt else "/" + dataset
            return Location(st, path, dataset)
        return Location(st, f"/dev/zvol/{dataset}", dataset)
    if st.type in ("lvm", "lvmthin"):
        vg = st.props.get("vgname", "")
        return Location(st, f"/dev/{vg}/{volname.split('/')[-1]}")
    if st.type in _FILE_TYPES and st.path:
        base = st.path   # cifs ``subdir`` is on the server side; the mount is at path
        for rx, kind in _VOLNAME_KIND:
            if rx.match(volname):
                rest = volname.split("/", 1)[1]
                return Location(st, posixpath.join(base, _content_dir(st, kind), rest))
        m = _GUEST_VOL.match(volname)
        if m and m.group("vmid"):
            rel = posixpath.join(m.group("vmid"), m.group("name"))
        else:
            # dir storage rootdir volumes written without the vmid: subvol-129-disk-0
            g = re.match(r"^(?:subvol|vm|base|basevol)-(\d+)-", volname)
            rel = posixpath.join(g.group(1), volname) if g else volname
        path = posixpath.join(base, _content_dir(st, "images"), rel)
        if st.type == "btrfs" and path.endswith(".raw"):
            # btrfs storage keeps raw images in a subvolume: images/VMID/vm-..-disk-N/disk.raw
            path = posixpath.join(path[: -len(".raw")], "disk.raw")
        return Location(st, path)
    return Location(st, None)
