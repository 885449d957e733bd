"""What a rerun of ``verify-dataset`` clears before it receives again: the scratch datasets a
killed verify of *this* snapshot left in the verify pool (a clone of it, a receive of it),
found by ``zfs list`` as zfs-fuse 0.7 answers it (no ``-p``, no ``-d``); another
snapshot's scratch, and a dataset not named as vacate's scratch, are left alone."""

from __future__ import annotations

import pytest
from harness.archives import run

from vacate.act.dataset_step import leftovers
from vacate.archive import zfs_tool

pytestmark = pytest.mark.root


def test_only_this_snapshots_scratch_is_found(pool):
    ds = f"{pool.name}/src"
    mnt = pool.create("src")
    with open(f"{mnt}/a.txt", "w") as f:
        f.write("a\n")
    run("zfs", "snapshot", f"{ds}@a")
    run("zfs", "snapshot", f"{ds}@b")
    guid = int(zfs_tool.props(f"{ds}@a", "guid")["guid"])
    p = pool.name
    run("zfs", "clone", f"{ds}@a", f"{p}/vacate-verify-src-1")      # this verify's clone
    run("zfs", "clone", f"{ds}@b", f"{p}/vacate-verify-src-2")      # another snapshot's
    run("zfs", "clone", f"{ds}@a", f"{p}/kept-clone")               # not vacate's scratch
    run("sh", "-c", 'zfs send "$1" | zfs receive "$2"', "sh", f"{ds}@a",
        f"{p}/vacate-verify-r1")                                    # this verify's receive
    assert leftovers(p, f"{ds}@a", guid) == [f"{p}/vacate-verify-r1", f"{p}/vacate-verify-src-1"]
    assert leftovers(p, f"{ds}@b", guid + 1) == [f"{p}/vacate-verify-src-2"]
