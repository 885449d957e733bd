"""One walker's loops over directories, in Python: list a directory, stat every entry
relative to its fd (``fstatat``, no per-entry object beyond the ``stat`` result), keep the
directory's own aggregate (itself plus the non-directory entries directly in it), and descend
depth-first, each subdirectory opened relative to its parent's fd (one fd per level: paths
longer than PATH_MAX work). What a walker finds goes into a :class:`Part`, plain lists that
are cheap to send between processes. :class:`~vacate.observing.collectors.walk_descent.CWalker` runs
the same walk in C where ``_fastwalk`` was built. Standard library only.
"""

from __future__ import annotations

import heapq
import marshal
import os
import time
from collections.abc import Callable

from vacate.observing import fsio
from vacate.observing.collectors import contents

DEEP = 3000            # paths this long are never opened by name (nor handed to another worker)
SEND_DIRS = 4096        # a walker sends what it found every this many directories
TICK_DIRS = 16          # ... and looks at its messages every this many
_FMT = 0o170000
_DIR = 0o040000
_REG = 0o100000
_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MESSAGES = {"changed": "replaced while it was being walked; skipped",
            "other-filesystem": "on another filesystem (not in this process's mountinfo); "
                                "not walked"}


def opendir(path: str, dir_fd: int | None = None) -> int:
    """Open a directory for listing without touching its access time."""
    return fsio.open_noatime(path, _OPEN, dir_fd=dir_fd)


def join(parent: str, name: str) -> str:
    return parent + name if parent.endswith("/") else parent + "/" + name


class Later(str):
    """A path in the largest files' heap: of two files of one size, the one whose path sorts
    later ranks lower (is dropped first), so the files kept and their order are the same on
    every run whatever order the walkers met them in: size, then path."""

    __slots__ = ()

    def __lt__(self, other):
        return str.__gt__(self, other)

    def __gt__(self, other):
        return str.__lt__(self, other)

    def __le__(self, other):
        return str.__ge__(self, other)

    def __ge__(self, other):
        return str.__le__(self, other)


def parent(path: str) -> str:
    head = path.rpartition("/")[0]
    return head or "/"


class Part:
    """What one walker found: plain lists, cheap to pickle between processes.

    ``dirs``: [path, apparent, disk_bytes, files, 1, mtime_ns, atime_ns] per directory (a
    :class:`~vacate.observing.model.walk.DirTable` row), the directory's own inode plus its direct
    non-directory entries (hardlinked files left out: see ``links``); the parent adds them up
    in place.
    ``links``: (dev, ino, apparent, blocks, mtime_ns, atime_ns, path) per name of a
    multiply-linked file.
    ``largest``: heap of (key, path, apparent, blocks, mtime, atime, nlink, dev, ino), path a
    :class:`Later` (ties broken by path).
    ``topfiles``: (name, apparent, blocks, mtime, atime) per non-directory in the walk's root.
    ``listing`` (only when recording the whole tree, for an ncdu export): per directory
    (path, blob), the blob a ``marshal`` of what :class:`~vacate.observing.model.walk.TreeRecord` gives
    for the directory, after its path.
    ``records`` (only when items to delete are recorded by the walk): per directory inside
    one, what :meth:`vacate.observing.entries_fused.WalkRecords.listing` gives.
    """

    __slots__ = ("dirs", "entries", "largest", "links", "listing", "nbytes", "records",
                 "topfiles", "warnings")

    def __init__(self) -> None:
        self.dirs: list[tuple] = []
        self.links: list[tuple] = []
        self.largest: list[tuple] = []
        self.warnings: list[tuple[str, str, str]] = []
        self.entries = 0
        self.nbytes = 0
        self.topfiles: list[tuple] | None = None
        self.listing: list[tuple] = []
        self.records: list[tuple] = []

    def __getstate__(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state):
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)


class Walker:
    """Walks directories into a :class:`Part`, in Python. Used in the parent and in each
    worker process. ``items``: a :class:`~vacate.observing.entries_fused.WalkRecords`, the
    items whose entries are recorded as they are walked (or None)."""

    def __init__(self, root_dev: int, subvolumes: bool, skip: dict[str, frozenset[str]],
                 keep_largest: int, conn=None, idle=None, record: bool = False, items=None):
        self.record = record
        self.items = items
        self.root_dev = root_dev
        self.subvolumes = subvolumes
        self.skip = skip
        self.keep = keep_largest
        self.conn = conn
        self.idle = idle
        self.part = Part()
        self.thr = -1
        self.last_report = time.monotonic()
        self.reported = (0, 0)

    # -- problems --------------------------------------------------------------------------
    def warn(self, code: str, path: str, err: BaseException | str) -> None:
        msg = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        self.part.warnings.append((code, f"{path}: {msg}", path))

    # -- one directory -------------------------------------------------------------------
    def listdir(self, fd: int, path: str, dst: os.stat_result, pending: list) -> None:
        """Stat every entry of the open directory ``fd``; record the directory's own aggregate
        and append its subdirectories to ``pending`` as (name, stat).

        This is the hot loop (once per entry): it does the least work per entry. Directories
        that need more (:meth:`needs_full`) go through :meth:`listdir_full`, which does the
        same plus those."""
        part = self.part
        if self.needs_full(path):
            self.listdir_full(fd, path, dst, pending)
            return
        app = dst.st_size
        blk = dst.st_blocks
        mt = dst.st_mtime_ns        # (times in ns: exact, and ints are quicker to print)
        at = dst.st_atime_ns
        files = 0
        thr = self.thr
        thr_b = thr // 512
        links = part.links
        try:
            it = os.scandir(fd)
        except OSError as e:
            self.warn("unreadable-dir", path, e)
            it = None
        if it is not None:
            with it:
                try:
                    for e in it:
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError as err:
                            self.bad_entry(path, e.name, err)
                            continue
                        mode = st.st_mode & _FMT
                        if mode == _DIR:
                            pending.append((e.name, st))
                            continue
                        files += 1
                        size = st.st_size
                        b = st.st_blocks
                        if (size > thr or b > thr_b) and mode == _REG:
                            self.note_large(join(path, e.name), st)
                            thr = self.thr
                            thr_b = thr // 512
                        if st.st_nlink > 1:
                            links.append((st.st_dev, st.st_ino, size, b, st.st_mtime_ns,
                                          st.st_atime_ns, join(path, e.name)))
                            continue
                        app += size
                        blk += b
                        m = st.st_mtime_ns
                        if m > mt:  # noqa: PLR1730 (a compare is cheaper than max() here)
                            mt = m
                        m = st.st_atime_ns
                        if m > at:  # noqa: PLR1730
                            at = m
                except OSError as err:
                    self.warn("unreadable-dir", path, err)
        part.dirs.append([path, app, blk * 512, files, 1, mt, at])
        part.entries += files + 1
        part.nbytes += blk * 512

    def needs_full(self, path: str) -> bool:
        """Whether the directory ``path`` needs :meth:`listdir_full`: the walk's root (its
        files are items of their own), a directory holding mountpoints (left out), every
        directory when the whole tree is recorded, and those inside or above an item
        recorded by the walk."""
        return self.record or (not self.part.dirs and self.part.topfiles is not None) or bool(
            self.skip and path in self.skip) or (self.items is not None and
                                                 self.items.related(path))

    def bad_entry(self, path: str, name: str, err: OSError) -> None:
        code = "vanished" if isinstance(err, FileNotFoundError) else "unreadable"
        self.warn(code, join(path, name), err)

    def listdir_full(self, fd: int, path: str, dst: os.stat_result, pending: list) -> None:
        """:meth:`listdir` for the directories that need more (:meth:`needs_full`)."""
        app = dst.st_size
        blk = dst.st_blocks
        mt = dst.st_mtime_ns
        at = dst.st_atime_ns
        files = 0
        part = self.part
        topfiles = part.topfiles if not part.dirs and part.topfiles is not None else None
        skip = self.skip.get(path) if self.skip else None
        rec = [] if self.record else None
        read_error = False
        entries: list = []
        try:
            with os.scandir(fd) as it:
                for e in it:
                    if skip is not None and e.name in skip:
                        continue    # a mountpoint: not even stat'ed (a dead FUSE/NFS hangs it)
                    try:
                        entries.append((e.name, e.stat(follow_symlinks=False)))
                    except OSError as err:
                        self.bad_entry(path, e.name, err)
        except OSError as e:
            self.warn("unreadable-dir", path, e)
            read_error = True
        for name, st in entries:
            mode = st.st_mode & _FMT
            if mode == _DIR:
                pending.append((name, st))
                continue
            files += 1
            size, b = st.st_size, st.st_blocks
            if rec is not None:
                rec.append((name, size, b, st.st_mtime, st.st_ino, st.st_nlink, mode))
            if mode == _REG and (size > self.thr or b * 512 > self.thr):
                self.note_large(join(path, name), st)
            if st.st_nlink > 1:     # counted once, later (see _finish)
                part.links.append((st.st_dev, st.st_ino, size, b, st.st_mtime_ns, st.st_atime_ns,
                                   join(path, name)))
                if topfiles is not None:
                    topfiles.append((name, 0, 0, None, None))
                continue
            app += size
            blk += b
            mt = max(mt, st.st_mtime_ns)
            at = max(at, st.st_atime_ns)
            if topfiles is not None:
                topfiles.append((name, size, b, st.st_mtime, st.st_atime))
        part.dirs.append([path, app, blk * 512, files, 1, mt, at])
        part.entries += files + 1
        part.nbytes += blk * 512
        item = self.items.item_of(path) if self.items is not None else None
        if item is not None and not read_error:
            part.records.append(self.items.listing(item, path, dst, entries))
        if rec is not None:
            part.listing.append((path, marshal.dumps((
                dst.st_size, dst.st_blocks, dst.st_mtime, dst.st_ino, rec,
                tuple(sorted(skip or ())), read_error))))

    def note_large(self, path: str, st: os.stat_result) -> None:
        self.note_item((max(st.st_size, st.st_blocks * 512), Later(path), st.st_size, st.st_blocks,
                        st.st_mtime, st.st_atime, st.st_nlink, st.st_dev, st.st_ino))

    def note_item(self, item: tuple) -> None:
        """Keep ``item`` (key, path as :class:`Later`, size, blocks, mtime, atime, nlink, dev,
        ino) among the largest; the caller has checked that its key is above ``self.thr``.
        The threshold is one below the smallest key kept: a file of that same size still
        comes here, and its path decides (so the set kept does not depend on the order)."""
        h = self.part.largest
        if len(h) < self.keep:
            heapq.heappush(h, item)
        elif item > h[0]:
            heapq.heapreplace(h, item)
        else:
            return
        if len(h) >= self.keep:
            self.thr = h[0][0] - 1

    def crosses(self, path: str, dev: int) -> bool:
        """A subdirectory on device ``dev``: on another one, a btrfs subvolume (walked) or a
        mount that mountinfo did not list here (never entered)."""
        if contents.same_filesystem(self.root_dev, self.subvolumes, dev):
            return False
        self.warn("other-filesystem", path, MESSAGES["other-filesystem"])
        return True

    # -- subtrees ------------------------------------------------------------------------
    def subtree(self, path: str, dev: int, ino: int) -> None:
        """Walk the directory ``path`` (expected to be ``dev``/``ino``) and all below it.
        (Handed out by another walker before it looked at the device: a mount it met.)"""
        if dev != self.root_dev and self.crosses(path, dev):
            return
        try:
            fd = opendir(path)
        except OSError as e:
            self.unopenable(path, e)
            return
        dst = os.fstat(fd)
        if (dst.st_dev, dst.st_ino) != (dev, ino):
            os.close(fd)
            self.warn("changed", path, MESSAGES["changed"])
            return
        self.descend(fd, path, dst)

    def descend(self, fd: int, path: str, st: os.stat_result) -> None:
        """Walk the open directory ``fd`` (closed when done) and all below it, depth-first,
        opening each subdirectory relative to its parent's fd: one fd per level, no path
        lookups, and no limit on the length of a path."""
        pending: list = []
        try:
            self.listdir(fd, path, st, pending)
        except BaseException:
            os.close(fd)
            raise
        levels: list[tuple[int, str, list]] = [(fd, path, pending)]
        n = 0
        try:
            while levels:
                fd, dpath, todo = levels[-1]
                if not todo:
                    os.close(fd)
                    levels.pop()
                    continue
                cname, cst = todo.pop()
                cpath = join(dpath, cname)
                if cst.st_dev != self.root_dev and self.crosses(cpath, cst.st_dev):
                    continue
                cfd = self.open_at(fd, cname, cpath, cst)
                if cfd is None:
                    continue
                if self.whole(cpath):
                    self.descend(cfd, cpath, cst)
                    continue
                sub: list = []
                levels.append((cfd, cpath, sub))
                self.listdir(cfd, cpath, cst, sub)
                n += 1
                if n % TICK_DIRS == 0 and self.conn is not None:
                    self.tick(lambda: split_levels(levels))
        finally:
            for fd, _, _ in levels:
                os.close(fd)

    def whole(self, path: str) -> bool:
        """Whether :meth:`descend` walks the directory ``path`` as a whole subtree of its
        own (the C walker: one that holds no item recorded by the walk)."""
        return False

    def unopenable(self, path: str, err: OSError, st: os.stat_result | None = None) -> None:
        """A directory that could not be opened: gone (nothing to count), or unreadable (its
        own inode still counts, as du counts it)."""
        if isinstance(err, FileNotFoundError):
            self.warn("vanished", path, err)
            return
        self.warn("unreadable-dir", path, err)
        try:
            st = st or os.lstat(path)
        except OSError:
            return
        self.part.dirs.append([path, st.st_size, st.st_blocks * 512, 0, 1, st.st_mtime_ns,
                               st.st_atime_ns])
        self.part.entries += 1
        if self.record:
            self.part.listing.append((path, marshal.dumps((
                st.st_size, st.st_blocks, st.st_mtime, st.st_ino, [], (), True))))

    def open_at(self, dir_fd: int, name: str, path: str, st: os.stat_result) -> int | None:
        try:
            fd = opendir(name, dir_fd)
        except OSError as e:
            self.unopenable(path, e, st)
            return None
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            self.warn("changed", path, MESSAGES["changed"])
            return None
        return fd

    # -- talking to the parent -----------------------------------------------------------
    def tick(self, split: Callable[[], list[tuple[str, int, int]]]) -> None:
        """Now and then: report progress, and give work away when a worker is idle
        (``split()``: pending directories taken off the walk, see :func:`split_levels`)."""
        if self.idle.value > 0:
            give = split()
            if give:
                self.idle.value = 0     # (the parent sets it again when it deals this out)
                self.conn.send(("split", give))
        if len(self.part.dirs) >= SEND_DIRS:
            # what was found so far goes now, so that the parent merges it while the walk
            # goes on instead of all of it after the walk, when the other CPUs are idle
            self.conn.send(("part", self.part, self.reported))
            self.part = Part()
            self.reported = (0, 0)
        self.report()

    def report(self) -> None:
        """Progress to the parent, at most every 0.2 s (also between the subtrees it was
        dealt: a wide, shallow tree's subtrees are too small to reach a tick)."""
        now = time.monotonic()
        if now - self.last_report > 0.2:
            self.last_report = now
            e, b = self.part.entries, self.part.nbytes
            self.conn.send(("progress", e - self.reported[0], b - self.reported[1]))
            self.reported = (e, b)


def split_levels(levels: list[tuple[int, str, list]]) -> list[tuple[str, int, int]]:
    """Half of the pending directories at every level (each level but the deepest at least
    one), by path, taken off ``levels``. Pieces that big keep the end of a walk balanced;
    small ones (half of one level) left one worker idle between round trips for the last
    ~15 % of the walk. ``_fastwalk.Descent.split`` does the same."""
    give: list = []
    last = len(levels) - 1
    for i, (_, dpath, todo) in enumerate(levels):
        half = len(todo) // 2 if i == last else (len(todo) + 1) // 2
        if not half:
            continue
        piece = [(p, st.st_dev, st.st_ino) for p, st in
                 ((join(dpath, nm), st) for nm, st in todo[:half]) if len(p) < DEEP]
        if len(piece) == half:     # (paths too long to open by name stay here)
            del todo[:half]
            give.extend(piece)
    return give
