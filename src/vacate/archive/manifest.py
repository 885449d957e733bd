"""The archive's manifest: one JSON line per entry (``MANIFEST.jsonl``).

The first line is the header (schema, name, sources, parts with their sha256); every other
line is one entry: path, type, size, mode, owner, mtime, link target, hardlink group, sha256
and the part that holds it. Paths are bytes, written as ``surrogateescape`` strings (see
README "JSON and file names"): ``os.fsencode(entry["path"])`` gives the exact bytes back.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

SCHEMA = "vacate.archive-manifest/1"
MANIFEST = "MANIFEST.jsonl"
SUMS = "SHA256SUMS"
PART_SUMS = "PARTS.SHA256SUMS"
README = "README"
STATE_DIR = ".vacate-partial"


def part_name(n: int) -> str:
    return f"part-{n:06d}.tar.zst"


def _s(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


@dataclass(frozen=True, slots=True)
class Entry:
    """One member of an archive as the manifest lists it."""
    path: bytes
    type: str
    part: str
    size: int = 0
    mode: int = 0
    uid: int = 0
    gid: int = 0
    user: str = ""
    group: str = ""
    mtime_ns: int = 0
    link: bytes | None = None
    hardlink_group: int | None = None
    sha256: str | None = None
    sparse: bool = False
    rdev: tuple[int, int] | None = None
    changed: bool = False      # the source changed while it was read
    ctime_ns: int | None = None  # the source's ctime when archived (a rerun's "up to date")

    def as_json(self) -> dict:
        d = {"path": _s(self.path), "type": self.type, "size": self.size,
             "mode": f"{self.mode & 0o7777:04o}", "uid": self.uid, "gid": self.gid,
             "user": self.user, "group": self.group, "mtime_ns": self.mtime_ns,
             "part": self.part}
        if self.link is not None:
            d["link"] = _s(self.link)
        if self.hardlink_group is not None:
            d["hardlink_group"] = self.hardlink_group
        if self.sha256 is not None:
            d["sha256"] = self.sha256
        if self.sparse:
            d["sparse"] = True
        if self.rdev is not None:
            d["rdev"] = list(self.rdev)
        if self.changed:
            d["changed_while_read"] = True
        if self.ctime_ns is not None:
            d["ctime_ns"] = self.ctime_ns
        return d

    @classmethod
    def from_json(cls, d: dict) -> Entry:
        return cls(
            path=os.fsencode(d["path"]), type=d["type"], part=d["part"], size=d.get("size", 0),
            mode=int(d.get("mode", "0"), 8), uid=d.get("uid", 0), gid=d.get("gid", 0),
            user=d.get("user", ""), group=d.get("group", ""), mtime_ns=d.get("mtime_ns", 0),
            link=os.fsencode(d["link"]) if "link" in d else None,
            hardlink_group=d.get("hardlink_group"), sha256=d.get("sha256"),
            sparse=d.get("sparse", False),
            rdev=tuple(d["rdev"]) if "rdev" in d else None,
            changed=d.get("changed_while_read", False), ctime_ns=d.get("ctime_ns"),
        )


@dataclass(frozen=True, slots=True)
class PartInfo:
    """One part file of an archive: its name, checksum and size."""
    name: str
    sha256: str
    bytes: int
    tar_bytes: int
    entries: int

    def as_json(self) -> dict:
        return {"name": self.name, "sha256": self.sha256, "bytes": self.bytes,
                "tar_bytes": self.tar_bytes, "entries": self.entries}

    @classmethod
    def from_json(cls, d: dict) -> PartInfo:
        return cls(d["name"], d["sha256"], d["bytes"], d["tar_bytes"], d["entries"])


@dataclass(frozen=True, slots=True)
class Manifest:
    """An archive's manifest: its sources, parts and entries."""
    name: str
    created: str
    sources: tuple[str, ...]
    parts: tuple[PartInfo, ...]
    entries: tuple[Entry, ...]
    tool: str = "vacate"
    extra: dict = field(default_factory=dict)

    def header_json(self) -> dict:
        return {"schema": SCHEMA, "name": self.name, "created": self.created,
                "tool": self.tool, "sources": list(self.sources),
                "parts": [p.as_json() for p in self.parts], "entries": len(self.entries),
                **self.extra}

    def dumps(self, lines: list[str] | None = None) -> bytes:
        """``lines``: ``entry_lines(self.entries)``, where the caller made them already."""
        if lines is None:
            lines = entry_lines(self.entries)
        if len(lines) != len(self.entries):
            raise ValueError(f"{len(lines)} manifest lines for {len(self.entries)} entries")
        return ("\n".join([json.dumps(self.header_json(), ensure_ascii=True), *lines])
                + "\n").encode("ascii")

    def part(self, name: str) -> PartInfo | None:
        return next((p for p in self.parts if p.name == name), None)


def entry_lines(entries) -> list[str]:
    """The manifest's line for each entry."""
    return [json.dumps(e.as_json(), ensure_ascii=True) for e in entries]


def loads(data: bytes) -> Manifest:
    """Parse ``MANIFEST.jsonl``; raises ValueError on anything malformed."""
    lines = data.decode("ascii").splitlines()
    if not lines:
        raise ValueError("empty manifest")
    head = json.loads(lines[0])
    if head.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} manifest (schema {head.get('schema')!r})")
    entries = tuple(Entry.from_json(json.loads(x)) for x in lines[1:] if x)
    if head.get("entries") != len(entries):
        raise ValueError(f"manifest lists {len(entries)} entries, header says "
                         f"{head.get('entries')}")
    known = {"schema", "name", "created", "tool", "sources", "parts", "entries"}
    return Manifest(head["name"], head["created"], tuple(head["sources"]),
                    tuple(PartInfo.from_json(p) for p in head["parts"]), entries,
                    head.get("tool", ""), {k: v for k, v in head.items() if k not in known})


def excluded(m: Manifest) -> frozenset[bytes]:
    """The archive paths the writer was told to leave out (``--exclude``; the archive itself
    when written inside its source): a comparison with the sources leaves them out too."""
    return frozenset(os.fsencode(p) for p in m.extra.get("excluded", ()))


def sums_file(entries) -> bytes:
    """``SHA256SUMS``: every regular file (hardlinks too) by its path inside the extraction."""
    from vacate.archive.sums import line
    return b"".join(line(e.sha256, e.path) for e in entries
                    if e.type in ("file", "hardlink") and e.sha256)


def part_sums_file(parts) -> bytes:
    from vacate.archive.sums import line
    return b"".join(line(p.sha256, p.name.encode()) for p in parts)


README_TEXT = """\
This directory is a cold backup written by vacate ({tool}) on {created}.
It needs only zstd, tar and sha256sum to restore; vacate is not required.

Contents
  part-NNNNNN.tar.zst  independent POSIX (pax) tar streams compressed with zstd, in order.
                       A damaged part loses only the files it holds.
  PARTS.SHA256SUMS     sha256 of each part file.
  SHA256SUMS           sha256 of every regular file, by its path inside the restore dir.
  MANIFEST.jsonl       one JSON line per entry (path, type, size, mode, owner, mtime,
                       link target, hardlink group, sha256, part); the first line
                       describes the archive.

Check the parts (run in this directory):
  sha256sum -c PARTS.SHA256SUMS

Restore everything (as root to keep owners), then check every file:
  mkdir -p OUT
  for p in *.tar.zst; do zstd -dc "$p" | tar -xpf - -C OUT; done
  (cd OUT && sha256sum -c "$OLDPWD/SHA256SUMS")

Notes
  - Directories (with their modes, owners and mtimes) are stored in the last part, so that
    later parts do not disturb them; restore all parts in order.
  - Sparse files are stored in the GNU pax sparse format 1.0; GNU tar recreates the holes.
  - A file larger than the part size is stored whole in one part.
  - A hardlink member may point at a file stored in an earlier part.
  - MANIFEST.jsonl's first line lists what is not here: "excluded" (left out as asked),
    "notes" (sockets, which tar cannot hold; mounts below a source) and "left_out"
    (vanished or unreadable while archived).
  - Sources: {sources}
"""
