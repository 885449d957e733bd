"""Recognisers: what the bytes are (models, datasets, installers, ...).

``annotate`` is the one entry point the core calls.
"""

from __future__ import annotations

import os

from vacate.model.common import Problem
from vacate.model.inventory import Classification, DirSummary, Item


def annotate(items: tuple[Item, ...], dirs: tuple[DirSummary, ...]
             ) -> tuple[tuple[Item, ...], tuple[Problem, ...]]:
    """Classify each item; return the items (plus any recognised artifacts below the top level,
    with ``parent`` set) and the problems met while reading them."""
    out = []
    for it in items:
        name = os.path.basename(it.path)
        if it.is_dir and name == "lost+found":
            c = Classification("filesystem-artifact", "filesystem artifact (fsck's lost+found)",
                               recoverable="regenerable", confidence=0.9,
                               evidence=("name lost+found",))
        elif it.is_dir:
            c = Classification("directory", "directory", confidence=0.0)
        else:
            c = Classification("file", "file", confidence=0.0)
        out.append(Item(it.id, it.path, it.parent, it.is_dir, it.stats, c))
    return tuple(out), ()
