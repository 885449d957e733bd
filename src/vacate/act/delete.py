"""Safe and fast delete of one plan item: only the entries recorded when the plan was made
(:func:`record_entries` in memory, or the plan's entries file, :class:`EntriesFile`), and
only while each is still what was recorded.

The record is consulted directory by directory: just before a directory's entries are
removed its recorded rows are taken (from the entries file: that directory's gzip member,
read and checked against the digest its index holds for it) and every entry listed there now
is compared with its row. So what apply holds is one index line per directory and the rows
of the directories it is in, never the item's whole record; a directory whose member is
damaged has nothing removed (an error names it).

What is deleted: an entry whose device, inode, size, mtime and ctime match its record (a
directory: its device and inode, since deleting its entries changes its times). Anything
else found there is kept and named in the result (:class:`Kept`): a file written after the
plan, a file changed since, what a nested mount hid when the plan was made, a mount that is
there now. A directory that still holds a kept entry is kept. One exception to the ctime
rule: a file with several names whose link count went down (its other names deleted here,
now or by an interrupted run) is still the recorded file when its size and mtime match.

How: fd-relative throughout. The item's parent is reached from the target root one
component at a time (``O_NOFOLLOW | O_DIRECTORY``, each on the target's mount); below it,
each directory is opened relative to its parent's fd, and entries are stat'ed, unlinked and
removed relative to it, so a symlink is removed as itself and never followed, and paths
longer than PATH_MAX work. Each directory's mount id is checked before anything in it is
touched: a mount below the item (a bind of the same filesystem too) is never entered. A
btrfs subvolume of the same filesystem (another ``st_dev`` on the same mount) is emptied and
then removed with ``rmdir``, which deletes a subvolume as ``btrfs subvolume delete`` does
(``btrfs_delete_subvolume``, Linux >= 4.18) but only when it is empty, with no path looked up
again; a read-only snapshot cannot be emptied and is a :class:`Manual` entry with the
command. btrfs frees a deleted subvolume's space in the background (``btrfs subvolume
sync``).

Idempotent: what is already gone counts as done, so a run killed at any point is finished by
running it again with the same record.

Fast: a large item is split over forked worker processes (one per CPU; the GIL makes
threads slower): this process removes the first levels breadth-first until there are enough
subdirectories, which go to the workers by their recorded sizes (largest first, each to the
least loaded), and then removes the emptied directories of those first levels. The loop over
one directory's entries (list, lstat, compare with the row, unlink) runs in C where
``_fastdel`` was built (``_fastdel.c``, optional: ``pip install`` builds it where a compiler
is), one call a directory and no Python object an entry but its name; the same loop is kept
here in Python (:meth:`_Deleter.fill_py`) and runs on a far host, where the module was not
built, or with ``VACATE_NO_C=1``. The tests delete the same changed trees both ways and
compare what went, what was kept and why, and the counts. Opening a directory, its checks
(device and inode, mount id, subvolume) and ``rmdir`` stay in Python: ~10 us a directory.

Standard library only.
"""

from __future__ import annotations

import errno
import gc
import heapq
import os
import pickle
import selectors
import signal
import stat
import struct
from dataclasses import dataclass
from typing import Callable

from vacate.observing import native
from vacate.observing.collectors.forking import can_fork, cpus, die_with_parent
from vacate.observing.compat import SLOTS, exit_code
from vacate.observing.entries import (
    CTIME,
    DEV,
    DIR_KINDS,
    INO,
    KIND,
    KIND_OF_MODE,
    MTIME,
    NAME,
    NLINK,
    SIZE,
    EntriesFile,
    Entry,
    EntryList,
    Refused,
    join,
    normal_path,
    open_dir,
    open_parent,
    read_only_subvolume,
    record_entries,
)
from vacate.observing.fsio import mount_id
from vacate.observing.model.common import Problem

__all__ = ["DeleteResult", "EntriesFile", "Entry", "EntryList", "Kept", "Manual", "Refused", "delete_item",
           "record_entries"]

ProgressFn = Callable[[int, int], None]     # (entries removed, bytes removed)

PARALLEL_MIN = 10_000    # recorded entries below which the item is deleted in this process
SPLIT = 16               # subdirectories per worker before they are handed out ...
SPLIT_DEPTH = 4          # ... looking this many levels down at most
TICK = 4096              # entries between two progress reports
_STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
_FRAME = struct.Struct("<Q")
_FMT = 0o170000
_INODE = os.DirEntry.inode
_DIR = stat.S_IFDIR

FASTDEL_VERSION = 1     # the VERSION of _fastdel.c this code calls
# _Deleter.fill's loop over a directory in C (optional: None where it was not built, on a far
# host, with VACATE_NO_C=1; the Python loop then runs)
fastdel = native.load("vacate.act._fastdel", FASTDEL_VERSION)

_MOUNTED = "another filesystem is mounted here (not entered; nothing on it was touched)"
_OTHER_DIR = "another directory than the one in the plan"
_REPLACED = "replaced while it was being deleted"
_READ_ONLY = "a read-only btrfs snapshot (not deleted: it may be someone's backup)"
_WHY_MISSING = {"new": "not in the plan: written after the plan was made",
                "hidden": "was under a mount point when the plan was made (not reviewed)",
                "unlisted": "in a directory the plan could not list"}


@dataclass(frozen=True, **SLOTS)
class Kept:
    """An entry left in place. ``reason``: ``new`` (not recorded), ``hidden`` (under a
    mount point when recorded), ``unlisted`` (in a directory that could not be recorded),
    ``changed`` (not what was recorded), ``mount-point`` (another mount there; nothing on it
    touched), ``not-empty`` (written to while it was being deleted)."""

    path: str
    reason: str
    detail: str

    def as_json(self) -> dict:
        return {"path": self.path, "reason": self.reason, "detail": self.detail}


@dataclass(frozen=True, **SLOTS)
class Manual:
    """Something only a person should remove, and the command that would."""

    path: str
    reason: str
    argv: tuple[str, ...]

    def as_json(self) -> dict:
        return {"path": self.path, "reason": self.reason, "argv": list(self.argv)}


@dataclass(frozen=True, **SLOTS)
class DeleteResult:
    """What one delete did. ``entries``: entries removed (files, links, directories);
    ``bytes``/``disk_bytes``: apparent and allocated bytes of the files whose last name was
    removed; ``subvolumes``: btrfs subvolumes deleted (their space comes back in the
    background); ``gone``: the item no longer exists."""

    item: str
    entries: int
    bytes: int
    disk_bytes: int
    kept: tuple[Kept, ...]
    manual: tuple[Manual, ...]
    errors: tuple[Problem, ...]
    subvolumes: tuple[str, ...]
    gone: bool
    workers: int = 0

    @property
    def outcome(self) -> str:
        """``ok`` (all recorded entries gone, nothing else there), ``failed`` (something
        kept or an error) or ``manual`` (only manual entries remain)."""
        if self.kept or self.errors:
            return "failed"
        return "manual" if self.manual else "ok"

    def to_json(self) -> dict:
        return {"item": self.item, "outcome": self.outcome, "gone": self.gone,
                "entries": self.entries, "bytes": self.bytes, "disk_bytes": self.disk_bytes,
                "kept": [k.as_json() for k in self.kept],
                "manual": [m.as_json() for m in self.manual],
                "errors": [p.as_json() for p in self.errors],
                "subvolumes": list(self.subvolumes), "workers": self.workers}

    as_json = to_json

    @classmethod
    def from_json(cls, d: dict) -> DeleteResult:
        """The result ``to_json`` wrote (a journal's outcome record)."""
        return cls(d["item"], d["entries"], d["bytes"], d["disk_bytes"],
                   tuple(Kept(k["path"], k["reason"], k["detail"]) for k in d["kept"]),
                   tuple(Manual(m["path"], m["reason"], tuple(m["argv"])) for m in d["manual"]),
                   tuple(Problem(p["code"], p["message"], p.get("path"),
                                 bool(p.get("blocks_verdict", False))) for p in d["errors"]),
                   tuple(d["subvolumes"]), d["gone"], d.get("workers", 0))


def _not_a(r: tuple) -> str:
    return f"replaced: a directory where the plan has a {r[KIND]}"


def _ident(st: os.stat_result) -> tuple:
    """What the safety rule compares of an entry, as ``_fastdel`` hands it back too: (dev,
    ino, mode, size, mtime_ns, ctime_ns, nlink)."""
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
            st.st_nlink)


def _changed(r: tuple, t: tuple) -> str | None:
    """How the entry ``t`` (:func:`_ident`) differs from its record ``r``, or None when it
    is the same."""
    dev, ino, mode, size, mtime, ctime, nlink = t
    if (dev, ino) != (r[DEV], r[INO]) or KIND_OF_MODE.get(stat.S_IFMT(mode), "other") != r[KIND]:
        return "replaced: another file than the one in the plan"
    if size != r[SIZE]:
        return f"modified: {r[SIZE]} bytes in the plan, {size} now"
    if mtime != r[MTIME]:
        return "modified: its mtime changed since the plan"
    if ctime != r[CTIME] and nlink >= r[NLINK]:
        return "changed: its inode changed (ctime) since the plan"
    return None


def _why_kept(r: tuple | None, t: tuple, missing: str) -> tuple[str, str | None]:
    """(reason, detail) of an entry ``t`` (:func:`_ident`) kept in a directory where an
    unrecorded entry is ``missing`` (``new``, ``hidden``, ``unlisted``); ``r``: its record,
    None where it has none."""
    if r is None:
        return missing, _WHY_MISSING[missing]
    if stat.S_ISDIR(t[2]):
        return "changed", _not_a(r)
    return "changed", _changed(r, t)


class _Dir:
    """A directory being emptied: its fd, where it is, what of it is still to descend."""

    __slots__ = ("clean", "dev", "fd", "hidden", "name", "parent_fd", "rel", "subvol",
                 "todo", "up")

    def __init__(self, fd: int, rel: str, dev: int, parent_fd: int, name: str, hidden: bool,
                 subvol: bool):
        self.fd = fd
        self.rel = rel
        self.dev = dev
        self.parent_fd = parent_fd
        self.name = name
        self.hidden = hidden
        self.subvol = subvol
        self.todo: list[tuple] = []
        self.clean = True
        self.up: _Dir | None = None


class _Deleter:
    """Deletes directory by directory into its counters and lists (one per process)."""

    def __init__(self, item: str, rows_of: Callable[[str], list | None], mnt: int):
        self.item = item
        self.rows_of = rows_of      # a recorded directory's rows, None where not listed
        self.mnt = mnt
        self.report: Callable[[], None] | None = None
        self.reset()

    def reset(self) -> None:
        self.entries = self.bytes = self.disk = 0
        self.next_tick = TICK
        self.kept: list[tuple[str, str, str]] = []          # (rel, reason, detail)
        self.manual: list[tuple[str, str, tuple]] = []      # (rel, reason, argv)
        self.errors: list[tuple[str, str, str]] = []        # (code, rel, message)
        self.subvolumes: list[str] = []

    def state(self) -> tuple:
        return (self.entries, self.bytes, self.disk, self.kept, self.manual, self.errors,
                self.subvolumes)

    def merge(self, s: tuple) -> None:
        self.entries += s[0]
        self.bytes += s[1]
        self.disk += s[2]
        self.kept += s[3]
        self.manual += s[4]
        self.errors += s[5]
        self.subvolumes += s[6]

    def path(self, rel: str) -> str:
        return join(self.item, rel) if rel else self.item

    def keep(self, rel: str, reason: str, detail: str) -> None:
        self.kept.append((rel, reason, detail))

    def error(self, code: str, rel: str, err: OSError | str) -> None:
        msg = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        self.errors.append((code, rel, msg))

    def count(self, n: int, nbytes: int, disk: int) -> None:
        """``n`` more entries removed, their files' ``nbytes`` apparent and ``disk`` bytes."""
        self.entries += n
        self.bytes += nbytes
        self.disk += disk
        if self.entries >= self.next_tick:
            self.next_tick = self.entries + TICK
            if self.report is not None:
                self.report()

    # -- entries ------------------------------------------------------------------------
    def same(self, r: tuple, st: os.stat_result, rel: str) -> bool:
        """The entry ``st`` is still the recorded ``r``; if not, it is kept, with why."""
        why = _changed(r, _ident(st))
        if why is not None:
            self.keep(rel, "changed", why)
        return why is None

    def unlink(self, fd: int, name: str, rel: str, st: os.stat_result, r: tuple) -> bool:
        """Unlink the non-directory ``name`` of ``fd`` if it is still the recorded ``r``."""
        if not self.same(r, st, rel):
            return False
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            return True
        except OSError as e:
            self.error("unlink-failed", rel, e)
            return False
        last = st.st_nlink <= 1
        self.count(1, st.st_size if last else 0, st.st_blocks * 512 if last else 0)
        return True

    def fill(self, d: _Dir) -> None:
        """Remove the recorded non-directory entries of ``d``; its recorded subdirectories
        go to ``d.todo`` as (name, (dev, ino), row), anything else is kept (``d.clean``
        False). In C where ``_fastdel`` was built (:meth:`fill_c`), else in Python
        (:meth:`fill_py`): the same loop."""
        try:
            rows = self.rows_of(d.rel)
        except ValueError as e:       # the entries file is damaged there: nothing goes
            self.error("damaged-record", d.rel, str(e))
            d.clean = False
            return
        missing = "hidden" if d.hidden else "unlisted" if rows is None else "new"
        (self.fill_c if fastdel is not None else self.fill_py)(d, rows, missing)

    def unlistable(self, d: _Dir, e: OSError) -> None:
        """``d`` could not be listed: nothing in it was removed."""
        self.error("unreadable-dir", d.rel, e)
        d.clean = False

    def fill_c(self, d: _Dir, rows: list | None, missing: str) -> None:
        """:meth:`fill` by ``_fastdel.empty`` (one call a directory)."""
        try:
            n, nbytes, blocks, d.todo, kept, errors = fastdel.empty(d.fd, rows)
        except OSError as e:
            self.unlistable(d, e)
            return
        for name, r, t in kept:
            self.keep(join(d.rel, name), *_why_kept(r, t, missing))
        for code, name, err in errors:
            self.errors.append((code, join(d.rel, name), os.strerror(err)))
        if kept or errors:
            d.clean = False
        self.count(n, nbytes, blocks * 512)

    def fill_py(self, d: _Dir, rows: list | None, missing: str) -> None:
        """:meth:`fill` in Python: the loop run once per entry, :meth:`unlink` written out,
        the counts in locals."""
        get = {r[NAME]: r for r in rows}.get if rows else {}.get
        try:
            with os.scandir(d.fd) as it:
                ents = list(it)
        except OSError as e:
            self.unlistable(d, e)
            return
        # in inode order, not the directory's (hash) order: the inode table is then written
        # block after block (~8 % less CPU per entry on ext4)
        ents.sort(key=_INODE)
        fd = d.fd
        unlink = os.unlink
        n = nbytes = blocks = 0
        try:
            for e in ents:
                name = e.name
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError as err:
                    self.error("unreadable", join(d.rel, name), err)
                    d.clean = False
                    continue
                r = get(name)
                if r is None or (st.st_mode & _FMT == _DIR and r[KIND] not in DIR_KINDS):
                    self.keep(join(d.rel, name), *_why_kept(r, _ident(st), missing))
                    d.clean = False
                    continue
                if st.st_mode & _FMT == _DIR:
                    d.todo.append((name, (st.st_dev, st.st_ino), r))
                    continue
                if (st.st_ino != r[INO] or st.st_mtime_ns != r[MTIME] or st.st_size != r[SIZE]
                        or st.st_ctime_ns != r[CTIME] or st.st_dev != r[DEV]) and \
                        not self.same(r, st, join(d.rel, name)):
                    d.clean = False
                    continue
                try:
                    unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    continue
                except OSError as err:
                    self.error("unlink-failed", join(d.rel, name), err)
                    d.clean = False
                    continue
                n += 1
                if st.st_nlink <= 1:
                    nbytes += st.st_size
                    blocks += st.st_blocks
                if n >= TICK:
                    self.count(n, nbytes, blocks * 512)
                    n = nbytes = blocks = 0
        finally:
            self.count(n, nbytes, blocks * 512)

    def enter(self, parent: _Dir | None, parent_fd: int, parent_dev: int, name: str, rel: str,
              seen: tuple[int, int], r: tuple) -> _Dir | bool:
        """Open the recorded directory ``name``, seen as (dev, ino) when it was listed, to
        empty it, or say why not: True when it is gone already, False when it is left in
        place (kept, manual, or an error)."""
        try:
            fd = open_dir(name, parent_fd)
        except FileNotFoundError:
            return True
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                self.keep(rel, "changed", _REPLACED)
            else:
                self.error("unopenable-dir", rel, e)
            return False
        ok = False
        try:
            fst = os.fstat(fd)
            if (fst.st_dev, fst.st_ino) != seen:
                self.keep(rel, "changed", _REPLACED)
                return False
            if mount_id(fd) != self.mnt:
                self.keep(rel, "mount-point", _MOUNTED)
                return False
            if seen != (r[DEV], r[INO]):
                self.keep(rel, "changed", _OTHER_DIR)
                return False
            subvol = seen[0] != parent_dev
            if subvol and read_only_subvolume(fd):
                self.manual.append((rel, _READ_ONLY, ("btrfs", "subvolume", "delete",
                                                      self.path(rel))))
                return False
            d = _Dir(fd, rel, seen[0], parent_fd, name, r[KIND] == "mountpoint", subvol)
            d.up = parent
            ok = True
            return d
        finally:
            if not ok:
                os.close(fd)

    def remove_dir(self, d: _Dir) -> bool:
        """rmdir the emptied ``d`` (closed already); a subvolume goes with it."""
        try:
            os.rmdir(d.name, dir_fd=d.parent_fd)
        except FileNotFoundError:
            return True
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                self.keep(d.rel, "not-empty", "written to while it was being deleted")
            elif d.subvol and e.errno in (errno.EPERM, errno.EINVAL):
                why = f"an emptied btrfs subvolume that rmdir cannot remove ({e.strerror})"
                self.manual.append((d.rel, why, ("btrfs", "subvolume", "delete",
                                                 self.path(d.rel))))
            else:
                self.error("rmdir-failed", d.rel, e)
            return False
        self.entries += 1
        if d.subvol:
            self.subvolumes.append(d.rel)
        return True

    def tree(self, parent: _Dir | None, parent_fd: int, parent_dev: int, name: str, rel: str,
             seen: tuple[int, int], r: tuple) -> bool:
        """Delete the recorded directory ``name`` and what is recorded below it, depth
        first, one fd per level. True when it is gone."""
        top = self.enter(parent, parent_fd, parent_dev, name, rel, seen, r)
        if isinstance(top, bool):
            return top
        stack = [top]
        try:
            self.fill(top)
            while stack:
                d = stack[-1]
                if d.todo:
                    cname, cseen, cr = d.todo.pop()
                    c = self.enter(d, d.fd, d.dev, cname, join(d.rel, cname), cseen, cr)
                    if isinstance(c, bool):
                        d.clean = d.clean and c
                    else:
                        stack.append(c)
                        self.fill(c)
                    continue
                stack.pop()
                os.close(d.fd)
                d.fd = -1
                gone = d.clean and self.remove_dir(d)
                if stack:
                    stack[-1].clean = stack[-1].clean and gone
            return gone
        finally:
            for d in stack:
                os.close(d.fd)


# -- the workers -------------------------------------------------------------------------
def _send(fd: int, msg: tuple) -> None:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_FRAME.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _child(d: _Deleter, tasks: list[tuple], wfd: int) -> int:
    d.reset()
    d.report = lambda: _send(wfd, ("progress", d.entries, d.bytes))
    gone = [d.tree(parent, parent.fd, parent.dev, name, join(parent.rel, name), seen, r)
            for parent, name, seen, r in tasks]
    _send(wfd, ("done", gone, d.state()))
    return 0


def _split(tasks: list[tuple], sizes: dict[str, int], n: int) -> list[list[tuple]]:
    """``tasks`` over ``n`` workers by recorded size: largest first, each to the least
    loaded."""
    heap = [(0, i) for i in range(n)]
    out: list[list[tuple]] = [[] for _ in range(n)]
    for t in sorted(tasks, key=lambda t: sizes.get(join(t[0].rel, t[1]), 1), reverse=True):
        load, i = heapq.heappop(heap)
        out[i].append(t)
        heapq.heappush(heap, (load + sizes.get(join(t[0].rel, t[1]), 1), i))
    return [o for o in out if o]


def _subtree_sizes(counts: dict[str, int]) -> dict[str, int]:
    """Recorded entries below each recorded directory, from the count in each."""
    sizes = dict(counts)
    for rel in sorted(sizes, key=lambda p: p.count("/") + bool(p), reverse=True):
        if rel:
            up = rel.rpartition("/")[0]
            if up in sizes:
                sizes[up] += sizes[rel]
    return sizes


def _run_workers(d: _Deleter, parts: list[list[tuple]],
                 progress: ProgressFn | None) -> list[tuple[tuple, bool]]:
    """Run each part in a forked worker; merge what they did into ``d``. Returns each task
    with whether it is gone."""
    me = os.getpid()
    base = (d.entries, d.bytes)
    running: dict[int, list] = {}      # read fd -> [pid, buffer, tasks, (entries, bytes)]
    out: list[tuple[tuple, bool]] = []
    sel = selectors.DefaultSelector()
    try:
        # a SIGTERM/^C between fork and the bookkeeping would leave a worker nobody kills:
        # held until every worker is on the list (delivered right after, inside this try)
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            for tasks in parts:
                rfd, wfd = os.pipe()
                pid = os.fork()
                if pid == 0:
                    code = 1
                    try:
                        os.close(rfd)
                        signal.signal(signal.SIGINT, signal.SIG_IGN)
                        signal.signal(signal.SIGTERM, signal.SIG_DFL)
                        signal.signal(signal.SIGHUP, signal.SIG_DFL)
                        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
                        die_with_parent(me)
                        code = _child(d, tasks, wfd)
                    except BaseException as e:  # noqa: BLE001 (said to the parent, which reports it)
                        _send(wfd, ("failed", f"{type(e).__name__}: {e}"))
                    finally:
                        os._exit(code)
                os.close(wfd)
                running[rfd] = [pid, bytearray(), tasks, (0, 0)]
                sel.register(rfd, selectors.EVENT_READ)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        while running:
            for key, _ in sel.select():
                rfd = key.fd
                w = running[rfd]
                chunk = os.read(rfd, 1 << 20)
                if chunk:
                    w[1] += chunk
                    for msg in _frames(w[1]):
                        if msg[0] == "progress":
                            w[3] = msg[1:]
                            if progress is not None:
                                progress(base[0] + sum(x[3][0] for x in running.values()),
                                         base[1] + sum(x[3][1] for x in running.values()))
                        elif msg[0] == "failed":
                            d.error("worker-failed", "", f"a delete worker failed: {msg[1]}")
                        else:
                            out.extend(zip(w[2], msg[1]))
                            d.merge(msg[2])
                            base = (base[0] + msg[2][0], base[1] + msg[2][1])
                            w[2] = None
                            w[3] = (0, 0)
                    continue
                sel.unregister(rfd)
                os.close(rfd)
                del running[rfd]
                _, status = os.waitpid(w[0], 0)
                if w[2] is not None:       # died before it said it was done
                    d.error("worker-died", "", f"a delete worker ended ({_status(status)}) "
                            "before it was done; running the delete again finishes it")
                    out.extend((t, False) for t in w[2])
    finally:
        for rfd, w in running.items():   # interrupted: only the workers started here
            os.kill(w[0], signal.SIGKILL)
            os.waitpid(w[0], 0)
            os.close(rfd)
        sel.close()
    return out


def _frames(buf: bytearray):
    while len(buf) >= 8:
        (n,) = _FRAME.unpack_from(buf)
        if len(buf) < 8 + n:
            return
        msg = pickle.loads(buf[8:8 + n])
        del buf[:8 + n]
        yield msg


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit status {exit_code(status)}"


def _parallel(d: _Deleter, counts: dict[str, int], pfd: int, pdev: int, name: str,
              seen: tuple[int, int], r: tuple, nworkers: int,
              progress: ProgressFn | None) -> tuple[bool, int]:
    """Delete the item directory breadth-first here until it has enough subdirectories,
    those in ``nworkers`` forked workers, then its first levels here. Returns whether it is
    gone and how many workers ran."""
    top = d.enter(None, pfd, pdev, name, "", seen, r)
    if isinstance(top, bool):
        return top, 0
    held = [top]                       # the first levels' directories, parents first
    used = 0
    try:
        d.fill(top)
        level = [top]
        for depth in range(SPLIT_DEPTH + 1):
            tasks = [(x, *t) for x in level for t in x.todo]
            for x in level:
                x.todo = []
            if len(tasks) >= SPLIT * nworkers or depth == SPLIT_DEPTH or not tasks:
                break
            level = []
            for x, cname, cseen, cr in tasks:
                c = d.enter(x, x.fd, x.dev, cname, join(x.rel, cname), cseen, cr)
                if isinstance(c, bool):
                    x.clean = x.clean and c
                    continue
                held.append(c)
                level.append(c)
                d.fill(c)
        if tasks:
            parts = _split(tasks, _subtree_sizes(counts), nworkers)
            used = len(parts)
            for (x, *_), gone in _run_workers(d, parts, progress):
                x.clean = x.clean and gone
        gone = False
        for x in reversed(held):       # children before their parents
            os.close(x.fd)
            x.fd = -1
            gone = x.clean and d.remove_dir(x)
            if x.up is not None:
                x.up.clean = x.up.clean and gone
        return gone, used
    finally:
        for x in held:
            if x.fd >= 0:
                os.close(x.fd)


# -- the entry point ---------------------------------------------------------------------
def _result(d: _Deleter, gone: bool, workers: int = 0) -> DeleteResult:
    return DeleteResult(
        d.item, d.entries, d.bytes, d.disk,
        tuple(Kept(d.path(rel), reason, detail) for rel, reason, detail in d.kept),
        tuple(Manual(d.path(rel), reason, argv) for rel, reason, argv in d.manual),
        tuple(Problem(code, f"{d.path(rel)}: {msg}", d.path(rel), True)
              for code, rel, msg in d.errors),
        tuple(d.path(rel) for rel in d.subvolumes), gone, workers)


def _check_paths(item: str, root: str, recorded: EntryList | EntriesFile, dev: int) -> None:
    if item == "/":
        raise Refused("/: never deleted")
    if root == "/":
        raise Refused("the target is /: nothing is deleted on the root filesystem's mount")
    if item == root:
        raise Refused(f"{item}: the target itself is never deleted (only items inside it)")
    if not item.startswith(root + "/"):
        raise Refused(f"{item}: not inside the target {root}")
    if recorded.item != item or recorded.dev != dev:
        raise Refused(f"{item}: the entry list is of {recorded.item} on device "
                      f"{recorded.dev}, not of this item on {dev}")


def delete_item(item_path: str, recorded: EntryList | EntriesFile, *, target_root: str, dev: int,
                progress: ProgressFn | None = None, workers: int | None = None
                ) -> DeleteResult:
    """Delete what ``recorded`` lists of the item ``item_path`` inside ``target_root`` (on
    the filesystem ``dev``, the target's ``st_dev``), keeping anything else found there.

    Refused (nothing touched): ``/``, the target itself, a path not strictly inside the
    target, a path through a symlink or across a mount, a record of another item, a target
    root that is not on ``dev``. ``progress(entries, bytes)`` is called now and then;
    ``workers``: processes for a large item (default: one per CPU)."""
    item = normal_path(item_path)
    root = normal_path(target_root)
    _check_paths(item, root, recorded, dev)
    opened = open_parent(item, root, dev)
    if opened is None:
        return _result(_Deleter(item, {}.get, 0), True)
    pfd, mnt = opened
    gc_was_on = gc.isenabled()
    gc.disable()           # plain tuples and lists pile up; there are no cycles to collect
    try:
        r = _delete_below(pfd, mnt, item, recorded, progress, workers)
        os.fsync(pfd)      # what went from the item's directory is gone on the disk too: a
        return r           # crash after an ok must not bring the item back
    finally:
        os.close(pfd)
        if gc_was_on:
            gc.enable()


def _delete_below(pfd: int, mnt: int, item: str, recorded: EntryList | EntriesFile,
                  progress: ProgressFn | None, workers: int | None) -> DeleteResult:
    """The delete of ``item`` in its directory ``pfd`` (:func:`delete_item`)."""
    if isinstance(recorded, EntryList):
        index = dict(recorded.dirs)
        rows_of, counts = index.get, lambda: {k: len(v) for k, v in index.items()}
    else:
        rows_of, counts = recorded.rows, recorded.counts
    d = _Deleter(item, rows_of, mnt)
    if os.fstatvfs(pfd).f_flag & os.ST_RDONLY:
        d.error("read-only", "", "the filesystem is mounted read-only")
        return _result(d, False)
    name = item.rpartition("/")[2]
    try:
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except FileNotFoundError:
        return _result(d, True)
    r = (name, *recorded.root[1:])
    if not stat.S_ISDIR(st.st_mode):
        return _result(d, d.unlink(pfd, name, "", st, r))
    if r[KIND] not in DIR_KINDS:
        d.keep("", "changed", _not_a(r))
        return _result(d, False)
    if progress is not None:
        d.report = lambda: progress(d.entries, d.bytes)
    n = workers or cpus()
    pdev = os.fstat(pfd).st_dev
    seen = (st.st_dev, st.st_ino)
    if n > 1 and len(recorded) >= PARALLEL_MIN and can_fork():
        gone, used = _parallel(d, counts(), pfd, pdev, name, seen, r, n, progress)
    else:
        gone, used = d.tree(None, pfd, pdev, name, "", seen, r), 0
    if progress is not None:
        progress(d.entries, d.bytes)
    return _result(d, gone, used)
