"""Walk one filesystem below a path: never cross into another mount, never follow symlinks,
count hardlinks once, and keep per-directory aggregates instead of per-file objects.

Counts match ``du -x``: directories and symlinks count their own size too. On btrfs a
subvolume has its own ``st_dev`` but is the same filesystem: it is walked (it is not in
mountinfo), while real mounts below the path (``skip``) are not.

Each directory is opened once and its entries are stat'ed relative to that directory's fd
(``fstatat``). The first few thousand entries are walked here, breadth-first; a larger tree is
then shared among forked walker processes. Each walker sends per-directory *own* aggregates
(the directory itself plus the non-directory entries directly in it); they are merged as they
come and added up bottom-up at the end, so the drill-down costs one row per directory, not per
file. Files with more than one link are reported as (dev, ino) records and counted once, at
the smallest path, after all walkers are done.

The parts, one module each:
:mod:`~vacate.observing.collectors.walk_loops` one walker's loops over directories, in Python;
:mod:`~vacate.observing.collectors.walk_descent` the same walker driving the C descent (``_fastwalk``);
:mod:`~vacate.observing.collectors.walk_pool` the forked walker processes;
:mod:`~vacate.observing.collectors.walk_finish` merging and adding up;
:mod:`vacate.observing.model.walk` what a walk returns (:class:`~vacate.observing.model.walk.WalkResult`).

Items to delete named to the walk (``items``, for ``plan``) are recorded as they are walked:
the directories inside and above them are listed with each entry's full ``lstat`` (in C
inside them, ``_fastwalk.Descent``'s record mode; in Python above them and where C was not
built), each directory inside one sent back as the gzip member of its entries-file line
(:mod:`vacate.observing.entries_fused`).

Paths are ``str`` decoded with ``surrogateescape`` (PEP 383), so any byte name survives.
Standard library only.
"""

from __future__ import annotations

import gc
import os
import stat

from vacate.observing.collectors import contents, walk_descent, walk_loops
from vacate.observing.collectors.forking import can_fork, cpus
from vacate.observing.collectors.walk_finish import Merge, finish
from vacate.observing.collectors.walk_loops import Part, Walker, join, opendir
from vacate.observing.collectors.walk_pool import ProgressFn, pool_walk
from vacate.observing.model.common import Problem
from vacate.observing.model.inventory import FileEntry, Stats
from vacate.observing.model.walk import DirTable, WalkResult, stats_of_row

__all__ = ["DirTable", "WalkResult", "stats_of_row", "walk"]

INLINE_ENTRIES = 3000   # walk this many entries in-process before starting workers


def _file_only(path: str, st: os.stat_result, keep: int) -> WalkResult:
    """The walk of a path that is not a directory: itself."""
    s = Stats(st.st_size, st.st_blocks * 512, 1, 0, st.st_mtime, st.st_atime)
    largest = ()
    if stat.S_ISREG(st.st_mode) and keep:
        largest = (FileEntry(path, st.st_size, st.st_blocks * 512, st.st_mtime, st.st_atime,
                             st.st_nlink),)
    return WalkResult(s, ((path, False, s),), (), largest, (), 1)


def walk(path: str, *, skip: frozenset[str] = frozenset(), keep_largest: int = 50,
         subvolumes: bool = False, progress: ProgressFn | None = None,
         workers: int | None = None, inline_entries: int = INLINE_ENTRIES,
         record: bool = False, items=None) -> WalkResult:
    """Walk ``path``. ``skip`` holds mountpoints below it (never entered). ``subvolumes``:
    walk directories with another ``st_dev`` (btrfs subvolumes); otherwise they are left out
    with a warning. ``progress(entries, bytes_on_disk)`` is called now and then.
    ``workers``: processes for large trees (default: one per CPU and one more, 2 to 4; none
    while this process runs another thread, :func:`~vacate.observing.collectors.forking.can_fork`);
    the first ``inline_entries`` entries are walked in this process, breadth-first. ``record``: also
    keep every entry (name, sizes, inode) for an export of the whole tree (memory per file).
    ``items``: a :class:`~vacate.observing.entries_fused.WalkRecords`, items to delete whose
    entries files are written from this walk (told of its problems when it is done)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        msg = e.strerror or str(e)
        return WalkResult(Stats(), (), (), (), (Problem("unreadable", f"{path}: {msg}", path),))
    if not stat.S_ISDIR(st.st_mode):
        return _file_only(path, st, keep_largest)
    path = path if path == "/" else path.rstrip("/")
    skipmap = contents.skip_by_parent(skip, path)
    w = walk_descent.walker_class(record)(st.st_dev, subvolumes, skipmap, keep_largest,
                                          record=record, items=items)
    w.part.topfiles = []
    merge = Merge(keep_largest, items)
    if items is not None:
        items.prepare(skip)
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
            if n > 1 and len(queue) > 1 and can_fork():
                merge.add(w.part)
                w.part = Part()
                problems, nworkers = pool_walk(w, merge, queue, n, progress)
            else:
                for dpath, dst in queue:
                    w.subtree(dpath, dst.st_dev, dst.st_ino)
        merge.add(w.part)
        out = finish(path, st, merge, topfiles, problems, nworkers, record)
        if items is not None:
            items.taint(out.warnings)
        return out
    finally:
        if gc_was_on:
            gc.enable()


def _workers() -> int:
    """One walker process per CPU and one more, 2 to 4: with the C loop a walker waits on the
    disk more than it computes when the metadata is not cached, and a third walker on 2 CPUs
    keeps the disk busier (a 1M-file tree, cold: about 12 % quicker with 3 walkers than with
    2, 4 in between; warm, 2 to 4 within 3 %)."""
    return max(2, min(4, cpus() + 1))


def _walk_one(w: Walker, dpath: str, dst: os.stat_result, queue: list) -> None:
    """One directory of the breadth-first start: list it, queue its subdirectories."""
    try:
        fd = opendir(dpath)
    except OSError as e:
        w.unopenable(dpath, e, dst)
        return
    try:
        pending: list = []
        w.listdir(fd, dpath, dst, pending)
        for name, sst in pending:
            sub = join(dpath, name)
            if sst.st_dev != dst.st_dev and w.crosses(sub, sst.st_dev):
                continue
            if len(sub) > walk_loops.DEEP:
                cfd = w.open_at(fd, name, sub, sst)
                if cfd is not None:
                    w.descend(cfd, sub, sst)
            else:
                queue.append((sub, sst))
    finally:
        os.close(fd)
