"""A path the person names under the volume that is not an item yet (``--delete
models/tiny-model``, a plain subdirectory) becomes an item of its own, carved out of its
top-level item as recognised sub-items are: ``parent`` set, its bytes already counted in the
parent. A directory's sums come from the walk's drill-down; a file's from its ``lstat``.

The carved items join the observation the plan is made from (and records), so deciding and
re-deciding (``apply``'s check, ``plan --from``) see the same items."""

from __future__ import annotations

import os
from dataclasses import replace

from vacate.observing.model.inventory import Item, Stats
from vacate.observing.model.observation import Observation
from vacate.observing.parsers.paths import is_under


def is_glob(p: str) -> bool:
    return any(ch in p for ch in "*?[")


def carve(obs: Observation, overrides: list[tuple[str, str]], *, stat_file=None) -> Observation:
    """``obs`` with an item for each literal override path on the volume that no item is
    yet (a glob is left to match items). Paths that do not exist are left alone: the plan
    refuses them as matching nothing. ``stat_file(path)``: a file's own Stats where the
    volume is (default: :func:`vacate.observing.ops.file_stats` here)."""
    if stat_file is None:
        from vacate.observing.host import Host
        from vacate.observing.ops import file_stats

        def stat_file(p):
            return file_stats(Host.local(), p)

    target = obs.target.path
    inv = obs.inventory
    have = {it.path for it in inv.items}
    tops = [it for it in inv.items if it.parent is None]
    dirs = getattr(inv.dirs, "index", None)
    if dirs is None:
        dirs = {d.path: d for d in inv.dirs}
    extra = []
    for _action, p in overrides:
        if is_glob(p):
            continue
        path = os.path.normpath(p if p.startswith("/") else os.path.join(target, p))
        if path in have or path == target or not is_under(path, target):
            continue
        top = next((t for t in tops if is_under(path, t.path)), None)
        if top is None or not top.is_dir:
            continue
        row = dirs.get(path)
        if row is not None:
            st = row.stats if hasattr(row, "stats") else _row_stats(row)
            is_dir = True
        else:
            st = stat_file(path)
            is_dir = False
            if st is None:
                continue
        extra.append(Item(id="item:" + os.path.relpath(path, target), path=path,
                          parent=top.path, is_dir=is_dir, stats=st))
        have.add(path)
    if not extra:
        return obs
    items = list(inv.items)
    for it in extra:          # after the last item of its top-level one
        at = max(i for i, x in enumerate(items) if is_under(x.path, it.parent))
        items.insert(at + 1, it)
    return replace(obs, inventory=replace(inv, items=tuple(items)))


def _row_stats(row) -> Stats:
    from vacate.observing.model.walk import stats_of_row

    return stats_of_row(row)
