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

from vacate.observing.compat import SLOTS

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


@dataclass(frozen=True, **SLOTS)
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
        """An entry from its manifest line; raises :class:`Damaged` naming the first field
        of a wrong type or out of range (the manifest is read from a place anyone may have
        written to)."""
        if not isinstance(d, dict):
            raise Damaged(f"an entry is a JSON {_jtype(d)}, not an object")
        kind = _get(d, "type", str)
        if kind not in TYPES:
            raise Damaged(f"unknown entry type {shown(kind)!r}")
        path = _path(d, "path")
        link = _path(d, "link") if "link" in d or kind in ("symlink", "hardlink") else None
        rdev = None
        if "rdev" in d or kind in ("char", "block"):
            rdev = d.get("rdev")
            if not (isinstance(rdev, list) and len(rdev) == 2
                    and all(_is_int(x) and 0 <= x < 1 << 32 for x in rdev)):
                raise Damaged("'rdev' must be [major, minor], two device numbers")
            rdev = (rdev[0], rdev[1])
        sha = d.get("sha256")
        if sha is not None and not _is_sha(sha):
            raise Damaged("'sha256' is not a sha256 (64 lowercase hex digits)")
        hgroup = d.get("hardlink_group")
        if hgroup is not None and not (_is_int(hgroup) and hgroup >= 0):
            raise Damaged("'hardlink_group' must be a count")
        g = d.get
        size, uid, gid, mtime = g("size", 0), g("uid", 0), g("gid", 0), g("mtime_ns", 0)
        part, user, group = g("part"), g("user", ""), g("group", "")
        if not (type(size) is int and type(uid) is int and type(gid) is int
                and type(mtime) is int and type(part) is str and type(user) is str
                and type(group) is str and 0 <= size < _I63 and 0 <= uid < _U32
                and 0 <= gid < _U32 and -_I63 <= mtime < _I63):
            _get(d, "part", str)                      # the slow way names what is wrong
            _int(d, "size", 0, _I63)
            _int(d, "uid", 0, _U32)
            _int(d, "gid", 0, _U32)
            _int(d, "mtime_ns", -_I63, _I63)
            _get(d, "user", str, "")
            _get(d, "group", str, "")
        return cls(
            path=path, type=kind, part=part, size=size, mode=_mode(d), uid=uid, gid=gid,
            user=user, group=group, mtime_ns=mtime, link=link, hardlink_group=hgroup,
            sha256=sha, sparse=_get(d, "sparse", bool, False), rdev=rdev,
            changed=_get(d, "changed_while_read", bool, False),
            ctime_ns=None if g("ctime_ns") is None else _int(d, "ctime_ns", -_I63, _I63),
        )


@dataclass(frozen=True, **SLOTS)
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
        """A part from the manifest's header; its name must be a plain file name inside the
        archive (the archive names what is opened: never ``/etc/shadow`` or ``../x``)."""
        if not isinstance(d, dict):
            raise Damaged(f"a part is a JSON {_jtype(d)}, not an object")
        name = _get(d, "name", str)
        why = bad_part_name(name)
        if why:
            raise Damaged(f"part name {shown(name)!r}: {why}")
        sha = _get(d, "sha256", str)
        if not _is_sha(sha):
            raise Damaged(f"part {name}: 'sha256' is not a sha256: {shown(sha)!r}")
        return cls(name, sha, _int(d, "bytes", 0, _I63, None),
                   _int(d, "tar_bytes", 0, _I63, None), _int(d, "entries", 0, _I63, None))


@dataclass(frozen=True, **SLOTS)
class Manifest:
    """An archive's manifest: its sources, parts and entries."""
    name: str
    created: str
    sources: tuple[str, ...]
    parts: tuple[PartInfo, ...]
    entries: tuple[Entry, ...]
    tool: str = "vacate"
    extra: dict = field(default_factory=dict)

    def header_json(self, count: int | None = None) -> dict:
        """The first line; ``count``: the entries that follow, where they are not in
        ``entries`` (a manifest streamed from elsewhere)."""
        return {"schema": SCHEMA, "name": self.name, "created": self.created,
                "tool": self.tool, "sources": list(self.sources),
                "parts": [p.as_json() for p in self.parts],
                "entries": len(self.entries) if count is None else count, **self.extra}

    def dumps(self) -> bytes:
        return ("\n".join([json.dumps(self.header_json(), ensure_ascii=True),
                           *entry_lines(self.entries)]) + "\n").encode("ascii")

    def part(self, name: str) -> PartInfo | None:
        return next((p for p in self.parts if p.name == name), None)


def entry_line(e: Entry) -> str:
    """The manifest's line of ``e`` (without its newline)."""
    return json.dumps(e.as_json(), ensure_ascii=True)


def entry_lines(entries) -> list[str]:
    """The manifest's line for each entry."""
    return [entry_line(e) for e in entries]


def parse_header(raw: bytes | int) -> tuple[Manifest, int]:
    """The manifest's first line, checked: the archive without its entries, and how many
    entries the header says follow. Raises :class:`Damaged` naming what is wrong."""
    if not raw:
        raise Damaged("empty manifest")
    head = _line(raw, 1, MAX_HEADER_LINE)
    if not isinstance(head, dict):
        raise Damaged(f"line 1 (the header) is a JSON {_jtype(head)}, not an object")
    if head.get("schema") != SCHEMA:
        schema = head.get("schema")
        raise Damaged(f"not a {SCHEMA} manifest (schema "
                      f"{shown(schema) if isinstance(schema, str) else _jtype(schema)})")
    try:
        name = _text(head, "name")
        created = _text(head, "created")
        tool = _text(head, "tool", "")
        sources = _get(head, "sources", list)
        if not all(isinstance(x, str) and len(x) <= MAX_PATH for x in sources):
            raise Damaged("'sources' must be a list of paths")
        for i, _ in enumerate(_get(head, "excluded", list, [])):
            try:
                _path(head["excluded"], i)
            except Damaged as e:
                raise Damaged(f"'excluded', item {i + 1}: {e}") from None
        count = _int(head, "entries", 0, _I63, None)
        parts = []
        for i, p in enumerate(_get(head, "parts", list), 1):
            try:
                parts.append(PartInfo.from_json(p))
            except Damaged as e:
                raise Damaged(f"part {i}: {e}") from None
    except Damaged as e:
        raise Damaged(f"line 1 (the header): {e}") from None
    names = set()
    for p in parts:
        if p.name in names:
            raise Damaged(f"line 1 (the header): part {p.name} is listed twice")
        names.add(p.name)
    known = {"schema", "name", "created", "tool", "sources", "parts", "entries"}
    return Manifest(name, created, tuple(sources), tuple(parts), (), tool,
                    {k: v for k, v in head.items() if k not in known}), count


def parse_entry(raw: bytes | int, n: int, parts: frozenset[str]) -> Entry:
    """Line ``n`` (an entry), checked alone: its fields, a safe path, a part the header
    lists (``parts``), a file's sha256. Raises :class:`Damaged` naming the line."""
    d = _line(raw, n, MAX_ENTRY_LINE)
    try:
        e = Entry.from_json(d)
    except Damaged as err:
        where = f" ({shown(d['path'])})" if isinstance(d, dict) and isinstance(
            d.get("path"), str) else ""
        raise Damaged(f"line {n}{where}: {err}") from None
    why = unsafe(e.path)
    if why:
        raise Damaged(f"line {n}: unsafe path {shown(e.path)!r} ({why})")
    if e.part not in parts:
        raise Damaged(f"line {n} ({shown(e.path)}): in part {shown(e.part)!r}, which the "
                      "header does not list")
    if e.type == "file" and e.sha256 is None:
        raise Damaged(f"line {n} ({shown(e.path)}): a file without its sha256")
    return e


# ---- checking what is read --------------------------------------------------------------

TYPES = frozenset(("file", "hardlink", "symlink", "dir", "fifo", "char", "block"))
# Bounds on what is parsed. A link target is at most PATH_MAX (4096); a path can be longer
# only for directories deeper than that (the writer walks fd-relative but opens files by
# path): 32 KiB is eight times PATH_MAX. An entry line is then at most ~220 KiB (every byte
# escaped as \udcNN). The header grows with the parts (~170 bytes each).
MAX_PATH = 32 << 10
MAX_ENTRY_LINE = 256 << 10
MAX_HEADER_LINE = 64 << 20
MAX_MANIFEST = 4 << 30     # ~13 million entries (streamed, never held whole)
_I63 = 1 << 63
_U32 = 1 << 32
_MISSING = object()
_JSON = json.JSONDecoder()
_WORDS = {str: "a string", int: "an integer", bool: "true or false", list: "a list",
          dict: "an object"}


class Damaged(ValueError):
    """The archive is not as vacate wrote it: what is wrong, and where."""


def shown(text: bytes | str, limit: int = 160) -> str:
    """``text`` for a message: at most ``limit`` characters (a cut is marked with how much
    was left out), control characters and undecodable bytes escaped (``\\n``, ``\\xff``),
    so that a hostile name can neither flood nor drive a terminal."""
    n = len(text)
    head = text[:limit]
    if isinstance(head, bytes):
        head = head.decode("utf-8", "surrogateescape")
    out = "".join(c if c.isprintable() else _escape(c) for c in head)
    if n > limit:
        out += f"...[{n - limit:,} more {'bytes' if isinstance(text, bytes) else 'characters'}]"
    return out


def _escape(c: str) -> str:
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:
        return f"\\x{o - 0xDC00:02x}"
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or repr(c)[1:-1]


def unsafe(path: bytes) -> str | None:
    """Why ``path`` cannot be a path inside the restore directory (None: it can)."""
    if path.startswith(b"/"):
        return "absolute path"
    parts = path.split(b"/")
    if b".." in parts:
        return "path traversal (..)"
    if b"" in parts or b"." in parts or b"\0" in path:
        return "malformed path"
    return None


def bad_part_name(name: str) -> str | None:
    """Why ``name`` cannot be a part (None: it can): a part is a plain file name inside the
    archive's directory."""
    if not name or "/" in name or "\0" in name:
        return "not a plain file name"
    if name.startswith("."):
        return "a hidden name (., .. and the archive's own state are not parts)"
    if len(name.encode("utf-8", "surrogateescape")) > 255:
        return "longer than a file name can be"
    return None


def _jtype(v) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number",
            float: "number", type(None): "null"}.get(type(v), type(v).__name__)


def _line(raw: bytes | int, n: int, limit: int):
    """Line ``n`` as JSON; ``raw`` is its length where it was too long to be read."""
    size = raw if isinstance(raw, int) else len(raw)
    if size > limit:
        raise Damaged(f"line {n} is {size:,} bytes, longer than any line vacate writes "
                      f"({limit:,})")
    if not raw.isascii():
        raise Damaged(f"line {n} is not ASCII JSON")
    try:
        return _JSON.decode(raw.decode("ascii"))
    except RecursionError:
        raise Damaged(f"line {n} is not JSON: nested too deeply") from None
    except ValueError as e:
        raise Damaged(f"line {n} is not JSON: {shown(str(e))}") from None


def _get(d: dict, key: str, typ: type, default=_MISSING):
    if key not in d:
        if default is _MISSING:
            raise Damaged(f"{key!r} is missing")
        return default
    v = d[key]
    if type(v) is not typ:                  # exact: true is not an integer, 1 not a boolean
        raise Damaged(f"{key!r} must be {_WORDS[typ]}, not a JSON {_jtype(v)}")
    return v


def _is_int(v) -> bool:
    return type(v) is int


def _int(d: dict, key: str, lo: int, hi: int, default=0) -> int:
    v = _get(d, key, int, _MISSING if default is None else default)
    if not lo <= v < hi:
        raise Damaged(f"{key!r} is out of range ({shown(str(v), 40)})")
    return v


def _text(d: dict, key: str, default=_MISSING) -> str:
    v = _get(d, key, str, default)
    if len(v) > MAX_PATH:
        raise Damaged(f"{key!r} is {len(v):,} characters long")
    return v


_HEX = frozenset("0123456789abcdef")
_OCTAL = frozenset("01234567")


def _is_sha(v) -> bool:
    return isinstance(v, str) and len(v) == 64 and _HEX.issuperset(v)


def _mode(d: dict) -> int:
    v = _get(d, "mode", str, "0")
    if not (0 < len(v) <= 6 and _OCTAL.issuperset(v)) or int(v, 8) > 0o7777:
        raise Damaged(f"'mode' must be octal permission bits, not {shown(v, 40)!r}")
    return int(v, 8)


def _path(d: dict | list, key: str | int) -> bytes:
    v = d[key] if isinstance(d, list) else _get(d, key, str)
    if not isinstance(v, str):
        raise Damaged(f"{key!r} must be a path, not a JSON {_jtype(v)}")
    if len(v) > MAX_PATH:
        raise Damaged(f"{key!r} is {len(v):,} characters long (at most {MAX_PATH})")
    try:
        b = os.fsencode(v)
    except UnicodeError:
        raise Damaged(f"{key!r} holds characters that are not file name bytes") from None
    if not b or b"\0" in b or len(b) > MAX_PATH:
        raise Damaged(f"{key!r} is not a file name (empty, too long or holding NUL)")
    return b


def excluded(m) -> frozenset[bytes]:
    """The archive paths the writer was told to leave out (``--exclude``; the archive itself
    when written inside its source): a comparison with the sources leaves them out too."""
    return frozenset(os.fsencode(p) for p in m.extra.get("excluded", ()))


CHECK_FILES = '  (cd OUT && sha256sum -c "$OLDPWD/SHA256SUMS")'
CHECK_NO_FILES = ("  # no regular file is in this archive (SHA256SUMS is empty, and sha256sum -c\n"
                  "  # of an empty list fails): the parts' check above is the whole check")


def readme_check(sums: bytes | bool) -> str:
    """The README's line that checks the restored files: none where there are none
    (``sums``: SHA256SUMS, or whether it lists any)."""
    return CHECK_FILES if sums else CHECK_NO_FILES


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
{check}

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
