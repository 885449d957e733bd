"""``scan``: what is on a volume, byte-exact."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from vacate.collectors import mounts, walk
from vacate.host import Host
from vacate.model.inventory import Item, ScanResult


def item_id(target_path: str, path: str) -> str:
    rel = os.path.relpath(path, target_path)
    return "item:" + ("." if rel == "." else rel)


def scan(path: str, *, host: Host | None = None,
         progress: Callable[[int, int], None] | None = None,
         keep_largest: int = 50, record_tree: bool = False,
         recognise_items: bool = True) -> ScanResult:
    """Resolve ``path`` to its mount and walk it. ``progress(entries, bytes)`` is called now and
    then on long walks. ``record_tree`` keeps every entry (``ScanResult.listing``) for an export
    of the whole tree (costs memory per file). ``recognise_items=False``: sizes only, nothing
    is read to tell what the items are."""
    host = host or Host.local()
    t0 = time.monotonic()
    target = mounts.resolve_target(path, host)
    skip = frozenset(m.mountpoint for m in target.nested_mounts)
    w = walk.walk(target.path, skip=skip, keep_largest=keep_largest,
                  subvolumes=target.mount.fstype == "btrfs", progress=progress,
                  record=record_tree)
    items = tuple(
        Item(id=item_id(target.path, p), path=p, parent=None, is_dir=is_dir, stats=st)
        for p, is_dir, st in w.top
    )
    rwarn: tuple = ()
    if recognise_items:
        from vacate import recognise  # (imported here: a sizes-only scan starts faster)

        items, rwarn = recognise.annotate(items, w.dirs)
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
