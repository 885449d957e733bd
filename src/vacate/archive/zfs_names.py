"""A native (``zfs send``) archive's files, its manifest and its README.

The archive is one directory: ``NAME.zfs.zst.000000``, ``…001``, … (the ``zfs send`` stream
compressed with zstd and cut at byte boundaries: ``cat`` of the parts in order is one zstd
stream), ``SHA256SUMS`` (the parts, as ``sha256sum -c`` reads it), ``README`` (the stock
restore) and ``ZFS-MANIFEST.json``, written last: an archive without it is unfinished.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from vacate.observing.compat import SLOTS

SCHEMA = "vacate.zfs-archive/1"
MANIFEST = "ZFS-MANIFEST.json"
SUMS = "SHA256SUMS"
README = "README"
TREE = "ZFS-TREE.jsonl"
MAX_MANIFEST = 4 << 20
# the flags a stream may be sent with: those zfs-fuse 0.7 and every later ZFS share (never
# -D: a deduplicated stream cannot be received by OpenZFS 2.2+)
SEND_FLAGS = ("-R", "-p")
LAYOUT = ("compression", "recordsize", "copies")
_PART = re.compile(r"\.zfs\.zst\.(\d{6})\Z")
_DATASET = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]*\Z")
_SNAP = re.compile(r"[A-Za-z0-9_.:-]+\Z")


class Damaged(ValueError):
    """The manifest is not one vacate wrote (the message names what is wrong)."""


def part_name(name: str, n: int) -> str:
    """The ``n``th part (from 0); six digits, so that a shell glob sorts them in order."""
    return f"{name}.zfs.zst.{n:06d}"


def is_part(name: str, archive: str) -> bool:
    return name.startswith(archive) and bool(_PART.fullmatch(name[len(archive):]))


def dataset_error(name: str) -> str | None:
    """Why ``name`` is not a dataset name vacate hands to zfs (None: it is)."""
    if not _DATASET.match(name) or "//" in name or name.endswith("/") or \
            any(p in (".", "..") for p in name.split("/")) or len(name) > 255:
        return "not a ZFS dataset name (POOL/NAME…)"
    return None


def snapshot_error(name: str) -> str | None:
    return None if _SNAP.match(name) and len(name) <= 255 else "not a snapshot name"


@dataclass(frozen=True, **SLOTS)
class Part:
    """One part of a native archive: its file name, size and sha256."""

    name: str
    bytes: int
    sha256: str


@dataclass(frozen=True, **SLOTS)
class Tree:
    """The snapshot's tree as recorded at archive time: the file listing it (its size and
    sha256), and what verify compares a received tree with (its digest, entries, bytes)."""

    name: str
    bytes: int                     # of the tree file
    sha256: str                    # of the tree file
    digest: str                    # over the entries, as tree_compare makes it
    entries: int
    content_bytes: int             # the files' bytes hashed

    def as_json(self) -> dict:
        return {"name": self.name, "bytes": self.bytes, "sha256": self.sha256,
                "digest": self.digest, "entries": self.entries,
                "content_bytes": self.content_bytes}


@dataclass(frozen=True, **SLOTS)
class NativeManifest:
    """What ``ZFS-MANIFEST.json`` says: the dataset and snapshot sent, how, and the parts."""
    name: str
    created: str
    dataset: str
    snapshot: str
    guid: int                      # the snapshot's guid: a receive keeps it
    createtxg: int
    creation: int                  # the snapshot's creation, seconds since the epoch
    referenced: int                # the snapshot's referenced bytes
    toguid: int                    # the stream's DRR_BEGIN toguid (equal to guid)
    send_flags: tuple[str, ...]
    stream_bytes: int              # the uncompressed stream
    parts: tuple[Part, ...]
    level: int
    props_local: tuple[str, ...] = ()   # properties set on the dataset itself (sent by -p)
    # what the referenced bytes depend on (a receive writes blocks as its pool says)
    layout: tuple[tuple[str, str], ...] = ()
    tool: str = "vacate"
    tree: Tree | None = None       # None: an archive written before the tree was recorded

    @property
    def origin(self) -> str:
        return f"{self.dataset}@{self.snapshot}"

    @property
    def archive_bytes(self) -> int:
        return sum(p.bytes for p in self.parts)

    def receive_command(self, into: str = "POOL/NAME") -> str:
        return f"cat {self.name}.zfs.zst.* | zstd -dc | zfs receive {into}"

    def as_json(self) -> dict:
        return {"schema": SCHEMA, "name": self.name, "created": self.created,
                "tool": self.tool, "dataset": self.dataset, "snapshot": self.snapshot,
                "guid": self.guid, "createtxg": self.createtxg, "creation": self.creation,
                "referenced": self.referenced, "toguid": self.toguid,
                "send_flags": list(self.send_flags), "stream_bytes": self.stream_bytes,
                "compression": {"format": "zstd", "level": self.level},
                "props_local": list(self.props_local), "layout": dict(self.layout),
                "parts": [{"name": p.name, "bytes": p.bytes, "sha256": p.sha256}
                          for p in self.parts],
                "receive": self.receive_command(),
                **({"tree": self.tree.as_json()} if self.tree else {})}

    def dumps(self) -> bytes:
        return (json.dumps(self.as_json(), indent=1, ensure_ascii=True) + "\n").encode()


def _get(d: dict, key: str, typ: type):
    v = d.get(key)
    if type(v) is not typ:
        raise Damaged(f"{key!r} is missing or not a {typ.__name__}")
    return v


def _uint(d: dict, key: str) -> int:
    v = _get(d, key, int)
    if not 0 <= v < 1 << 64:
        raise Damaged(f"{key!r} is out of range")
    return v


def loads(data: bytes, archive_dir_name: str | None = None) -> NativeManifest:
    """The manifest, every field checked: a name and parts that are plain file names of this
    archive, a dataset and snapshot zfs can be handed, flags vacate sends with. Raises
    :class:`Damaged`."""
    if len(data) > MAX_MANIFEST:
        raise Damaged(f"larger than vacate writes a manifest ({MAX_MANIFEST:,} bytes)")
    try:
        d = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise Damaged(f"not JSON: {str(e)[:120]}") from None
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        raise Damaged(f"not a {SCHEMA} manifest")
    name = _get(d, "name", str)
    if not name or "/" in name or name.startswith(".") or "\0" in name or len(name) > 200:
        raise Damaged(f"'name' is not a plain file name: {name[:80]!r}")
    dataset, snap = _get(d, "dataset", str), _get(d, "snapshot", str)
    if why := dataset_error(dataset):
        raise Damaged(f"'dataset' {dataset[:80]!r}: {why}")
    if why := snapshot_error(snap):
        raise Damaged(f"'snapshot' {snap[:80]!r}: {why}")
    flags = _get(d, "send_flags", list)
    if not all(f in SEND_FLAGS for f in flags):
        raise Damaged(f"'send_flags' {flags!r}: vacate sends only with {' '.join(SEND_FLAGS)}")
    parts = []
    for i, p in enumerate(_get(d, "parts", list)):
        if not isinstance(p, dict):
            raise Damaged(f"part {i + 1} is not an object")
        pname = _get(p, "name", str)
        if pname != part_name(name, i):
            raise Damaged(f"part {i + 1} is named {pname[:80]!r}, not "
                          f"{part_name(name, i)!r} (a part is a file of this archive, in order)")
        parts.append(Part(pname, _uint(p, "bytes"), _sha(p, "sha256", f"part {pname}")))
    if not parts:
        raise Damaged("no parts")
    comp = _get(d, "compression", dict)
    props = _get(d, "props_local", list)
    if not all(isinstance(x, str) for x in props):
        raise Damaged("'props_local' must be a list of property names")
    layout = _get(d, "layout", dict)
    if not all(k in LAYOUT and isinstance(v, str) and len(v) < 64 for k, v in layout.items()):
        raise Damaged(f"'layout' holds only {', '.join(LAYOUT)}")
    return NativeManifest(
        name, _get(d, "created", str), dataset, snap, _uint(d, "guid"),
        _uint(d, "createtxg"), _uint(d, "creation"), _uint(d, "referenced"),
        _uint(d, "toguid"), tuple(flags), _uint(d, "stream_bytes"), tuple(parts),
        _uint(comp, "level"), tuple(props), tuple(sorted(layout.items())),
        _get(d, "tool", str), _tree(d["tree"]) if "tree" in d else None)


def _sha(d: dict, key: str, what: str) -> str:
    v = _get(d, key, str)
    if len(v) != 64 or not set(v) <= set("0123456789abcdef"):
        raise Damaged(f"{what}: {key!r} is not a sha256")
    return v


def _tree(d) -> Tree:
    if not isinstance(d, dict):
        raise Damaged("'tree' is not an object")
    if _get(d, "name", str) != TREE:
        raise Damaged(f"'tree' names a file other than {TREE}")
    return Tree(TREE, _uint(d, "bytes"), _sha(d, "sha256", "tree"), _sha(d, "digest", "tree"),
                _uint(d, "entries"), _uint(d, "content_bytes"))


def sums_file(parts) -> bytes:
    from vacate.archive.sums import line
    return b"".join(line(p.sha256, p.name.encode()) for p in parts)


README_TEXT = """\
This directory is a native ZFS archive written by vacate ({tool}) on {created}:
the dataset {dataset}, snapshot @{snapshot} (guid {guid}), as `zfs send {flags}`
compressed with zstd. It needs only cat, zstd, sha256sum and zfs to restore; vacate
is not required. It restores the whole dataset on any ZFS (zfs-fuse 0.7 or later,
OpenZFS): names, contents, modes, owners, holes{props}.

Contents
  {name}.zfs.zst.NNNNNN  the stream compressed with zstd, cut into parts at byte
                         boundaries: `cat` of all parts in order is one zstd stream.
  SHA256SUMS             sha256 of each part.
  ZFS-TREE.jsonl         the snapshot's tree, one JSON array a line: path, type, size,
                         mode, uid, gid, mtime_ns, links, symlink target, inode
                         (what `vacate verify` compares a received tree's file list
                         with; what the files hold it compares from the streams).
  ZFS-MANIFEST.json      the dataset, snapshot (guid, createtxg, creation), the stream's
                         toguid, the send flags, the parts, the tree file's sha256 and
                         digest, and the receive command.

Check the parts (run in this directory):
  sha256sum -c SHA256SUMS

Restore as a new dataset POOL/NAME (it must not exist yet):
  cat {name}.zfs.zst.* | zstd -dc | zfs receive POOL/NAME

The received snapshot is POOL/NAME@{snapshot}, with the same guid ({guid}).
Parts: {parts}; stream {stream_bytes} bytes, archive {archive_bytes} bytes.
"""


def readme(m: NativeManifest) -> bytes:
    props = (", and the properties set on the dataset" if "-p" in m.send_flags or
             "-R" in m.send_flags else "")
    return README_TEXT.format(
        tool=m.tool, created=m.created, dataset=m.dataset, snapshot=m.snapshot, guid=m.guid,
        flags=" ".join([*m.send_flags, m.origin]), props=props, name=m.name,
        parts=len(m.parts), stream_bytes=m.stream_bytes,
        archive_bytes=m.archive_bytes).encode()
