"""Recognisers: what the bytes are (models, datasets, installers, ...).

``annotate`` is the one entry point the core calls. Each recogniser is a small module that
registers itself (see ``base``) for files, directories, or as a composite over what was
recognised inside a directory; the most confident answer wins. ``explore`` walks below each
top-level item (bounded: entries listed, nodes, subdirectories and files per directory, time)
and turns recognised artifacts below the top level into items of their own. File formats are
parsed by pure functions in ``formats`` (bytes in); all reading goes through ``read.Reader``:
heads and small files only, size caps, no symlinks followed (except inside a hub cache repo),
no special files opened, O_NOATIME.

Problem codes: ``oversized-file``, ``malformed-file``, ``not-regular-file``,
``dangling-link``, ``link-outside``, ``incomplete-model``, ``unreadable``, ``unreadable-dir``,
``recognise-timeout``. None blocks the verdict: they concern what a thing is, not who uses it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence

from vacate.observing.model.common import Problem
from vacate.observing.model.inventory import Classification, DirSummary, Item, Stats
from vacate.observing.model.walk import stats_of_row
from vacate.observing.recognise import (  # noqa: F401  (importing registers them)
    artifacts,
    caches,
    checkpoints,
    datasets,
    envs,
    gguf_file,
    hf_model,
    hub_cache,
    images,
    installers,
    onnx_trt,
    safetensors_header,
    source,
    training,
)
from vacate.observing.recognise.explore import entry_budgets, special_file
from vacate.observing.recognise.sidebyside import look_all


def annotate(items: tuple[Item, ...], dirs: Sequence[DirSummary], *,
             budget_s: float = 10.0, total_budget_s: float = 60.0, parallel: bool = True,
             cpu_bound: bool = False, spare: Callable[[], object] | None = None,
             ) -> tuple[tuple[Item, ...], tuple[Problem, ...]]:
    """Classify each item; return the items (plus the recognised artifacts below the top
    level, with ``parent`` set to their top-level item's path) and the problems met.
    Each item gets ``budget_s`` at most, all of them together ``total_budget_s``; items left
    when that is spent are not looked at (one ``recognise-timeout`` problem says how many).
    ``parallel``: two CPUs look at the items side by side where that pays (see
    :mod:`~vacate.observing.recognise.sidebyside`); the result is the same either way. ``cpu_bound``:
    what is read is expected to be in the page cache (the walk found it so), so fewer
    processes look side by side. ``spare``: called once, when this process would otherwise
    wait for the others (see :func:`~vacate.observing.recognise.sidebyside.look_all`)."""
    budgets = entry_budgets(items)
    # The cyclic garbage collector is paused while looking (and in the forked lookers): what
    # is made here holds no cycles, and its passes over the walk's tens of thousands of rows
    # cost ~15% of looking at a 1M-entry tree's items.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        found = look_all(items, budgets, dir_stats_lookup(dirs), budget_s,
                         time.monotonic() + total_budget_s, parallel, cpu_bound, spare)
    finally:
        if gc_was_on:
            gc.enable()
    out: list[Item] = []
    problems: list[Problem] = []
    skipped = 0
    for i, it in enumerate(items):
        if i not in found:
            skipped += 1
            out.append(Item(it.id, it.path, it.parent, it.is_dir, it.stats, unlooked(it)))
            continue
        c, subs, probs = found[i]
        out.append(Item(it.id, it.path, it.parent, it.is_dir, it.stats, c))
        out.extend(subs)
        problems.extend(probs)
    if skipped:
        problems.append(Problem("recognise-timeout", f"{skipped} items were not looked at: the "
                                f"{total_budget_s:.0f} s for recognising was spent"))
    return tuple(out), tuple(problems)


def dir_stats_lookup(dirs: Sequence[DirSummary]) -> Callable[[str], Stats | None]:
    """path -> the subtree's Stats, for the directories the walk saw. A walk's
    :class:`~vacate.observing.model.walk.DirTable` is indexed by its rows and a Stats made only for
    the directories looked up (the explorer looks at a few thousand of tens of thousands)."""
    index = getattr(dirs, "index", None)
    if index is None:
        return {d.path: d.stats for d in dirs}.get
    made: dict[str, Stats] = {}

    def get(path: str) -> Stats | None:
        st = made.get(path)
        if st is None:
            r = index.get(path)
            if r is None:
                return None
            st = made[path] = stats_of_row(r)
        return st

    return get


def unlooked(it: Item) -> Classification:
    special = None if it.is_dir else special_file(it.path)
    if special is not None:
        return special              # a link, FIFO, socket or device: one lstat says it all
    kind = "directory" if it.is_dir else "file"
    return Classification(kind, f"{kind} (not looked at)", confidence=0.0,
                          details={"partial": True})
