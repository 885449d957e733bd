"""Recognisers: what the bytes are (models, datasets, installers, ...).

``annotate`` is the one entry point the core calls. Each recogniser is a small module that
registers itself (see ``base``); importing them here fills the registry, in priority order.
"""

from __future__ import annotations

import time

from vacate.model.common import Problem
from vacate.model.inventory import DirSummary, Item
from vacate.recognise import (  # noqa: F401  (importing registers them)
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
from vacate.recognise.explore import Explorer


def annotate(items: tuple[Item, ...], dirs: tuple[DirSummary, ...], *,
             budget_s: float = 10.0, total_budget_s: float = 60.0,
             ) -> tuple[tuple[Item, ...], tuple[Problem, ...]]:
    """Classify each item; return the items (plus the recognised artifacts below the top
    level, with ``parent`` set to their top-level item's path) and the problems met.
    Each item gets ``budget_s`` at most, all of them ``total_budget_s`` (then 0.2 s each)."""
    ex = Explorer({d.path: d.stats for d in dirs}, budget_s)
    out: list[Item] = []
    problems: list[Problem] = []
    end = time.monotonic() + total_budget_s
    for it in items:
        ex.budget_s = min(budget_s, max(end - time.monotonic(), 0.2))
        c, subs, probs = ex.item(it)
        out.append(Item(it.id, it.path, it.parent, it.is_dir, it.stats, c))
        out.extend(subs)
        problems.extend(probs)
    return tuple(out), tuple(problems)
