"""What an archive being written keeps on its target, under ``.vacate-partial/``, and how
the finished archive's manifest and checksums are made from it.

``state.json`` holds the sources, name, exclusions and start time. Each committed part has a
sidecar, ``part-N.json``: its first line is the part (name, sha256, sizes, entry count) and
the hardlinked inodes whose first name it holds; every other line is one of the part's
manifest lines, in order. The sidecars are where the manifest waits while the archive is
written, not memory: a part's lines go to a local temp file as its members are written
(:class:`Spool`) and into the sidecar when the part is committed; at the end
:func:`complete` streams the sidecars, in part order, into ``MANIFEST.jsonl`` and
``SHA256SUMS``; a rerun learns what is done by streaming them into a temporary sqlite3 set
(:class:`Done`). So the writer holds, per entry, nothing once the entry is written (the
directories, held until the final part, and the hardlinked inodes excepted).
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile

from vacate.archive import manifest as mf
from vacate.archive.reader import lines
from vacate.archive.sums import line as sums_line
from vacate.archive.target import Target
from vacate.observing.errors import UsageError

STATE = f"{mf.STATE_DIR}/state.json"
COPY = 1 << 20          # bytes copied, or gathered for a sink, at a time
DONE_CACHE_KIB = 8 << 10


def side_name(part: str) -> str:
    return f"{mf.STATE_DIR}/{part}.json"


class Spool:
    """A part's manifest lines and its ``SHA256SUMS`` lines, in temp files under ``$TMPDIR``
    until the part commits."""

    def __init__(self):
        self.lines = tempfile.TemporaryFile()  # noqa: SIM115 (closed once the part commits)
        self.sums = tempfile.TemporaryFile()   # noqa: SIM115
        self.count = self.line_bytes = self.files = self.file_bytes = 0

    def add(self, e: mf.Entry) -> None:
        b = mf.entry_line(e).encode("ascii") + b"\n"
        self.lines.write(b)
        self.line_bytes += len(b)
        self.count += 1
        if e.type == "file":
            self.files += 1
            self.file_bytes += e.size
        if e.type in ("file", "hardlink") and e.sha256:
            self.sums.write(sums_line(e.sha256, e.path))

    def close(self) -> None:
        self.lines.close()
        self.sums.close()


def store(target: Target, info: mf.PartInfo, inodes: dict, spool: Spool) -> None:
    """Write the sidecar of the finished part ``info`` (committed: the part itself is
    committed after it): its first line, the part's ``line_bytes`` of manifest lines, then
    its ``SHA256SUMS`` lines."""
    sink = target.create(side_name(info.name))
    try:
        sink.write(json.dumps({"part": info.as_json(), "inodes": inodes,
                               "line_bytes": spool.line_bytes, "files": spool.files,
                               "file_bytes": spool.file_bytes},
                              ensure_ascii=True).encode("ascii") + b"\n")
        for f in (spool.lines, spool.sums):
            f.flush()
            f.seek(0)
            _copy(f, sink.write)
        sink.commit()
    except BaseException:
        sink.abort()
        raise


def _copy(f, write, n: int | None = None) -> None:
    """``n`` bytes of ``f`` (all that is left, with None) to ``write``."""
    while n is None or n > 0:
        b = f.read(COPY if n is None else min(COPY, n))
        if not b:
            if n:
                raise ValueError(f"{f.name}: {n} bytes short")
            return
        write(b)
        if n is not None:
            n -= len(b)


def _head(f) -> dict:
    """A sidecar's first line. One written by an earlier vacate holds the part's entries
    (``entries``: the manifest's objects), with no newline, and nothing after it."""
    return json.loads(f.readline())


class Done:
    """The archive paths that committed parts hold, in a private temporary sqlite3 database
    (on disk, removed when closed): looked up for each path a rerun walks."""

    def __init__(self):
        self.db = sqlite3.connect("", isolation_level=None)
        self.db.execute(f"PRAGMA cache_size = -{DONE_CACHE_KIB}")
        self.db.execute("CREATE TABLE d (path BLOB PRIMARY KEY) WITHOUT ROWID")

    def add(self, paths) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT OR IGNORE INTO d VALUES (?)", ((p,) for p in paths))
        self.db.execute("COMMIT")

    def __contains__(self, path: bytes) -> bool:
        return self.db.execute("SELECT 1 FROM d WHERE path = ?", (path,)).fetchone() is not None

    def close(self) -> None:
        self.db.close()


def load(target: Target, sources: list[str], exclude: list[str]):
    """The committed parts of an interrupted run with the same name: ``(parts, inodes,
    done)`` (``done``: a :class:`Done`, the caller's to close), or None where no run was
    started. What lies beyond the committed parts (debris of the part being written) is
    removed."""
    try:
        state = json.loads(target.get(STATE))
    except (FileNotFoundError, KeyError):
        return None
    if state["sources"] != sources:
        raise UsageError(
            f"{target.location} holds an unfinished archive of other sources "
            f"({', '.join(state['sources'])})",
            hint="use another --name, or the same sources to resume it")
    if state.get("exclude", []) != exclude:
        raise UsageError(
            f"{target.location} holds an unfinished archive made with other exclusions "
            f"({', '.join(state.get('exclude', [])) or 'none'})",
            hint="use another --name, or the same --exclude options to resume it")
    files = target.list()
    sides = target.list(mf.STATE_DIR)
    parts: list[mf.PartInfo] = []
    inodes: dict[tuple[int, int], tuple[bytes, int, str]] = {}
    done = Done()
    try:
        while side_name(mf.part_name(len(parts) + 1)) in sides:
            with target.open(side_name(mf.part_name(len(parts) + 1))) as f:
                head = _head(f)
                info = mf.PartInfo.from_json(head["part"])
                if files.get(info.name) != info.bytes:
                    break        # the sidecar was stored but the part never committed
                done.add(_paths(f, head, info.entries))
            parts.append(info)
            for k, (p, g, sha) in head["inodes"].items():
                dev, ino = map(int, k.split(":"))
                inodes[(dev, ino)] = (os.fsencode(p), g, sha)
    except BaseException:
        done.close()
        raise
    for name in sides:
        if name.endswith(".json") and name != STATE:
            k = int(name.rsplit("part-", 1)[1].split(".")[0])
            if k > len(parts):
                target.delete(name)
    for name in files:
        if name.startswith("part-") and name.endswith(".tar.zst") \
                and int(name[5:11]) > len(parts):
            target.delete(name)
    return parts, inodes, done


def _paths(f, head: dict, count: int):
    """The archive paths of the sidecar ``f``'s manifest lines (read after ``head``)."""
    if "entries" in head:
        for d in head["entries"]:
            yield os.fsencode(d["path"])
        return
    for n, raw in lines(f, mf.MAX_ENTRY_LINE):
        if n > count:
            return
        yield os.fsencode(json.loads(raw)["path"])


def drop(target: Target) -> None:
    """Remove the state (the archive is complete, or nothing of it is worth keeping);
    ``state.json`` last, so that a run killed in between finds it and finishes the job."""
    for k in sorted(target.list(mf.STATE_DIR), key=lambda k: k == STATE):
        target.delete(k)
    if hasattr(target, "remove_dir"):
        target.remove_dir(mf.STATE_DIR)


class _Out:
    """A sink written ``COPY`` bytes at a time."""

    def __init__(self, target: Target, name: str):
        self.sink = target.create(name)
        self.held: list[bytes] = []
        self.n = self.total = 0
        self.committed = False

    def write(self, b: bytes) -> None:
        self.held.append(b)
        self.n += len(b)
        self.total += len(b)
        if self.n >= COPY:
            self.flush()

    def flush(self) -> None:
        if self.held:
            self.sink.write(b"".join(self.held))
        self.held, self.n = [], 0

    def commit(self) -> None:
        self.flush()
        self.sink.commit()
        self.committed = True

    def abort(self) -> None:
        if not self.committed:
            self.sink.abort()


def complete(target: Target, head: mf.Manifest, readme) -> tuple[int, int, int]:
    """Write ``SHA256SUMS``, ``PARTS.SHA256SUMS``, the README (``readme(sums_written)``: its
    bytes) and, last, ``MANIFEST.jsonl`` (its presence marks the archive complete), copied
    from the committed parts' sidecars. Returns (entries, files, bytes of the files)."""
    count = sum(p.entries for p in head.parts)
    man, sums = _Out(target, mf.MANIFEST), None
    files = size = 0
    try:
        sums = _Out(target, mf.SUMS)
        man.write(json.dumps(head.header_json(count), ensure_ascii=True).encode("ascii")
                  + b"\n")
        for p in head.parts:
            with target.open(side_name(p.name)) as f:
                side = _head(f)
                if "entries" in side:
                    n, b = _of_objects(side["entries"], man, sums)
                else:
                    _copy(f, man.write, side["line_bytes"])
                    _copy(f, sums.write)
                    n, b = side["files"], side["file_bytes"]
            files += n
            size += b
        any_sums = sums.total > 0
        sums.commit()
        target.put(mf.PART_SUMS, mf.part_sums_file(head.parts))
        target.put(mf.README, readme(any_sums))
        man.commit()
    except BaseException:
        man.abort()
        if sums is not None:
            sums.abort()
        raise
    return count, files, size


def _of_objects(entries: list, man: _Out, sums: _Out) -> tuple[int, int]:
    """The manifest and SHA256SUMS lines of a part whose entries are the manifest's objects
    (a sidecar of an earlier vacate); returns its (files, bytes of the files)."""
    files = size = 0
    for d in entries:
        man.write(json.dumps(d, ensure_ascii=True).encode("ascii") + b"\n")
        if d["type"] == "file":
            files += 1
            size += d["size"]
        if d["type"] in ("file", "hardlink") and d.get("sha256"):
            sums.write(sums_line(d["sha256"], os.fsencode(d["path"])))
    return files, size
