"""What a ``delete`` item held when the plan was made: every entry below it, recorded so that
apply deletes only those, and only while they are still what was recorded.

The walk never follows a symlink and never leaves the item's mount: every directory is opened
relative to its parent's fd (``O_NOFOLLOW | O_DIRECTORY``) and its mount id is compared with
the item's (:func:`vacate.observing.fsio.mount_id`, so a bind of the same filesystem counts as a mount
too). A directory on the same mount with another ``st_dev`` is a btrfs subvolume of the same
filesystem: recorded as ``subvolume`` and walked, as part of the item. A mount point below
the item is recorded as ``mountpoint`` with the inode of the directory it covers (the parent's
``d_ino``) and not entered: what is on that mount is not the item's.

Standard library only (it runs where the plan is made, like the collectors).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import posixpath
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from vacate.observing.compat import SLOTS

from vacate.observing.collectors.mounts import read_mounts
from vacate.observing.errors import NotFound, VacateError
from vacate.observing.fsio import mount_id, open_noatime
from vacate.observing.host import Host
from vacate.observing.model.common import Problem

SCHEMA = "vacate.entries/1"
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
        """sha256 of the canonical encoding: a header line (schema, item, dev, root row), then
        one line per directory, each compact ASCII JSON (names that are not UTF-8 as their
        ``\\udcXX`` escapes). Names hold neither NUL nor '/', so the encoding is
        unambiguous."""
        h = hashlib.sha256()
        enc = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode
        h.update(enc([SCHEMA, self.item, self.dev, self.root]).encode() + b"\n")
        for d in self.dirs:
            h.update(enc(d).encode() + b"\n")
        return h.hexdigest()

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

    def __init__(self, item: str, mnt: int):
        self.item = item
        self.mnt = mnt
        self.dirs: list[tuple[str, tuple[tuple, ...]]] = []
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

    def walk(self, fd: int, dev: int) -> None:
        """Record the open directory ``fd`` (closed here) and everything below it."""
        stack: list[tuple] = []
        self.listing(fd, "", dev, stack)
        while stack:
            fd, rel, dev, rows, todo = stack[-1]
            if not todo:
                stack.pop()
                os.close(fd)
                rows.sort()
                self.dirs.append((rel, tuple(rows)))
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


def record_entries(item_path: str, *, dev: int, target_root: str | None = None) -> EntryList:
    """Record every entry of the item ``item_path`` on the filesystem ``dev`` (the target's
    ``st_dev``), reached as :func:`vacate.act.delete.delete_item` reaches it: from
    ``target_root`` (default: the mount point of the mount it lies on) one component at a
    time, never through a symlink or across a mount. Problems (a directory that could not
    be read) are inside the list; a missing item is NotFound, an item elsewhere Refused."""
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
    try:
        pst = os.fstat(pfd)
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            raise NotFound(f"{item}: no such file or directory") from None
        rec = _Recorder(item, mnt)
        kind = kind_of(st)
        if kind == "dir":
            root_row, fd = rec.enter(pfd, name, "", st, None, pst.st_dev)
            if fd is not None:
                rec.walk(fd, st.st_dev)
        else:
            root_row = row_of(name, kind, st)
    finally:
        os.close(pfd)
    return EntryList(item, dev, ("", *root_row[1:]), tuple(sorted(rec.dirs)),
                     tuple(rec.problems))
