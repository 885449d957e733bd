"""A ZFS dataset's snapshots, holds, clones and children, from ``zfs list`` of its pool
(:mod:`vacate.observing.parsers.zfs_list`): what freeing it depends on. Read where the
dataset is (an op of :mod:`vacate.observing.ops`, so also on a far host), at plan time and
again just before the dataset is freed. Standard library only."""

from __future__ import annotations

import os
import subprocess

from vacate.observing.model.dataset import DatasetFacts
from vacate.observing.parsers.zfs_list import COLUMNS, parse

DEADLINE_S = 60.0


def listing_argv(pool: str) -> list[str]:
    return ["zfs", "list", "-H", "-t", "all", "-r", "-o", ",".join(COLUMNS), pool]


def dataset_facts(dataset: str, deadline_s: float = DEADLINE_S) -> DatasetFacts:
    """The facts of ``dataset`` now; ``error`` says what could not be read (zfs missing,
    no answer within ``deadline_s``, a failed listing)."""
    argv = listing_argv(dataset.split("/", 1)[0].split("@", 1)[0])
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=deadline_s,
                           check=False, stdin=subprocess.DEVNULL,
                           env=dict(os.environ, LC_ALL="C"))
    except FileNotFoundError:
        return DatasetFacts(dataset, exists=False, error="zfs is not installed here")
    except subprocess.TimeoutExpired:
        return DatasetFacts(dataset, exists=False,
                            error=f"`{' '.join(argv)}` did not answer within {deadline_s:g} s")
    if r.returncode != 0:
        return DatasetFacts(dataset, exists=False,
                            error=f"`{' '.join(argv)}` failed: "
                                  f"{r.stderr.strip() or r.returncode}")
    return parse(r.stdout, dataset)
