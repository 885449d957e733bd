"""A native archive of a dataset of 200,000 entries on real ZFS (zfs-fuse), past every batch
of the code that records, reads back and compares its tree (1 MiB of tree lines, 256 entries
a batch) and digests its data (4,096 object rows a write: one file in 20 holds data, 10,000
objects): archive, then verify received against the source, each in bounded memory (its own
process's high-water mark). The archive's own stream as the data's witness (the source
gone) is the same digester fed otherwise: tests/archive/test_zfs_content.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from harness.archives import run

pytestmark = [pytest.mark.root, pytest.mark.slow]

DIRS, FILES = 200, 1000
BOUND_MB = 160

STEP = """
import json, sys
from vacate.archive.target import LocalTarget
what, loc, arg = sys.argv[1:4]
if what == "archive":
    from vacate.archive.zfs_write import write_native
    ds, snap = arg.split("@")
    r = write_native(ds, snap, LocalTarget(loc), "ct", part_size=1 << 24)
    out = [r.manifest.tree.entries, list(r.notes)]
else:
    from vacate.archive.zfs_verify import verify_native
    r = verify_native(LocalTarget(loc), verify_pool=arg)
    out = [r.ok, r.allows_freeing, [f.message for f in r.findings], r.compared.entries,
           r.against, r.content.objects, r.content.against, list(r.notes)]
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print(json.dumps({"out": out, "mb": hwm / 1024}))
"""


def step(*args: str) -> dict:
    r = subprocess.run([sys.executable, "-c", STEP, *args], capture_output=True, text=True,
                       check=False, timeout=900,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


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


def test_a_200k_entry_dataset_is_archived_and_verified_both_ways_in_bounded_memory(
        big_pool, tmp_path):
    pool = big_pool
    mnt = pool.create("big")
    for d in range(DIRS):
        dd = os.path.join(mnt, f"shard-{d:04d}")
        os.mkdir(dd)
        for f in range(FILES):
            fd = os.open(os.path.join(dd, f"{f:03d}.bin"),
                         os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            if f % 20 == 0:
                os.write(fd, b"%d/%d\n" % (d, f))
            os.close(fd)
    ds = f"{pool.name}/big"
    run("zfs", "snapshot", f"{ds}@s1")
    loc = str(tmp_path / "ct")
    entries = 1 + DIRS + DIRS * FILES
    made = step("archive", loc, f"{ds}@s1")
    assert made["out"] == [entries, []]
    with open(os.path.join(loc, "ZFS-TREE.jsonl"), "rb") as f:
        assert sum(1 for _ in f) == entries

    ver = step("verify", loc, pool.name)
    ok, frees, findings, n, against, objects, data_against, notes = ver["out"]
    assert (ok, frees, findings, n, against, data_against) == (
        True, True, [], entries, "recorded", "source"), notes
    assert objects >= DIRS * FILES // 20         # every file with data digested
    print(f"peak memory, {entries} entries: archive {made['mb']:.0f} MB, verify "
          f"{ver['mb']:.0f} MB")
    for what, doc in (("archive", made), ("verify", ver)):
        assert doc["mb"] < BOUND_MB, f"{what}: {doc['mb']:.0f} MB (bound {BOUND_MB})"
    left = run("zfs", "list", "-H", "-o", "name", "-t", "all", "-r", pool.name).stdout.split()
    assert left == [x.encode() for x in (pool.name, ds, f"{ds}@s1")]   # no scratch, no clone
