"""The end of a walk: what the walkers found, merged as it arrives (:class:`Merge`), then
added up (:func:`finish`): hardlinked files counted once, at their smallest path, and each
directory's own aggregate added to its parent's, bottom-up, so that every row of the
drill-down holds its subtree. Standard library only.
"""

from __future__ import annotations

import heapq
import os
from operator import itemgetter

from vacate.observing.collectors import walk_descent
from vacate.observing.collectors.walk_loops import Part, join, parent
from vacate.observing.model.common import Problem
from vacate.observing.model.inventory import FileEntry, Stats
from vacate.observing.model.walk import DirTable, TreeRecord, WalkResult, ns_to_secs

_PATH = itemgetter(0)


class Merge:
    """Everything the walkers found, merged in the parent as it arrives: ``own`` maps each
    directory's path to its row; ``first`` maps each multiply-linked inode (dev, ino) to its
    name with the smallest path."""

    def __init__(self, keep: int, items=None):
        """``items``: a :class:`~vacate.observing.entries_fused.WalkRecords` the walkers'
        records go to (or None)."""
        self.keep = keep
        self.items = items
        self.own: dict[str, list] = {}
        self.first: dict[tuple[int, int], tuple] = {}
        self.largest: list[tuple] = []
        self.warnings: list[tuple[str, str, str]] = []
        self.entries = 0
        self.tree: TreeRecord | None = None

    def add(self, p: Part) -> None:
        self.own.update(zip(map(_PATH, p.dirs), p.dirs))
        if p.listing:
            if self.tree is None:
                self.tree = TreeRecord()
            for path, blob in p.listing:
                self.tree.add(path, blob)
        if p.records:
            self.items.take(p.records)
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


def finish(path: str, st: os.stat_result, merge: Merge, topfiles: list,
           problems: list[Problem], nworkers: int, record: bool) -> WalkResult:
    """The walk of ``path`` (its ``lstat`` ``st``) from everything merged: the drill-down's
    rows added up, the root's entries (``topfiles``: its non-directories, from the walk's
    first directory), the largest files (each inode once), the warnings."""
    # own aggregates per directory (DirTable rows, added up in place); hardlinked files added
    # once, at their smallest path
    own = merge.own
    counted_top: dict[str, tuple] = {}
    for link in merge.first.values():
        dpath = parent(link[6])
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
    c = walk_descent.fastwalk
    if c is not None:
        c.sum_up(rows, own, path)
    else:
        sum_up_py(rows, own, path)

    def stats(acc: list) -> Stats:
        return Stats(acc[1], acc[2], acc[3], acc[4], ns_to_secs(acc[5]), ns_to_secs(acc[6]))

    root_acc = own.get(path) or [path, st.st_size, st.st_blocks * 512, 0, 1, st.st_mtime_ns,
                                 st.st_atime_ns]
    top: list[tuple[str, bool, Stats]] = []
    for name, app, blk, mt, at in topfiles:
        link = counted_top.get(name)
        if link is not None:
            app, blk, mt, at = link[2], link[3], ns_to_secs(link[4]), ns_to_secs(link[5])
        top.append((join(path, name), False, Stats(app, blk * 512, 1, 0, mt, at)))
    # the root's subdirectories: every row is below the root, so those one "/" deeper
    # (counting is quicker than slicing each of tens of thousands of paths)
    depth = join(path, "").count("/")
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
        largest.append(FileEntry(str(item[1]), item[2], item[3] * 512, item[4], item[5], item[6]))
        if len(largest) >= merge.keep:
            break
    warnings = tuple(Problem(c, m, p) for c, m, p in merge.warnings) + tuple(problems)
    return WalkResult(stats(root_acc), tuple(top), DirTable(rows, own), tuple(largest), warnings,
                      merge.entries, nworkers, (merge.tree or TreeRecord()) if record else None)


def sum_up_py(rows: list[list], own: dict[str, list], path: str) -> None:
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
