"""Recognisers: what the bytes are (models, datasets, installers, ...).

``annotate`` is the one entry point the core calls. Each recogniser is a small module that
registers itself (see ``base``); importing them here fills the registry, in priority order.
"""

from __future__ import annotations

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
             budget_s: float = 10.0) -> tuple[tuple[Item, ...], tuple[Problem, ...]]:
    """Classify each item; return the items (plus the recognised artifacts below the top
    level, with ``parent`` set to their top-level item's path) and the problems met."""
    ex = Explorer({d.path: d.stats for d in dirs}, budget_s)
    out: list[Item] = []
    problems: list[Problem] = []
    for it in items:
        c, subs, probs = ex.item(it)
        out.append(Item(it.id, it.path, it.parent, it.is_dir, it.stats, c))
        out.extend(subs)
        problems.extend(probs)
    return tuple(out), tuple(problems)
