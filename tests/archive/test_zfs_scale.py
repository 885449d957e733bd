"""A ZFS dataset of 200,000 entries (zfs-fuse) retired as an operator would: `vacate plan
--archive-format zfs --verify-pool POOL --free-volume`, then `vacate apply`, past every batch
of the code that records, reads back and compares its tree (1 MiB of tree lines, 256 entries
a batch) and digests its data (4,096 object rows a write: one file in 20 of each directory's
own holds data, 5,200 objects). The native archive is written, received and compared (every entry's file list, the
data with the source snapshot's), the dataset destroyed, in bounded memory: the apply's own
peak (its VmHWM), not its children's (zstd's, zfs's: their memory is not vacate's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from harness.archives import run
from harness.big_volume import DIRS, FILES, fill

from vacate.observing.model.journal import path_for, read_records
from vacate.observing.model.plan import Plan

pytestmark = [pytest.mark.root, pytest.mark.slow]

BOUND_MB = 200


@pytest.fixture
def big_pool():
    from harness.zfs_pool import make_pool, zfs_available
    if not zfs_available():
        pytest.skip("needs root, /dev/fuse and zfs-fuse")
    p = make_pool(size_mb=2048)
    try:
        yield p
    finally:
        p.close()


# `python -m vacate ARGS`, which writes its own peak memory (VmHWM, kB) to the file HWM names
RUN = """
import os, runpy, sys
sys.argv = ["vacate", *sys.argv[1:]]
try:
    runpy.run_module("vacate", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as f:
        hwm = next(x.split()[1] for x in f if x.startswith("VmHWM:"))
    with open(os.environ["HWM"], "w") as f:
        f.write(hwm)
"""


def _vacate(tmp_path, *args: str) -> tuple[int, bytes, bytes, float]:
    """Run vacate; its exit code, output, errors and peak memory (MB, its own)."""
    hwm = tmp_path / "hwm"
    with open(tmp_path / "out", "w+b") as out, open(tmp_path / "err", "w+b") as err:
        p = subprocess.run([sys.executable, "-c", RUN, *args], stdout=out, stderr=err,
                           stdin=subprocess.DEVNULL, timeout=900, check=False,
                           env={**os.environ, "HWM": str(hwm),
                                "PYTHONPATH": os.pathsep.join(sys.path)})
        out.seek(0)
        err.seek(0)
        return p.returncode, out.read(), err.read(), int(hwm.read_text()) / 1024


def test_a_200k_entry_dataset_archived_received_compared_and_freed_in_bounded_memory(
        big_pool, tmp_path):
    pool = big_pool
    mnt = pool.create("big")
    entries = 1 + fill(mnt, data_every=20)         # the top and 200,000 below it
    dest, plan = tmp_path / "dest", str(tmp_path / "p.plan")
    dest.mkdir()
    rc, out, err, _ = _vacate(tmp_path, "plan", mnt, "--archive-to", str(dest),
                              "--archive-format", "zfs", "--verify-pool", pool.name,
                              "--free-volume", "--delete", "d000", "-o", plan, "--json")
    assert rc == 0, err.decode()[-2000:]
    assert json.loads(out)["blocked"] == []

    rc, out, err, mb = _vacate(tmp_path, "apply", plan, "--yes", "--json")
    assert rc == 0, (out.decode()[-3000:], err.decode()[-2000:])
    steps = {s["id"].split("-", 1)[1]: s["status"] for s in json.loads(out)["done"]["steps"]}
    assert steps["destroy-dataset"] == "ok", steps
    assert run("zfs", "list", "-H", "-o", "name", "-t", "all", "-r", pool.name
               ).stdout.split() == [pool.name.encode()]     # freed; no scratch, no clone

    (adir,) = [os.path.join(dest, n) for n in os.listdir(dest) if n.startswith("dataset-")]
    with open(os.path.join(adir, "ZFS-TREE.jsonl"), "rb") as f:
        assert sum(1 for _ in f) == entries
    with open(plan) as f:
        doc = Plan.loads(f.read())
    sid = next(s.id for s in doc.steps if s.kind == "verify-dataset")
    (done,) = [r for r in read_records(path_for(plan))
               if r.get("step") == sid and r["event"] == "outcome"]
    data = done["data"]
    assert data["allows_freeing"] and data["compared"] == {"entries": entries,
                                                            "against": "recorded"}
    assert data["content"]["against"] == "source"
    assert data["content"]["objects"] >= DIRS * -(-FILES // 20)    # every file with data
    print(f"apply of {entries} entries (archive, receive, compare, destroy): peak {mb:.0f} MB")
    assert mb < BOUND_MB, f"{mb:.0f} MB (bound {BOUND_MB})"
