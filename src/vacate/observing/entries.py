"""What a ``delete`` item held when the plan was made: every entry below it, recorded so that
apply deletes only those, and only while they are still what was recorded.

The walk never follows a symlink and never leaves the item's mount: every directory is opened
relative to its parent's fd (``O_NOFOLLOW | O_DIRECTORY``) and its mount id is compared with
the item's (:func:`vacate.observing.fsio.mount_id`, so a bind of the same filesystem counts as a mount
too). A directory on the same mount with another ``st_dev`` is a btrfs subvolume of the same
filesystem: recorded as ``subvolume`` and walked, as part of the item. A mount point below
the item is recorded as ``mountpoint`` with the inode of the directory it covers (the parent's
``d_ino``) and not entered: what is on that mount is not the item's.

How much is kept, and where (an item of millions of files is what people retire):

- The plan holds, per item, a few numbers: its totals and its digest (``Identity``) and, for
  an item to delete, the name, sha256, size and index offset of its *entries file*
  (:meth:`Recorded.reference`). Nothing in the plan grows with the item, so the file a
  person reviews stays readable.
- The entries file, beside the plan and named by its sha256
  (``vacate-entries-SHA256.jsonl.gz``), holds every entry: a run of gzip members, a header
  line, then one member per directory holding its line ``[rel, [row, ...]]`` (rows sorted by
  name), then the index: per directory its path, offset, length, entry count and the sha256
  of its line. ``zcat`` shows it as JSON lines. ~20 bytes an entry on disk.
- The item's digest is taken over one digest per directory (:func:`item_digest`, a
  two-level Merkle record): the staleness check re-records the item keeping only those
  (:func:`record_item` without a file), so it, plan and apply hold memory in proportion to
  the item's directories (a path, an offset and 32 bytes each) plus the widest directory,
  never its entries.
- Apply opens the file (:class:`EntriesFile`: the whole file's sha256 against the plan's,
  then the index against the digest the plan holds) and, just before it empties a
  directory, reads that directory's member, checks it against the index's digest and
  compares every entry found there with its row: the safety rule is applied entry by entry
  as before, from rows read directory by directory.

Why rows and not only a digest per directory: a directory whose digest no longer matches
(one file written or touched in it since the plan) would then have to be kept whole, and
everything in it left and named; with the rows, a changed directory costs what any other
does (its member read once, ~1 us an entry): only what changed in it is kept and named,
the rest of it deleted, exactly as when the record was in memory. The file adds a
sequential read of ~20 MB per million entries at apply (its sha256) and a gzip member per
directory when planning.

What recording costs (1M entries, 62,797 directories, cache warm): a walk of the item, an
``fstatat`` an entry (~1.4 s of system time, what ``find -printf %s`` pays) plus ~10 system
calls a directory, and ~1 s of CPU to compress ~95 MB of lines into a member a directory.
Where ``_fastwalk`` was built the walk runs in C (``collectors/_record.c``: this module's
walk, listing and enter, line for line, each directory's line encoded there; the tests
record trees both ways and compare the files byte for byte); here, ~2.5 us of Python an
entry. The members are compressed and written by a thread beside the walk
(:class:`EntriesStream`). ``plan`` pays no second walk for the items named by ``--delete``: the
observation's own walk records them (:mod:`vacate.observing.entries_fused`, the same file
but for the order of its members), and this walk runs only for what that one could not
record for certain -- and at apply, to check that nothing changed.

Standard library only (it runs where the plan is made, like the collectors).
"""

from __future__ import annotations

import errno
import fcntl
import gc
import hashlib
import json
import os
import posixpath
import queue
import stat
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import BinaryIO

from vacate.observing.collectors import walk_descent
from vacate.observing.collectors.mounts import read_mounts
from vacate.observing.compat import SLOTS
from vacate.observing.errors import NotFound, VacateError
from vacate.observing.fsio import (
    TMP_PREFIX,
    commit_temp,
    mount_id,
    open_noatime,
    remove_quietly,
)
from vacate.observing.host import Host
from vacate.observing.model.common import Problem

SCHEMA = "vacate.entries/1"              # an EntryList as one JSON document
FILE_SCHEMA = "vacate.entries-file/1"    # an entries file (gzip members, see above)
DIGEST_TAG = "vacate.entries-digest/2"   # the first line an item's digest is taken over
LEVEL = 1              # zlib level of an entries file: 5x smaller than its JSON, ~200 MB/s
DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_BTRFS_IOC_SUBVOL_GETFLAGS = 0x80089419     # _IOR(0x94, 25, __u64)
_BTRFS_SUBVOL_RDONLY = 1 << 1

# a row: (name, kind, st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns, st_nlink)
NAME, KIND, DEV, INO, SIZE, MTIME, CTIME, NLINK = range(8)
KIND_OF_MODE = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink",
                stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket", stat.S_IFCHR: "chardev",
                stat.S_IFBLK: "blockdev"}
# directories: a subvolume is one with another st_dev on the same mount; a mountpoint one
# with another mount on it (recorded with the covered directory's inode, times unknown)
DIR_KINDS = frozenset({"dir", "subvolume", "mountpoint"})
KINDS = frozenset(KIND_OF_MODE.values()) | DIR_KINDS | {"other"}


class Refused(VacateError):
    """A path vacate will not record or delete: ``/``, the target itself, something outside
    the target, reached through a symlink or across a mount, or not on the planned
    filesystem."""


def kind_of(st: os.stat_result) -> str:
    return KIND_OF_MODE.get(stat.S_IFMT(st.st_mode), "other")


def row_of(name: str, kind: str, st: os.stat_result) -> tuple:
    return (name, kind, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
            st.st_nlink)


def join(rel: str, name: str) -> str:
    """The path of ``name`` in the directory ``rel`` (relative to the item; "" is the item)."""
    return rel + "/" + name if rel else name


def normal_path(path: str) -> str:
    """``path`` as an absolute path without ``.``, ``..``, doubled or trailing slashes;
    Refused when it is relative or has a ``..``."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise Refused(f"{path!r}: not an absolute path")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"{path}: has a '..' component")
    return "/" + "/".join(parts)


def open_dir(name: str, dir_fd: int | None = None) -> int:
    """Open a directory for listing, never through a symlink, without touching its atime."""
    return open_noatime(name, DIR_OPEN, dir_fd=dir_fd)


def read_only_subvolume(fd: int) -> bool:
    """The open directory ``fd`` is the root of a read-only btrfs subvolume (a snapshot
    taken with ``-r``). False on other filesystems."""
    buf = bytearray(8)
    try:
        fcntl.ioctl(fd, _BTRFS_IOC_SUBVOL_GETFLAGS, buf)
    except OSError:
        return False
    return bool(int.from_bytes(buf, "little") & _BTRFS_SUBVOL_RDONLY)


@dataclass(frozen=True, **SLOTS)
class Entry:
    """One recorded entry: its path relative to the item ("" for the item itself)."""

    path: str
    kind: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    nlink: int


@dataclass(frozen=True, **SLOTS)
class EntryList:
    """Every entry of one item as recorded: ``root`` is the item's own row (name ""),
    ``dirs`` each recorded directory's path relative to the item ("" the item) with its
    entries' rows, sorted by name; the directories sorted by path. A directory that could not
    be listed has no ``dirs`` row (and a Problem): nothing in it is recorded, so nothing in
    it is deleted. Rows are plain tuples (see ``NAME`` ... ``NLINK``): an item of a million
    files is a million of them."""

    item: str
    dev: int
    root: tuple
    dirs: tuple[tuple[str, tuple[tuple, ...]], ...]
    problems: tuple[Problem, ...] = ()

    def __len__(self) -> int:
        return 1 + sum(len(rows) for _, rows in self.dirs)

    def entries(self) -> Iterator[Entry]:
        """Each recorded entry, the item first, then directory by directory."""
        yield Entry("", *self.root[1:])
        for rel, rows in self.dirs:
            for r in rows:
                yield Entry(join(rel, r[NAME]), *r[1:])

    def digest(self) -> str:
        """The item's digest (see :func:`item_digest`): the same as :func:`record_item`
        gives for the same entries."""
        return item_digest(self.item, self.dev, self.root,
                           ((rel, hashlib.sha256(dir_line(rel, rows)).digest())
                            for rel, rows in self.dirs))

    def to_json(self) -> dict:
        """A JSON value (dump it with ``ensure_ascii=True``, as ``vacate.output.jsonfmt``
        does, so that names which are not UTF-8 survive)."""
        return {"schema": SCHEMA, "item": self.item, "dev": self.dev, "root": list(self.root),
                "dirs": [[rel, [list(r) for r in rows]] for rel, rows in self.dirs],
                "problems": [p.as_json() for p in self.problems], "digest": self.digest()}

    as_json = to_json       # the name vacate.output.jsonfmt looks for

    @classmethod
    def from_json(cls, doc: dict) -> EntryList:
        """The list ``to_json`` wrote; ValueError when it is not one, or when its digest does
        not match its entries (a list edited by hand)."""
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document")
        try:
            dirs = tuple(sorted((str(rel), tuple(sorted(_row(r) for r in rows)))
                                for rel, rows in doc["dirs"]))
            out = cls(str(doc["item"]), _int(doc["dev"]), _row(doc["root"]), dirs,
                      tuple(Problem(p["code"], p["message"], p.get("path"),
                                    bool(p.get("blocks_verdict", False)))
                            for p in doc.get("problems", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed {SCHEMA} document: {e}") from None
        if "digest" in doc and doc["digest"] != out.digest():
            raise ValueError(f"{SCHEMA} document for {out.item}: the digest does not match "
                             "the entries")
        return out


_ENC = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode
encode_str = json.encoder.encode_basestring_ascii    # how _ENC writes a str


def dir_line(rel: str, rows) -> bytes:
    """One directory's line: ``[rel, [row, ...]]`` (rows sorted by name), compact ASCII
    JSON (names that are not UTF-8 as their ``\\udcXX`` escapes). Names hold neither NUL
    nor '/', so the encoding is unambiguous."""
    return _ENC([rel, rows]).encode("ascii") + b"\n"


def item_digest(item: str, dev: int, root, dirs: Iterable[tuple[str, bytes]]) -> str:
    """An item's digest: sha256 over a first line (``DIGEST_TAG``, the item, its device,
    its own row) and then, for each recorded directory in the order of their paths, a line
    of its path and the sha256 of its :func:`dir_line`. Any entry added, removed or changed
    changes its directory's digest and so this one; it is computed from one digest per
    directory, so whoever checks it holds those, never the entries."""
    h = hashlib.sha256()
    h.update(_ENC([DIGEST_TAG, item, dev, list(root)]).encode("ascii") + b"\n")
    up = h.update
    for rel, dg in dirs:     # _ENC([rel, dg.hex()]), written out (a line a directory)
        up(f'[{encode_str(rel)},"{dg.hex()}"]\n'.encode("ascii"))
    return h.hexdigest()


def _int(v) -> int:
    if type(v) is not int:
        raise ValueError(f"{v!r} is not an integer")
    return v


def _row(r) -> tuple:
    if not isinstance(r, list) or len(r) != 8 or not isinstance(r[0], str) or r[1] not in KINDS:
        raise ValueError(f"bad entry row {r!r}")
    return (r[0], r[1], *map(_int, r[2:]))


def _covered_ino(parent_fd: int, name: str) -> int:
    """The inode of the directory a mount at ``name`` covers: the parent's directory entry
    (``d_ino``), which stat cannot give while the mount is there."""
    with os.scandir(parent_fd) as it:
        for e in it:
            if e.name == name:
                return e.inode()
    return 0


class _Recorder:
    """The depth-first walk that records: one fd held per level (no path is opened by name,
    so paths longer than PATH_MAX work), each directory opened once."""

    def __init__(self, item: str, mnt: int, sink: Callable[[str, list], None],
                 line_sink: Callable[..., None] | None = None):
        self.item = item
        self.mnt = mnt
        self.sink = sink           # called with each directory's rel and rows, once listed
        self.line_sink = line_sink     # or, where the walk runs in C, with its line (EntriesStream.line)
        self.problems: list[Problem] = []

    def problem(self, code: str, rel: str, what: str | OSError) -> None:
        path = join(self.item, rel) if rel else self.item
        msg = what.strerror if isinstance(what, OSError) and what.strerror else str(what)
        self.problems.append(Problem(code, f"{path}: {msg}", path, True))

    def enter(self, parent_fd: int, name: str, rel: str, st: os.stat_result,
              d_ino: int | None, parent_dev: int) -> tuple[tuple, int | None]:
        """The directory ``name``'s row and its open fd; no fd where it is not walked:
        another mount on it (the row a ``mountpoint`` with the covered inode ``d_ino``, looked
        up when None), or it could not be opened."""
        kind = "dir" if st.st_dev == parent_dev else "subvolume"
        try:
            fd = open_dir(name, parent_fd)
        except OSError as e:
            self.problem("unreadable-dir", rel, e)
            return row_of(name, kind, st), None
        walked = False
        try:
            fst = os.fstat(fd)
            if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                self.problem("changed", rel, "replaced while it was being recorded")
                return row_of(name, kind, st), None
            if mount_id(fd) != self.mnt:
                if d_ino is None:
                    d_ino = _covered_ino(parent_fd, name)
                return (name, "mountpoint", parent_dev, d_ino, 0, 0, 0, 0), None
            walked = True
            return row_of(name, kind, st), fd
        finally:
            if not walked:
                os.close(fd)

    def told(self, code: str, rel: str, what: int | str) -> None:
        """A problem as the C walk tells it: an errno, or a text."""
        self.problem(code, rel, OSError(what, os.strerror(what)) if isinstance(what, int)
                     else what)

    def walk(self, fd: int, dev: int) -> None:
        """Record the open directory ``fd`` (closed here) and everything below it: in C
        (``_fastwalk.record``, the same walk, each directory's line encoded there) where it
        was built and a line sink was given, else here."""
        fast = walk_descent.fastwalk
        if fast is not None and self.line_sink is not None:
            fast.record(fd, dev, self.mnt, self.line_sink, self.told, encode_str)
            return
        stack: list[tuple] = []
        self.listing(fd, "", dev, stack)
        while stack:
            fd, rel, dev, rows, todo = stack[-1]
            if not todo:
                stack.pop()
                os.close(fd)
                rows.sort()
                self.sink(rel, rows)
                continue
            i, st, d_ino = todo.pop()
            name = rows[i][NAME]
            crel = join(rel, name)
            rows[i], cfd = self.enter(fd, name, crel, st, d_ino, dev)
            if cfd is not None:
                self.listing(cfd, crel, st.st_dev, stack)

    def listing(self, fd: int, rel: str, dev: int, stack: list) -> None:
        """List the open directory ``fd`` onto the stack: its rows, and its subdirectories
        still to enter (by index into the rows). Closes ``fd`` if it cannot be listed."""
        try:
            with os.scandir(fd) as it:
                ents = list(it)
        except OSError as e:
            self.problem("unreadable-dir", rel, e)
            os.close(fd)
            return
        rows: list[tuple] = []
        todo: list[tuple] = []
        stack.append((fd, rel, dev, rows, todo))
        kinds = KIND_OF_MODE.get
        for e in ents:
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue             # gone while recording: nothing to delete
            except OSError as err:
                self.problem("unreadable", join(rel, e.name), err)
                continue
            kind = kinds(st.st_mode & 0o170000, "other")
            if kind != "dir" and st.st_dev != dev:    # a file bind-mounted here
                rows.append((e.name, "mountpoint", dev, e.inode(), 0, 0, 0, 0))
                continue
            if kind == "dir":
                todo.append((len(rows), st, e.inode()))
            rows.append((e.name, kind, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                         st.st_ctime_ns, st.st_nlink))     # row_of, written out


def open_parent(item: str, root: str, dev: int) -> tuple[int, int] | None:
    """The item's parent directory, reached from ``root`` one component at a time on the
    target's mount, and that mount's id; None when a component is missing (the item is
    gone). Refused when a component is a symlink or crosses a mount."""
    rfd = open_dir(root)
    fd = rfd
    try:
        if os.fstat(rfd).st_dev != dev:
            raise Refused(f"{root}: not the filesystem of the plan (device {dev}); another "
                          "one is mounted there?")
        mnt = mount_id(rfd)
        at = root.rstrip("/")
        for comp in item[len(at) + 1:].split("/")[:-1]:
            at = at + "/" + comp
            try:
                nfd = open_dir(comp, fd)
            except FileNotFoundError:
                return None
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Refused(f"{item}: {at} is not a directory (a symlink?): not "
                                  "followed") from None
                raise
            os.close(fd)
            fd = nfd
            if mount_id(fd) != mnt:
                raise Refused(f"{item}: {at} is another mount: not crossed")
        out, fd = (fd, mnt), -1
        return out
    finally:
        if fd >= 0:
            os.close(fd)


def _mount_root(path: str) -> str:
    """The mount point of the mount that the directory ``path`` lies on."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        mnt = mount_id(fd)
    finally:
        os.close(fd)
    mounts, _ = read_mounts(Host.local())
    for m in mounts:
        if m.mount_id == mnt:
            return m.mountpoint
    raise Refused(f"{path}: its mount ({mnt}) is not in /proc/self/mountinfo")


@dataclass(frozen=True, **SLOTS)
class Recorded:
    """What recording an item came to, without its entries: its own row, totals over every
    entry (the item included), its digest (:func:`item_digest`) and the problems met. Where
    an entries file was written: its name (None when written to a stream), sha256, size and
    where its index starts."""

    item: str
    dev: int
    root: tuple
    entries: int
    dirs: int
    files: int
    apparent_bytes: int
    newest_mtime_ns: int | None
    newest_ctime_ns: int | None
    digest: str
    problems: tuple[Problem, ...] = ()
    file: str | None = None
    sha256: str | None = None
    bytes: int = 0
    index_at: int = 0

    def reference(self) -> dict:
        """What a plan holds of the entries file: a few numbers, whatever the item's size."""
        return {"schema": FILE_SCHEMA, "file": self.file, "sha256": self.sha256,
                "bytes": self.bytes, "index_at": self.index_at, "entries": self.entries,
                "dirs": self.dirs, "digest": self.digest}


class EntriesStream:
    """Each directory as the walk finishes it: its line encoded once, hashed, added up and,
    with an ``out``, written as a gzip member of its own; then dropped. What stays is one
    index line per directory (its path, where its member is, its entry count, its
    digest).

    With an ``out``, the members are compressed, hashed and written by a thread of their
    own, ~1 MB of lines at a time, in the order the walk gave them (so the file is the same
    bytes): zlib and sha256 let go of the GIL while they work, so that runs beside the walk,
    which lets go of it in its system calls -- on two CPUs the compression (~0.8 s of CPU a
    million entries, a member per directory) costs next to no wall time. Call
    :meth:`finish`, or :meth:`close` on the way out of an error."""

    BATCH = 1 << 20       # bytes of lines handed to the writer at once
    _STOP = None

    def __init__(self, out: BinaryIO | None, item: str, dev: int, *, thread: bool = True):
        """``thread``: lines are compressed by a writer thread (False: the caller hands
        members already compressed to :meth:`put_member`)."""
        self.out = out
        self.at = 0
        self.sha = hashlib.sha256()
        self.index: list[tuple[str, int, int, int, bytes]] = []
        self.entries = self.files = self.apparent = 0
        self.mtime: int | None = None
        self.ctime: int | None = None
        self.batch: list[tuple[str, bytes, int]] = []
        self.batch_bytes = 0
        self.failed: BaseException | None = None
        self.writer: threading.Thread | None = None
        if out is not None:
            self.member(_ENC({"schema": FILE_SCHEMA, "item": item, "dev": dev})
                        .encode("ascii") + b"\n")
        if out is not None and thread:
            self.jobs: queue.Queue = queue.Queue(maxsize=4)
            self.writer = threading.Thread(target=self.write, name="vacate-entries-writer",
                                           daemon=True)
            self.writer.start()

    def write(self) -> None:
        """The writer thread: each batch's members, until told to stop; after an error it
        goes on taking batches (and drops them), so the walk never waits on it."""
        while True:
            batch = self.jobs.get()
            if batch is self._STOP:
                return
            if self.failed is not None:
                continue
            try:
                for rel, line, entries in batch:
                    at, n = self.member(line)
                    self.index.append((rel, at, n, entries, hashlib.sha256(line).digest()))
            except BaseException as e:      # noqa: BLE001 (handed to the walk's thread)
                self.failed = e

    def hand_over(self) -> None:
        if self.failed is not None:
            raise self.failed
        if self.batch:
            self.jobs.put(self.batch)
        self.batch, self.batch_bytes = [], 0

    def close(self, *, quiet: bool = False) -> None:
        """Stop the writer (what it had is written); raises what it met unless ``quiet``."""
        if self.writer is not None:
            self.jobs.put(self._STOP)
            self.writer.join()
            self.writer = None
        if self.failed is not None and not quiet:
            raise self.failed

    def member(self, data: bytes) -> tuple[int, int]:
        return self.append(gzip_member(data))

    def index_member(self, head: str) -> None:
        """The index's member: ``head`` (its JSON object but for the last key) and
        ``"dirs": [[rel, at, n, k, digest], ...]``, written out and compressed a few thousand
        directories at a time (nothing kept per directory on the way)."""
        c = zlib.compressobj(LEVEL, zlib.DEFLATED, 31)
        z = [c.compress(f'{head[:-1]},"dirs":['.encode("ascii"))]
        index = self.index
        for i in range(0, len(index), 4096):
            z.append(c.compress(",".join([
                f'[{encode_str(rel)},{at},{n},{k},"{dg.hex()}"]'
                for rel, at, n, k, dg in index[i:i + 4096]]).encode("ascii")
                + (b"," if i + 4096 < len(index) else b"")))
        z.append(c.compress(b"]}\n"))
        z.append(c.flush())
        self.append(b"".join(z))

    def put_member(self, rel: str, z: bytes, entries: int, digest: bytes) -> None:
        """A directory's member compressed elsewhere (:func:`gzip_member` of its line, whose
        sha256 is ``digest``), written now, in the order it comes."""
        at, n = self.append(z)
        self.index.append((rel, at, n, entries, digest))

    def append(self, z: bytes) -> tuple[int, int]:
        self.out.write(z)
        self.sha.update(z)
        at = self.at
        self.at += len(z)
        return at, len(z)

    def add(self, rows) -> None:
        self.totals(*row_totals(rows))

    def totals(self, entries: int, files: int, apparent: int, m: int, c: int) -> None:
        self.entries += entries
        self.files += files
        self.apparent += apparent
        self.mtime = m if self.mtime is None or m > self.mtime else self.mtime
        self.ctime = c if self.ctime is None or c > self.ctime else self.ctime

    def directory(self, rel: str, rows: list) -> None:
        """A directory the walk in Python listed: its rows."""
        if rows:
            self.add(rows)
        self.put(rel, dir_line(rel, rows), len(rows))

    def line(self, rel: str, line: bytes, entries: int, files: int, apparent: int, m: int,
             c: int) -> None:
        """A directory the walk in C listed: its line (:func:`dir_line`) and its totals
        (entries, files, apparent bytes, newest mtime and ctime)."""
        if entries:
            self.totals(entries, files, apparent, m, c)
        self.put(rel, line, entries)

    def put(self, rel: str, line: bytes, entries: int) -> None:
        if self.writer is None:
            self.index.append((rel, 0, 0, entries, hashlib.sha256(line).digest()))
            return
        self.batch.append((rel, line, entries))
        self.batch_bytes += len(line)
        if self.batch_bytes >= self.BATCH:
            self.hand_over()

    def finish(self, item: str, dev: int, root: tuple,
               problems: tuple[Problem, ...]) -> Recorded:
        if self.writer is not None:
            self.hand_over()
            self.close()
        self.add((root,))
        self.index.sort()
        index_at = self.at
        digest = item_digest(item, dev, root, ((x[0], x[4]) for x in self.index))
        if self.out is not None:
            self.index_member(_ENC({"schema": FILE_SCHEMA, "item": item, "dev": dev,
                                    "root": list(root), "entries": self.entries,
                                    "digest": digest,
                                    "problems": [p.as_json() for p in problems]}))
            self.out.flush()
        return Recorded(item, dev, root, self.entries, len(self.index), self.files,
                        self.apparent, self.mtime, self.ctime, digest, problems, None,
                        self.sha.hexdigest() if self.out is not None else None, self.at,
                        index_at)


def row_totals(rows) -> tuple[int, int, int, int, int]:
    """What a directory's rows (not empty) add to an item's totals: entries, files (what
    is not a directory), apparent bytes, the newest mtime and ctime."""
    return (len(rows), sum(1 for r in rows if r[KIND] not in DIR_KINDS),
            sum(r[SIZE] for r in rows), max(r[MTIME] for r in rows),
            max(r[CTIME] for r in rows))


def gzip_member(data: bytes) -> bytes:
    """``data`` as one gzip member at level ``LEVEL`` (what each member of an entries file
    is)."""
    c = zlib.compressobj(LEVEL, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gunzip(data: bytes) -> bytes:
    """One whole gzip member, nothing after it; ValueError otherwise."""
    d = zlib.decompressobj(31)
    try:
        out = d.decompress(data)
    except zlib.error as e:
        raise ValueError(f"not a gzip member: {e}") from None
    if not d.eof or d.unused_data:
        raise ValueError("a gzip member cut short or followed by other bytes")
    return out


class EntriesFile:
    """An entries file opened to delete from: the whole file's sha256 checked against the
    one the plan names, its index held (a line per directory), each directory's rows read
    only when asked for and checked against the index's digest of them, so a file changed
    after it was opened is noticed where it matters. ValueError when any of it does not
    match. Reads with ``pread``: forked workers share it."""

    def __init__(self, path: str | int, *, sha256: str, index_at: int):
        """``path``: the file's path, or an open fd of it (duplicated here)."""
        if isinstance(path, int):
            self.fd = os.dup(path)
            path = f"the entries file (fd {path})"
        else:
            self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            self._load(path, sha256, index_at)
        except BaseException:
            os.close(self.fd)
            raise

    def _load(self, path: str, sha256: str, index_at: int) -> None:
        h = hashlib.sha256()
        size = 0
        while True:
            chunk = os.pread(self.fd, 1 << 20, size)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
        if h.hexdigest() != sha256:
            raise ValueError(f"{path}: not the entries file the plan names (its sha256 differs)")
        if not 0 < index_at < size:
            raise ValueError(f"{path}: no index at {index_at}")
        try:
            doc = json.loads(_gunzip(os.pread(self.fd, size - index_at, index_at)))
            if doc.get("schema") != FILE_SCHEMA:
                raise ValueError(f"not a {FILE_SCHEMA} index")
            self.item = str(doc["item"])
            self.dev = _int(doc["dev"])
            self.root = _row(doc["root"])
            self.problems = tuple(Problem(p["code"], p["message"], p.get("path"),
                                          bool(p.get("blocks_verdict", False)))
                                  for p in doc["problems"])
            self.index = {str(rel): (_int(at), _int(n), _int(k), bytes.fromhex(dg))
                          for rel, at, n, k, dg in doc["dirs"]}
            self.entries = _int(doc["entries"])
            digest = doc["digest"]
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"{path}: a malformed index: {e}") from None
        if self.entries != 1 + sum(v[2] for v in self.index.values()):
            raise ValueError(f"{path}: its index does not add up")
        self.digest = item_digest(self.item, self.dev, self.root,
                                  ((rel, self.index[rel][3]) for rel in sorted(self.index)))
        if digest != self.digest:
            raise ValueError(f"{path}: its index does not match its digest")

    def __len__(self) -> int:
        return self.entries

    def counts(self) -> dict[str, int]:
        """Entries recorded in each recorded directory."""
        return {rel: v[2] for rel, v in self.index.items()}

    def rows(self, rel: str) -> list | None:
        """The recorded rows of the directory ``rel`` (lists, in the order of ``row_of``), or
        None when it was not listed; ValueError when its member is not what the index
        says."""
        v = self.index.get(rel)
        if v is None:
            return None
        line = _gunzip(os.pread(self.fd, v[1], v[0]))
        if hashlib.sha256(line).digest() != v[3]:
            raise ValueError(f"{join(self.item, rel) if rel else self.item}: its entries in "
                             "the entries file are not the ones its index names")
        got, rows = json.loads(line)
        if got != rel:
            raise ValueError(f"{rel!r}: the entries file holds {got!r} there")
        return rows

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> EntriesFile:  # noqa: PYI034 (typing.Self is 3.11+)
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _record(item_path: str, dev: int, target_root: str | None,
            sink: Callable[[str, list], None], line_sink: Callable[..., None] | None = None,
            ) -> tuple[str, tuple, tuple[Problem, ...]]:
    """Walk the item, handing each listed directory to ``sink`` (or, where the walk runs in
    C, its line to ``line_sink``); the item's path, its own row (name "") and the problems
    met."""
    item = normal_path(item_path)
    if item == "/":
        raise Refused("/: never deleted")
    try:
        root = normal_path(target_root) if target_root else _mount_root(posixpath.dirname(item))
    except FileNotFoundError:
        raise NotFound(f"{item}: no such file or directory") from None
    if not item.startswith(root.rstrip("/") + "/"):
        raise Refused(f"{item}: not below {root} (reached through a symlink?)")
    opened = open_parent(item, root, dev)
    if opened is None:
        raise NotFound(f"{item}: no such file or directory")
    pfd, mnt = opened
    name = item.rpartition("/")[2]
    gc_was_on = gc.isenabled()
    gc.disable()           # a tuple per entry, and no cycles among them to collect
    try:
        pst = os.fstat(pfd)
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            raise NotFound(f"{item}: no such file or directory") from None
        rec = _Recorder(item, mnt, sink, line_sink)
        kind = kind_of(st)
        if kind == "dir":
            root_row, fd = rec.enter(pfd, name, "", st, None, pst.st_dev)
            if fd is not None:
                rec.walk(fd, st.st_dev)
        else:
            root_row = row_of(name, kind, st)
    finally:
        os.close(pfd)
        if gc_was_on:
            gc.enable()
    return item, ("", *root_row[1:]), tuple(rec.problems)


def record_entries(item_path: str, *, dev: int, target_root: str | None = None) -> EntryList:
    """Record every entry of the item ``item_path`` on the filesystem ``dev`` (the target's
    ``st_dev``), reached as :func:`vacate.act.delete.delete_item` reaches it: from
    ``target_root`` (default: the mount point of the mount it lies on) one component at a
    time, never through a symlink or across a mount. Problems (a directory that could not
    be read) are inside the list; a missing item is NotFound, an item elsewhere Refused.
    Holds every entry in memory: for a large item, :func:`record_item`."""
    dirs: list[tuple[str, tuple[tuple, ...]]] = []
    item, root, problems = _record(item_path, dev, target_root,
                                   lambda rel, rows: dirs.append((rel, tuple(rows))))
    return EntryList(item, dev, root, tuple(sorted(dirs)), problems)


def record_item(item_path: str, *, dev: int, target_root: str | None = None,
                out: BinaryIO | None = None) -> Recorded:
    """Record the item as :func:`record_entries` does, keeping only its totals, its digest
    and per directory an index line: memory in proportion to its directories (and the
    widest one), not its entries. With ``out`` (a binary file, or a pipe), the entries are
    written to it as an entries file (see the module's doc) as they are recorded; the
    result then says where its index is and the sha256 of what was written."""
    s = EntriesStream(out, normal_path(item_path), dev)
    try:
        item, root, problems = _record(item_path, dev, target_root, s.directory, s.line)
    except BaseException:
        s.close(quiet=True)     # the walk's error is the one to raise
        raise
    return s.finish(item, dev, root, problems)


def write_entries_file(item_path: str, *, dev: int, directory: str,
                       target_root: str | None = None) -> Recorded:
    """Record the item into an entries file in ``directory``, named by its sha256
    (``vacate-entries-SHA256.jsonl.gz``), written crash-safe (a temp file, fsync, rename,
    fsync the directory)."""
    fd, tmp = open_temp(directory)
    try:
        with os.fdopen(os.dup(fd), "wb", buffering=1 << 20) as f:
            rec = record_item(item_path, dev=dev, target_root=target_root, out=f)
    except BaseException:
        os.close(fd)
        remove_quietly(tmp)
        raise
    return commit_file(fd, tmp, directory, rec)


def open_temp(directory: str, tag: str = "") -> tuple[int, str]:
    """A temporary file in ``directory`` to write an entries file into: its fd and path."""
    tmp = os.path.join(directory, f"{TMP_PREFIX}{os.getpid()}{tag}-vacate-entries.jsonl.gz")
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644), tmp


def commit_file(fd: int, tmp: str, directory: str, rec: Recorded) -> Recorded:
    """The entries file written to ``tmp`` (open as ``fd``, closed here) renamed to the name
    its sha256 gives it, crash-safe; ``rec`` naming it."""
    name = file_name(rec.sha256)
    commit_temp(fd, tmp, os.path.join(directory, name))
    return replace(rec, file=name)


def file_name(sha256: str) -> str:
    """The name of the entries file whose sha256 is ``sha256``."""
    return f"vacate-entries-{sha256}.jsonl.gz"
