"""The walker driving the walk in C (``_fastwalk``, optional): a :class:`CWalker` is a
:class:`~vacate.observing.collectors.walk_loops.Walker` whose descent of a whole subtree runs in C
(``_fastwalk.Descent``: open relative to the parent, check device and inode, list, stat, the
directory's row, and half of what is pending given to an idle walker), the GIL released around
each listing's system calls. The results are the Python walker's, entry for entry (the tests
run both); the C loop saves ~15 us of interpreter work a directory. Where ``_fastwalk`` was
not built (``fastwalk`` is None) the walk uses the Python walker. Standard library only.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from vacate.observing import native
from vacate.observing.collectors import walk_loops
from vacate.observing.collectors.walk_loops import MESSAGES, Later, Walker
from vacate.observing.model.walk import ns_to_secs

FASTWALK_VERSION = 3    # the VERSION of _fastwalk.c this code drives
fastwalk = native.load("vacate.observing.collectors._fastwalk", FASTWALK_VERSION)


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
        return ns_to_secs(self.st_mtime_ns)

    @property
    def st_atime(self) -> float:
        return ns_to_secs(self.st_atime_ns)


_dirstat = DirStat._make


class CWalker(Walker):
    """A :class:`Walker` whose directories are listed and descended in C. Not for a walk
    that records the whole tree (the Python walker records it)."""

    def listdir(self, fd: int, path: str, dst: os.stat_result, pending: list) -> None:
        """:meth:`Walker.listdir` in C: a descent of this one directory (the same results,
        entry for entry), its subdirectories taken from it."""
        if self.needs_full(path):
            self.listdir_full(fd, path, dst, pending)
            return
        d = self._descent(os.dup(fd), path, dst, None)
        try:
            self.step(d, 1)
            pending.extend([(name, _dirstat(st)) for name, st in d.pending()])
        finally:
            d.close()

    def descend(self, fd: int, path: str, st: os.stat_result) -> None:
        """:meth:`Walker.descend` in C, looking at the parent's messages every
        ``TICK_DIRS`` directories (progress, giving work away); in Python where the
        subtree holds an item recorded by the walk, above it (its subtrees that hold none
        in C); inside it in C, recording each directory (``WalkRecords.sink``)."""
        rec = None
        if self.items is not None:
            item = self.items.item_of(path)
            if item is None and self.items.related(path):
                super().descend(fd, path, st)
                return
            if item is not None:
                rec = self.items.sink(item, path, st, lambda: self.part.records)
        d = self._descent(fd, path, st, self.skip or None, rec)
        try:
            while not self.step(d, walk_loops.TICK_DIRS):
                if self.conn is not None:
                    self.tick(lambda: d.split(walk_loops.DEEP))
        finally:
            d.close()

    def whole(self, path: str) -> bool:
        return self.items is not None and (not self.items.related(path) or
                                           self.items.item_of(path) is not None)

    def _descent(self, fd: int, path: str, st: os.stat_result, skip, rec=None):
        """A ``_fastwalk.Descent`` of the open directory ``fd`` (closed by it, or here if
        it cannot be made); ``rec``: what it records with (see ``_fastwalk.c``)."""
        try:
            return fastwalk.Descent(fd, path, (st.st_size, st.st_blocks, st.st_mtime_ns,
                                               st.st_atime_ns), self.root_dev,
                                    self.subvolumes, skip, rec)
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
            self.warn(code, p, MESSAGES.get(code) or OSError(err, os.strerror(err)))
        for p, size, b, mns, ans, nlink, dev, ino in large:
            key = max(size, b * 512)
            if key > self.thr:      # (the threshold may have risen since the call began)
                self.note_item((key, Later(p), size, b, ns_to_secs(mns), ns_to_secs(ans), nlink,
                                dev, ino))
        return done


def walker_class(record: bool) -> type[Walker]:
    """The walker for a walk: in C where it was built, unless the whole tree is recorded."""
    return CWalker if fastwalk is not None and not record else Walker
