"""``scan``: what is on a volume, byte-exact."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from vacate.collectors import mounts, walk
from vacate.collectors.forking import cpus
from vacate.host import Host
from vacate.model.inventory import DirSummary, Item, ScanResult


def item_id(target_path: str, path: str) -> str:
    rel = os.path.relpath(path, target_path)
    return "item:" + ("." if rel == "." else rel)


CPU_BOUND = 0.7   # the walk kept its CPUs this busy: what it read was (mostly) in the cache


def cpu_bound(w: walk.WalkResult, wall_s: float, cpu_s: float) -> bool:
    """Whether the walk ``w`` (``wall_s`` long, ``cpu_s`` of CPU time in this process and its
    walkers) computed more than it waited: on the bench tree, warm, its walkers kept their
    CPUs 0.84-0.86 busy; cold (the disk read), 0.54; on a machine busy with others, less.
    Then looking at the items will wait on little too (the recognisers read little the walk
    did not)."""
    return wall_s > 0 and cpu_s / wall_s / max(1, min(cpus(), w.workers or 1)) >= CPU_BOUND


def _cpu_s() -> float:
    """CPU time of this process and of its children waited for (the walkers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def scan(path: str, *, host: Host | None = None,
         progress: Callable[[int, int], None] | None = None,
         keep_largest: int = 50, record_tree: bool = False,
         recognise_items: bool = True,
         meanwhile: Callable[[Sequence[DirSummary]], object] | None = None) -> ScanResult:
    """Resolve ``path`` to its mount and walk it. ``progress(entries, bytes)`` is called now and
    then on long walks. ``record_tree`` keeps every entry (``ScanResult.listing``) for an export
    of the whole tree (costs memory per file). ``recognise_items=False``: sizes only, nothing
    is read to tell what the items are. ``meanwhile(dirs)`` is called once with the
    drill-down, while the recognisers' other processes look (this one would wait for them),
    or after the walk: the CLI encodes the drill-down's JSON then."""
    host = host or Host.local()
    t0 = time.monotonic()
    target = mounts.resolve_target(path, host)
    skip = frozenset(m.mountpoint for m in target.nested_mounts)
    t_walk, cpu_walk = time.monotonic(), _cpu_s()
    w = walk.walk(target.path, skip=skip, keep_largest=keep_largest,
                  subvolumes=target.mount.fstype == "btrfs", progress=progress,
                  record=record_tree)
    walk_s, walk_cpu = time.monotonic() - t_walk, _cpu_s() - cpu_walk
    items = tuple(
        Item(id=item_id(target.path, p), path=p, parent=None, is_dir=is_dir, stats=st)
        for p, is_dir, st in w.top
    )
    rwarn: tuple = ()
    if recognise_items:
        from vacate import recognise  # (imported here: a sizes-only scan starts faster)

        items, rwarn = recognise.annotate(
            items, w.dirs, cpu_bound=cpu_bound(w, walk_s, walk_cpu),
            spare=None if meanwhile is None else lambda: meanwhile(w.dirs))
    elif meanwhile is not None:
        meanwhile(w.dirs)
    return ScanResult(
        target=target,
        totals=w.root,
        items=items,
        dirs=w.dirs,
        largest_files=w.largest,
        warnings=w.warnings + rwarn,
        elapsed_s=time.monotonic() - t0,
        listing=w.listing,
        entries=w.entries,
    )
