"""Walk one filesystem below a path: never cross into another mount, never follow symlinks,
count hardlinks once, and keep per-directory aggregates instead of per-file objects.

Counts match ``du -x``: directories and symlinks count their own size too. On btrfs a
subvolume has its own ``st_dev`` but is the same filesystem: it is walked (it is not in
mountinfo), while real mounts below the path (``skip``) are not.

Speed: each directory is opened once and its entries are stat'ed relative to that directory's
fd (``fstatat``), with no per-entry object beyond the ``stat`` result. Large trees are split
breadth-first over a few forked worker processes (the GIL makes threads slower than one
process); a busy worker hands half of its pending directories back when another one is idle.
Each worker sends per-directory *own* aggregates (the directory itself plus the non-directory
entries directly in it), in pieces while it walks; the parent merges each piece as it comes
and adds them up bottom-up at the end, so the drill-down costs one row per directory, not per
file, and is kept as rows (:class:`DirTable`). Files with more than one link are reported as (dev, ino) records
and counted once, at the smallest path, after all workers are done.

Paths are ``str`` decoded with ``surrogateescape`` (PEP 383), so any byte name survives.
Below the directories handed to a worker (opened by path), every directory is opened relative to
its parent's fd, so paths longer than PATH_MAX work (one fd is held per level).
Standard library only.
"""

from __future__ import annotations

import gc
import heapq
import marshal
import multiprocessing
import multiprocessing.connection
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple

try:                      # the hot loop in C, when it was built (see _fastwalk.c)
    from vacate.collectors import _fastwalk
except ImportError:
    _fastwalk = None

from vacate import fsio
from vacate.collectors import contents
from vacate.collectors.forking import cpus, die_with_parent
from vacate.model.common import Problem
from vacate.model.inventory import DirSummary, FileEntry, Stats

DEEP = 3000            # paths this long are never opened by name (nor handed to another worker)
_STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
INLINE_ENTRIES = 3000   # walk this many entries in-process before starting workers
SEND_DIRS = 4096        # a walker sends what it found every this many directories
TICK_DIRS = 16          # ... and looks at its messages every this many
_FMT = 0o170000
_DIR = 0o040000
_REG = 0o100000
_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH = itemgetter(0)
_MESSAGES = {"changed": "replaced while it was being walked; skipped",
             "other-filesystem": "on another filesystem (not in this process's mountinfo); "
                                 "not walked"}

ProgressFn = Callable[[int, int], None]


class DirTable(Sequence):
    """The drill-down: one row per directory, sorted by path, each row
    ``[path, apparent_bytes, disk_bytes, files, dirs, newest_mtime_ns, newest_atime_ns]`` (the
    subtree's aggregates, as :class:`Stats`). Reads as a sequence of :class:`DirSummary`, made
    on access: a walk of millions of files has tens of thousands of directories, and building
    an object for each costs more than the JSON that prints them (``rows``). ``index`` maps
    each path to its row (the walk's own, or made when first asked for). Not to be
    modified."""

    __slots__ = ("_index", "rows")

    def __init__(self, rows: list[list], index: dict[str, list] | None = None):
        self.rows = rows
        self._index = index

    @property
    def index(self) -> dict[str, list]:
        if self._index is None:
            self._index = {r[0]: r for r in self.rows}
        return self._index

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(_summary(r) for r in self.rows[i])
        return _summary(self.rows[i])

    def __iter__(self) -> Iterator[DirSummary]:
        return map(_summary, self.rows)


def _summary(r: list) -> DirSummary:
    return DirSummary(r[0], stats_of_row(r))


def stats_of_row(r: list) -> Stats:
    """The :class:`Stats` of one :class:`DirTable` row."""
    return Stats(r[1], r[2], r[3], r[4], _secs(r[5]), _secs(r[6]))


def _secs(ns: int) -> float:
    """Nanoseconds as the float seconds ``os.stat_result`` gives (``st_mtime`` from
    ``st_mtime_ns``, bit for bit: the same arithmetic)."""
    sec, nsec = divmod(ns, 1_000_000_000)
    return sec + nsec * 1e-9


@dataclass(frozen=True, slots=True)
class WalkResult:
    """What one walk found: totals, the top-level entries, every directory, the largest files."""
    root: Stats
    top: tuple[tuple[str, bool, Stats], ...]    # (path, is_dir, stats) per top-level entry
    dirs: Sequence[DirSummary]                  # a DirTable
    largest: tuple[FileEntry, ...]
    warnings: tuple[Problem, ...]
    entries: int = 0
    workers: int = 0
    listing: TreeRecord | None = None           # the whole tree, when asked


def _opendir(path: str, dir_fd: int | None = None) -> int:
    """Open a directory for listing without touching its access time."""
    return fsio.open_noatime(path, _OPEN, dir_fd=dir_fd)


def _join(parent: str, name: str) -> str:
    return parent + name if parent.endswith("/") else parent + "/" + name


def _parent(path: str) -> str:
    head = path.rpartition("/")[0]
    return head or "/"


class _Part:
    """What one walker found: plain lists, cheap to pickle between processes.

    ``dirs``: [path, apparent, disk_bytes, files, 1, mtime_ns, atime_ns] per directory (a
    :class:`DirTable` row), the directory's own inode plus its direct non-directory entries
    (hardlinked files left out: see ``links``); the parent adds them up in place.
    ``links``: (dev, ino, apparent, blocks, mtime_ns, atime_ns, path) per name of a
    multiply-linked file.
    ``largest``: heap of (key, path, apparent, blocks, mtime, atime, nlink, dev, ino).
    ``topfiles``: (name, apparent, blocks, mtime, atime) per non-directory in the walk's root.
    ``listing`` (only when recording the whole tree, for an ncdu export): per directory
    (path, blob), the blob a ``marshal`` of what :meth:`TreeRecord.get` gives after the path.
    """

    __slots__ = ("dirs", "entries", "largest", "links", "listing", "nbytes", "topfiles",
                 "warnings")

    def __init__(self) -> None:
        self.dirs: list[tuple] = []
        self.links: list[tuple] = []
        self.largest: list[tuple] = []
        self.warnings: list[tuple[str, str, str]] = []
        self.entries = 0
        self.nbytes = 0
        self.topfiles: list[tuple] | None = None
        self.listing: list[tuple] = []

    def __getstate__(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state):
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)


class DirStat(NamedTuple):
    """What the walk uses of a subdirectory's ``lstat`` (from the C loop: the same fields,
    the same names as ``os.stat_result``)."""

    st_mode: int
    st_ino: int
    st_dev: int
    st_nlink: int
    st_size: int
    st_blocks: int
    st_mtime_ns: int
    st_atime_ns: int

    @property
    def st_mtime(self) -> float:
        return _secs(self.st_mtime_ns)

    @property
    def st_atime(self) -> float:
        return _secs(self.st_atime_ns)


_dirstat = DirStat._make


class TreeRecord:
    """Every entry of a walk (``walk(..., record=True)``, for an export of the whole tree),
    kept in an anonymous temporary file, one ``marshal`` blob per directory, and read back one
    directory at a time: a million files cost the export tens of MB of index, not the
    gigabytes their Python objects would. Reads like a mapping of directory path ->
    ``(path, size, blocks, mtime, ino, [(name, size, blocks, mtime, ino, nlink, mode)...],
    mountpoint names left out, read_error)``, in the order the directories were walked."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="vacate-tree-")  # noqa: SIM115 (lives with the record)
        self._index: dict[str, tuple[int, int]] = {}
        self._end = 0

    def add(self, path: str, blob: bytes) -> None:
        fd = self._file.fileno()
        view = memoryview(blob)
        off = self._end
        while view:
            view = view[os.pwrite(fd, view, off + len(blob) - len(view)):]
        self._index[path] = (off, len(blob))
        self._end = off + len(blob)

    def __contains__(self, path: object) -> bool:
        return path in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, path: str) -> tuple:
        off, n = self._index[path]
        data = os.pread(self._file.fileno(), n, off)
        while len(data) < n:
            more = os.pread(self._file.fileno(), n - len(data), off + len(data))
            if not more:
                raise OSError(f"the walk's record of {path} is cut short")
            data += more
        return (path, *marshal.loads(data))

    def close(self) -> None:
        self._file.close()


class _Walker:
    """Walks directories into a :class:`_Part`. Used in the parent and in each worker."""

    def __init__(self, root_dev: int, subvolumes: bool, skip: dict[str, frozenset[str]],
                 keep_largest: int, conn=None, idle=None, record: bool = False):
        self.record = record
        self.root_dev = root_dev
        self.subvolumes = subvolumes
        self.skip = skip
        self.keep = keep_largest
        self.conn = conn
        self.idle = idle
        self.part = _Part()
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
        that need more (the walk's root, mountpoints below, recording the whole tree) go
        through :meth:`listdir_full`, which does the same plus those."""
        part = self.part
        if self.record or (not part.dirs and part.topfiles is not None) or (
                self.skip and path in self.skip):
            self.listdir_full(fd, path, dst, pending)
            return
        if hasattr(_fastwalk, "Descent"):
            self.listdir_c(fd, path, dst, pending)
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
                            self.note_large(_join(path, e.name), st)
                            thr = self.thr
                            thr_b = thr // 512
                        if st.st_nlink > 1:
                            links.append((st.st_dev, st.st_ino, size, b, st.st_mtime_ns,
                                          st.st_atime_ns, _join(path, e.name)))
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

    def listdir_c(self, fd: int, path: str, dst: os.stat_result, pending: list) -> None:
        """:meth:`listdir` in C: a :class:`_fastwalk.Descent` of this one directory (the same
        results, entry for entry), its subdirectories taken from it."""
        d = self._descent(os.dup(fd), path, dst, None)
        try:
            self.step(d, 1)
            pending.extend([(name, _dirstat(st)) for name, st in d.pending()])
        finally:
            d.close()

    def bad_entry(self, path: str, name: str, err: OSError) -> None:
        code = "vanished" if isinstance(err, FileNotFoundError) else "unreadable"
        self.warn(code, _join(path, name), err)

    def listdir_full(self, fd: int, path: str, dst: os.stat_result, pending: list) -> None:
        """:meth:`listdir` for the directories that need more: the walk's root (its files are
        items of their own), a directory holding mountpoints (left out), and every directory
        when the whole tree is recorded (``record``)."""
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
                self.note_large(_join(path, name), st)
            if st.st_nlink > 1:     # counted once, later (see _finish)
                part.links.append((st.st_dev, st.st_ino, size, b, st.st_mtime_ns, st.st_atime_ns,
                                   _join(path, name)))
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
        if rec is not None:
            part.listing.append((path, marshal.dumps((
                dst.st_size, dst.st_blocks, dst.st_mtime, dst.st_ino, rec,
                tuple(sorted(skip or ())), read_error))))

    def note_large(self, path: str, st: os.stat_result) -> None:
        self.note_item((max(st.st_size, st.st_blocks * 512), path, st.st_size, st.st_blocks,
                        st.st_mtime, st.st_atime, st.st_nlink, st.st_dev, st.st_ino))

    def note_item(self, item: tuple) -> None:
        """Keep ``item`` (key, path, size, blocks, mtime, atime, nlink, dev, ino) among the
        largest; the caller has checked that its key is above ``self.thr``."""
        h = self.part.largest
        if len(h) < self.keep:
            heapq.heappush(h, item)
        else:
            heapq.heapreplace(h, item)
        if len(h) >= self.keep:
            self.thr = h[0][0]

    def crosses(self, path: str, dev: int) -> bool:
        """A subdirectory on device ``dev``: on another one, a btrfs subvolume (walked) or a
        mount that mountinfo did not list here (never entered)."""
        if contents.same_filesystem(self.root_dev, self.subvolumes, dev):
            return False
        self.warn("other-filesystem", path, _MESSAGES["other-filesystem"])
        return True

    # -- subtrees ------------------------------------------------------------------------
    def subtree(self, path: str, dev: int, ino: int) -> None:
        """Walk the directory ``path`` (expected to be ``dev``/``ino``) and all below it.
        (Handed out by another walker before it looked at the device: a mount it met.)"""
        if dev != self.root_dev and self.crosses(path, dev):
            return
        try:
            fd = _opendir(path)
        except OSError as e:
            self.unopenable(path, e)
            return
        dst = os.fstat(fd)
        if (dst.st_dev, dst.st_ino) != (dev, ino):
            os.close(fd)
            self.warn("changed", path, _MESSAGES["changed"])
            return
        self.descend(fd, path, dst)

    def descend(self, fd: int, path: str, st: os.stat_result) -> None:
        """Walk the open directory ``fd`` (closed when done) depth-first, opening each
        subdirectory relative to its parent's fd: one fd per level, no path lookups, and no
        limit on the length of a path. The whole descent runs in C where it was built
        (``_fastwalk.Descent``): the same walk as :meth:`descend_py`, entry for entry, without
        ~15 us of interpreter work per directory."""
        if not hasattr(_fastwalk, "Descent") or self.record:
            self.descend_py(fd, path, st)
            return
        d = self._descent(fd, path, st, self.skip or None)
        try:
            while not self.step(d, TICK_DIRS):
                if self.conn is not None:
                    self.tick(lambda: d.split(DEEP))
        finally:
            d.close()

    def _descent(self, fd: int, path: str, st: os.stat_result, skip):
        """A ``_fastwalk.Descent`` of the open directory ``fd`` (closed by it, or here if
        it cannot be made)."""
        try:
            return _fastwalk.Descent(fd, path, (st.st_size, st.st_blocks, st.st_mtime_ns,
                                                st.st_atime_ns), self.root_dev,
                                     self.subvolumes, skip)
        except BaseException:
            os.close(fd)
            raise

    def step(self, d, n: int) -> bool:
        """``n`` more directories of the descent ``d`` into this walker's part; whether it is
        done."""
        part = self.part
        large: list[tuple] = []
        warns: list[tuple[str, str, int]] = []
        done, entries, nbytes = d.step(n, self.thr, part.dirs, part.links, large, warns)
        part.entries += entries
        part.nbytes += nbytes
        for code, p, err in warns:
            self.warn(code, p, _MESSAGES.get(code) or OSError(err, os.strerror(err)))
        for p, size, b, mns, ans, nlink, dev, ino in large:
            key = max(size, b * 512)
            if key > self.thr:      # (the threshold may have risen since the call began)
                self.note_item((key, p, size, b, _secs(mns), _secs(ans), nlink, dev, ino))
        return done

    def descend_py(self, fd: int, path: str, st: os.stat_result) -> None:
        """:meth:`descend` in Python (where the C module was not built, and when the whole
        tree is recorded)."""
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
                cpath = _join(dpath, cname)
                if cst.st_dev != self.root_dev and self.crosses(cpath, cst.st_dev):
                    continue
                cfd = self.open_at(fd, cname, cpath, cst)
                if cfd is None:
                    continue
                sub: list = []
                levels.append((cfd, cpath, sub))
                self.listdir(cfd, cpath, cst, sub)
                n += 1
                if n % TICK_DIRS == 0 and self.conn is not None:
                    self.tick(lambda: _split_levels(levels))
        finally:
            for fd, _, _ in levels:
                os.close(fd)

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
            fd = _opendir(name, dir_fd)
        except OSError as e:
            self.unopenable(path, e, st)
            return None
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            self.warn("changed", path, _MESSAGES["changed"])
            return None
        return fd

    # -- talking to the parent -----------------------------------------------------------
    def tick(self, split: Callable[[], list[tuple[str, int, int]]]) -> None:
        """Now and then: report progress, and give work away when a worker is idle
        (``split()``: pending directories taken off the walk, see :func:`_split_levels`)."""
        if self.idle.value > 0:
            give = split()
            if give:
                self.idle.value = 0     # (the parent sets it again when it deals this out)
                self.conn.send(("split", give))
        if len(self.part.dirs) >= SEND_DIRS:
            # what was found so far goes now, so that the parent merges it while the walk
            # goes on instead of all of it after the walk, when the other CPUs are idle
            self.conn.send(("part", self.part, self.reported))
            self.part = _Part()
            self.reported = (0, 0)
        now = time.monotonic()
        if now - self.last_report > 0.2:
            self.last_report = now
            e, b = self.part.entries, self.part.nbytes
            self.conn.send(("progress", e - self.reported[0], b - self.reported[1]))
            self.reported = (e, b)


def _split_levels(levels: list[tuple[int, str, list]]) -> list[tuple[str, int, int]]:
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
                 ((_join(dpath, nm), st) for nm, st in todo[:half]) if len(p) < DEEP]
        if len(piece) == half:     # (paths too long to open by name stay here)
            del todo[:half]
            give.extend(piece)
    return give


def _worker(conn, root_dev, subvolumes, skip, keep, idle, record, parent) -> None:
    # the parent handles ^C and SIGTERM and kills its workers; they just die
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)   # blocked while forking
    die_with_parent(parent)
    # one walker for the process's life: its largest-file threshold carries over from task
    # to task (files below it cannot be among the largest any more)
    w = _Walker(root_dev, subvolumes, skip, keep, conn, idle, record)
    try:
        while True:
            tasks = conn.recv()
            if tasks is None:
                return
            w.part = _Part()
            w.reported = (0, 0)
            for path, dev, ino in tasks:
                w.subtree(path, dev, ino)
            conn.send(("done", w.part, w.reported))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        return


class _Merge:
    """Everything the walkers found, merged in the parent as it arrives: ``own`` maps each
    directory's path to its row; ``first`` maps each multiply-linked inode (dev, ino) to its
    name with the smallest path."""

    def __init__(self, keep: int):
        self.keep = keep
        self.own: dict[str, list] = {}
        self.first: dict[tuple[int, int], tuple] = {}
        self.largest: list[tuple] = []
        self.warnings: list[tuple[str, str, str]] = []
        self.entries = 0
        self.tree: TreeRecord | None = None

    def add(self, p: _Part) -> None:
        self.own.update(zip(map(_PATH, p.dirs), p.dirs))
        if p.listing:
            if self.tree is None:
                self.tree = TreeRecord()
            for path, blob in p.listing:
                self.tree.add(path, blob)
        first = self.first
        for link in p.links:
            key = (link[0], link[1])
            f = first.get(key)
            if f is None or link[6] < f[6]:
                first[key] = link
        self.warnings.extend(p.warnings)
        self.entries += p.entries
        for item in p.largest:
            if len(self.largest) < self.keep * 2:
                heapq.heappush(self.largest, item)
            else:
                heapq.heappushpop(self.largest, item)


def _pool_walk(w: _Walker, merge: _Merge, queue: list, nworkers: int,
               progress: ProgressFn | None) -> tuple[list[Problem], int]:
    """Walk the directories in ``queue`` with ``nworkers`` forked processes."""
    ctx = multiprocessing.get_context("fork")
    idle = ctx.RawValue("i", 0)
    procs, conns = [], []
    problems: list[Problem] = []
    finished = False
    try:
        # a SIGTERM/^C between start() and append() would leave a walker nobody kills:
        # hold those signals until every started walker is on the list (they are delivered
        # right after, inside this try, and the finally below kills the walkers)
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            for _ in range(nworkers):
                a, b = ctx.Pipe()
                p = ctx.Process(target=_worker, daemon=True,
                                args=(b, w.root_dev, w.subvolumes, w.skip, w.keep, idle,
                                      w.record, os.getpid()))
                p.start()
                procs.append(p)
                conns.append(a)
                b.close()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        # hand out the frontier, biggest-looking (most subdirectories) first
        pending = [(p, s.st_dev, s.st_ino) for p, s in
                   sorted(queue, key=lambda t: t[1].st_nlink, reverse=True)]
        free = list(conns)
        busy: set = set()
        entries, nbytes = merge.entries, 0

        def dispatch() -> None:
            # everything pending goes out at once, shared among the free workers (dealt
            # round-robin, so each gets big and small directories): a worker never waits on
            # this process while it has work, and round trips are few (they are what costs
            # most when the machine is busy); balance comes from workers splitting their work
            # when another one is idle
            if free and pending:
                n = len(free)
                for i in range(n):
                    c = free.pop()
                    c.send(pending[i::n])
                    busy.add(c)
                pending.clear()
            idle.value = len(free)

        dispatch()
        while busy:
            for c in multiprocessing.connection.wait(list(busy)):
                try:
                    msg = c.recv()
                except EOFError:
                    busy.discard(c)
                    problems.append(Problem("walk-incomplete", "a walker process died; the "
                                            "totals miss part of the tree", None, True))
                    continue
                kind = msg[0]
                if kind == "progress":
                    entries += msg[1]
                    nbytes += msg[2]
                    if progress is not None:
                        progress(entries, nbytes)
                elif kind == "split":
                    pending.extend(msg[1])
                elif kind in ("done", "part"):
                    part, (rep_e, rep_b) = msg[1], msg[2]
                    entries += part.entries - rep_e
                    nbytes += part.nbytes - rep_b
                    merge.add(part)
                    if kind == "done":
                        busy.discard(c)
                        free.append(c)
                    if progress is not None:
                        progress(entries, nbytes)
            dispatch()
        for c in conns:
            c.send(None)
        finished = True
    finally:
        for p in procs:     # only the processes started here
            if not finished:
                p.kill()    # interrupted: no reason to let them finish a walk
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        for c in conns:
            c.close()
    return problems, nworkers


def _file_only(path: str, st: os.stat_result, keep: int) -> WalkResult:
    s = Stats(st.st_size, st.st_blocks * 512, 1, 0, st.st_mtime, st.st_atime)
    largest = ()
    if st.st_mode & _FMT == _REG and keep:
        largest = (FileEntry(path, st.st_size, st.st_blocks * 512, st.st_mtime, st.st_atime,
                             st.st_nlink),)
    return WalkResult(s, ((path, False, s),), (), largest, (), 1)


def walk(path: str, *, skip: frozenset[str] = frozenset(), keep_largest: int = 50,
         subvolumes: bool = False, progress: ProgressFn | None = None,
         workers: int | None = None, inline_entries: int = INLINE_ENTRIES,
         record: bool = False) -> WalkResult:
    """Walk ``path``. ``skip`` holds mountpoints below it (never entered). ``subvolumes``:
    walk directories with another ``st_dev`` (btrfs subvolumes); otherwise they are left out
    with a warning. ``progress(entries, bytes_on_disk)`` is called now and then.
    ``workers``: processes for large trees (default: the CPU count, 2 to 4); the first
    ``inline_entries`` entries are walked in this process, breadth-first. ``record``: also
    keep every entry (name, sizes, inode) for an export of the whole tree (memory per file)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        msg = e.strerror or str(e)
        return WalkResult(Stats(), (), (), (), (Problem("unreadable", f"{path}: {msg}", path),))
    if st.st_mode & _FMT != _DIR:
        return _file_only(path, st, keep_largest)
    path = path if path == "/" else path.rstrip("/")
    skipmap = contents.skip_by_parent(skip, path)
    w = _Walker(st.st_dev, subvolumes, skipmap, keep_largest, record=record)
    w.part.topfiles = []
    merge = _Merge(keep_largest)
    problems: list[Problem] = []
    nworkers = 0

    # breadth-first in this process until the tree proves large
    queue: list[tuple[str, os.stat_result]] = [(path, st)]
    qi = 0
    while qi < len(queue) and (qi == 0 or w.part.entries + len(queue) < inline_entries):
        dpath, dst = queue[qi]
        qi += 1
        _walk_one(w, dpath, dst, queue)
    queue = queue[qi:]
    topfiles = w.part.topfiles or []
    w.part.topfiles = None
    # the cyclic garbage collector is paused while the results pile up: they are plain
    # lists and tuples (no cycles), and its passes over them cost ~50 ms at 1M files
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        if queue:
            n = workers or _workers()
            if n > 1 and len(queue) > 1:
                merge.add(w.part)
                w.part = _Part()
                problems, nworkers = _pool_walk(w, merge, queue, n, progress)
            else:
                for dpath, dst in queue:
                    w.subtree(dpath, dst.st_dev, dst.st_ino)
        merge.add(w.part)
        return _finish(path, st, merge, topfiles, problems, nworkers, record)
    finally:
        if gc_was_on:
            gc.enable()


def _workers() -> int:
    """One walker process per CPU and one more, 2 to 4: with the C loop a walker waits on the
    disk more than it computes when the metadata is not cached, and a third walker on 2 CPUs
    keeps the disk busier (measured here, 1M files, interleaved: cold 8.6 / 10.3 s with 3
    walkers against 9.8 / 11.5 s with 2 in two series, 4 in between; warm all within 3 %).
    With the Python loop 4 and 6 were slower than 2 cold (first session)."""
    return max(2, min(4, cpus() + 1))


def _walk_one(w: _Walker, dpath: str, dst: os.stat_result, queue: list) -> None:
    """One directory of the breadth-first start: list it, queue its subdirectories."""
    try:
        fd = _opendir(dpath)
    except OSError as e:
        w.unopenable(dpath, e, dst)
        return
    try:
        pending: list = []
        w.listdir(fd, dpath, dst, pending)
        for name, sst in pending:
            sub = _join(dpath, name)
            if sst.st_dev != dst.st_dev and w.crosses(sub, sst.st_dev):
                continue
            if len(sub) > DEEP:
                cfd = w.open_at(fd, name, sub, sst)
                if cfd is not None:
                    w.descend(cfd, sub, sst)
            else:
                queue.append((sub, sst))
    finally:
        os.close(fd)


def _finish(path: str, st: os.stat_result, merge: _Merge, topfiles: list,
            problems: list[Problem], nworkers: int, record: bool) -> WalkResult:
    # own aggregates per directory (DirTable rows, added up in place); hardlinked files added
    # once, at their smallest path
    own = merge.own
    counted_top: dict[str, tuple] = {}
    for link in merge.first.values():
        dpath = _parent(link[6])
        acc = own.get(dpath)
        if acc is None:
            continue
        acc[1] += link[2]
        acc[2] += link[3] * 512
        if link[4] > acc[5]:  # noqa: PLR1730
            acc[5] = link[4]
        if link[5] > acc[6]:  # noqa: PLR1730
            acc[6] = link[5]
        if dpath == path:
            counted_top[link[6].rpartition("/")[2]] = link
    # bottom-up: add each directory to its parent (in C where built: 0.1 s less at 63,000
    # directories, on the way to everything after the walk)
    rows = [own[p] for p in sorted(own)]
    if _fastwalk is not None and hasattr(_fastwalk, "sum_up"):
        _fastwalk.sum_up(rows, own, path)
    else:
        _sum_up(rows, own, path)

    def stats(acc: list) -> Stats:
        return Stats(acc[1], acc[2], acc[3], acc[4], _secs(acc[5]), _secs(acc[6]))

    root_acc = own.get(path) or [path, st.st_size, st.st_blocks * 512, 0, 1, st.st_mtime_ns,
                                 st.st_atime_ns]
    top: list[tuple[str, bool, Stats]] = []
    for name, app, blk, mt, at in topfiles:
        link = counted_top.get(name)
        if link is not None:
            app, blk, mt, at = link[2], link[3], _secs(link[4]), _secs(link[5])
        top.append((_join(path, name), False, Stats(app, blk * 512, 1, 0, mt, at)))
    # the root's subdirectories: every row is below the root, so those one "/" deeper
    # (counting is quicker than slicing each of tens of thousands of paths)
    depth = _join(path, "").count("/")
    for acc in rows:
        p = acc[0]
        if p.count("/") == depth and p != path:
            top.append((p, True, stats(acc)))
    top.sort(key=lambda t: t[0])
    seen: set[tuple[int, int]] = set()
    largest: list[FileEntry] = []
    for item in sorted(merge.largest, reverse=True):
        if (item[7], item[8]) in seen:
            continue
        seen.add((item[7], item[8]))
        largest.append(FileEntry(item[1], item[2], item[3] * 512, item[4], item[5], item[6]))
        if len(largest) >= merge.keep:
            break
    warnings = tuple(Problem(c, m, p) for c, m, p in merge.warnings) + tuple(problems)
    return WalkResult(stats(root_acc), tuple(top), DirTable(rows, own), tuple(largest), warnings,
                      merge.entries, nworkers, (merge.tree or TreeRecord()) if record else None)


def _sum_up(rows: list[list], own: dict[str, list], path: str) -> None:
    """Each row added to its parent's, bottom-up (``_fastwalk.sum_up`` does the same in C):
    sorted by path, a directory comes before everything below it (a prefix sorts first), so in
    reverse every subtree is complete before it is added to its parent."""
    get = own.get
    for acc in reversed(rows):
        p = acc[0]
        if p == path:
            continue
        par = get(p[:p.rindex("/")] or "/")
        if par is None:
            continue
        par[1] += acc[1]
        par[2] += acc[2]
        par[3] += acc[3]
        par[4] += acc[4]
        if acc[5] > par[5]:  # noqa: PLR1730
            par[5] = acc[5]
        if acc[6] > par[6]:  # noqa: PLR1730
            par[6] = acc[6]
