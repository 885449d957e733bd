"""``scan``: what is on a volume, byte-exact."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from vacate.observing import beat
from vacate.observing.collectors import contents, mounts, walk
from vacate.observing.collectors.forking import cpus
from vacate.observing.collectors.special import special_file
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.inventory import DirSummary, Item, ScanResult


def item_id(target_path: str, path: str) -> str:
    rel = os.path.relpath(path, target_path)
    return "item:" + ("." if rel == "." else rel)


READ_PER_ENTRY = 50   # bytes the walk read from the disk per entry: more, and it waited on it
CPU_BOUND = 0.5       # the walk kept its CPUs at least this busy


def cpu_bound(w: walk.WalkResult, wall_s: float, use: tuple[float, int]) -> bool:
    """Whether looking at the items will compute more than it waits: the walk ``w``
    (``wall_s`` long, ``use`` its CPU seconds and 512-byte blocks read from the disk, this
    process's and its walkers', see :func:`_usage`) found what it read in the page cache and
    kept its CPUs busy. On a tree of 1M entries: warm, the walk read 2-3 MB (2-3 bytes
    an entry) and kept 2 CPUs 0.84-0.89 busy; cold, it read 537 MB (500 bytes an entry) and
    kept them 0.54-0.63 busy. Then the recognisers read little the walk did not either."""
    cpu_s, blocks = use
    busy = cpu_s / wall_s / max(1, min(cpus(), w.workers or 1)) if wall_s > 0 else 0.0
    return blocks * 512 < READ_PER_ENTRY * max(w.entries, 1) and busy >= CPU_BOUND


def _usage() -> tuple[float, int]:
    """CPU seconds and 512-byte blocks read from the disk by this process and by its children
    waited for (the walkers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return (me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
            me.ru_inblock + kids.ru_inblock)


# what the walk could not count: the totals are then a lower bound, and the scan says so
INCOMPLETE = frozenset({"unreadable", "unreadable-dir", "walk-incomplete"})


def merge_warnings(walked: tuple[Problem, ...], looked: tuple[Problem, ...]
                   ) -> tuple[Problem, ...]:
    """The walk's warnings, those that leave the totals incomplete marked so (``scan`` exits
    3 with them), then the recognisers' that say something new: a directory that could not
    be read is named once, not once by the walk and again by a recogniser."""
    out = [replace(p, blocks_verdict=True) if p.code in INCOMPLETE else p for p in walked]
    seen = {(p.code, p.path) for p in out}
    for p in looked:
        if (p.code, p.path) not in seen:
            seen.add((p.code, p.path))
            out.append(p)
    return tuple(out)


def _finishing(records, meanwhile):
    """``meanwhile`` that first finishes the records the walk made (``records``: their
    indexes and files written while the recognisers' processes look)."""
    def both(dirs):
        records.finish()
        if meanwhile is not None:
            meanwhile(dirs)
    return both


def scan(path: str, *, host: Host | None = None,
         progress: Callable[[int, int], None] | None = None,
         keep_largest: int = 50, record_tree: bool = False,
         recognise_items: bool = True,
         meanwhile: Callable[[Sequence[DirSummary]], object] | None = None,
         records=None) -> ScanResult:
    """Resolve ``path`` to its mount and walk it. ``progress(entries, bytes)`` is called now and
    then on long walks. ``record_tree`` keeps every entry (``ScanResult.listing``) for an export
    of the whole tree (costs memory per file). ``recognise_items=False``: sizes only, nothing
    is read to tell what the items are. ``meanwhile(dirs)`` is called once with the
    drill-down, while the recognisers' other processes look (this one would wait for them),
    or after the walk: the CLI encodes the drill-down's JSON then. ``records``: a
    :class:`~vacate.observing.entries_fused.WalkRecords`, items to delete recorded by the
    walk (``plan``)."""
    host = host or Host.local()
    t0 = time.monotonic()
    target = mounts.resolve_target(path, host)
    holds = contents.of_target(target)       # what the walk enters: as archive and delete
    t_walk, use0 = time.monotonic(), _usage()
    w = walk.walk(target.path, skip=holds.skip, keep_largest=keep_largest,
                  subvolumes=holds.subvolumes, progress=progress, record=record_tree,
                  items=records)
    walk_s, use1 = time.monotonic() - t_walk, _usage()
    walk_use = (use1[0] - use0[0], use1[1] - use0[1])
    items = tuple(
        Item(id=item_id(target.path, p), path=p, parent=None, is_dir=is_dir, stats=st)
        for p, is_dir, st in w.top
    )
    rwarn: tuple = ()
    if records is not None:
        meanwhile = _finishing(records, meanwhile)
    if recognise_items:
        from vacate.observing import recognise  # (imported here: a sizes-only scan starts faster)

        beat.doing(f"recognising the {len(items):,} items of {target.path}")

        items, rwarn = recognise.annotate(
            items, w.dirs, cpu_bound=cpu_bound(w, walk_s, walk_use),
            spare=None if meanwhile is None else lambda: meanwhile(w.dirs))
    else:
        # sizes only: a FIFO, socket, device or link is still named for what it is
        items = tuple(it if it.is_dir else replace(it, classification=special_file(it.path))
                      for it in items)
        if meanwhile is not None:
            meanwhile(w.dirs)
    return ScanResult(
        target=target,
        totals=w.root,
        items=items,
        dirs=w.dirs,
        largest_files=w.largest,
        warnings=merge_warnings(w.warnings, rwarn),
        elapsed_s=time.monotonic() - t0,
        listing=w.listing,
        entries=w.entries,
    )
