"""A 200,000-entry archive written, verified, restored and checked for staleness in bounded
memory: the writer streams its entries (:mod:`vacate.archive.partial`) and the manifest's
readers stream it (:mod:`vacate.archive.catalog`), so their peak stays near the
interpreter's and the buffers' (the compressor's, the part reader's), whatever the number of
entries (held in memory, the parsed manifest cost ~1.5 KB an entry: ~340 MB here; the writer
holding its entries, their lines and the walk's list peaked at ~500 MB)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
from harness.archives import needs_tools

from vacate.archive.target import open_target
from vacate.archive.verify import manifest_sha256

pytestmark = [pytest.mark.root, pytest.mark.slow, needs_tools("zstd", "tar", "sha256sum")]

DIRS, FILES = 1000, 100                   # 101,001 entries with the top directory
ENTRIES = 1 + DIRS * (FILES + 1)
BOUND_MB = 120     # at 202,001 entries: ~90 (verify, restore), ~80 (archive), ~50
                   # (staleness); a record per entry took ~340 there (~500 the archive),
                   # ~190 (~270) at this size

STEP = """
import json, sys, time
from vacate.archive.target import open_target
what, loc, arg = sys.argv[1:4]
t = open_target(loc)
t0 = time.monotonic()
if what == "archive":
    from vacate.archive.writer import archive, exit_code
    r = archive([arg], t, "item")
    out = [exit_code(r), r.entries]
elif what == "again":
    from vacate.archive.writer import archive, exit_code
    r = archive([arg], t, "item")
    out = [exit_code(r), r.up_to_date]
elif what == "verify":
    from vacate.archive.verify import verify
    r = verify(t, against=[arg])
    out = [r.exit_code, r.files_checked, r.sources_checked]
else:
    from vacate.archive.restore import restore
    r = restore(t, arg)
    out = [r.exit_code, r.restored]
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across execve, so a process started by a
# large pytest would report pytest's size
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print(json.dumps({"out": out, "mb": hwm / 1024, "s": time.monotonic() - t0}))
"""


def step(*args: str) -> dict:
    r = subprocess.run([sys.executable, "-c", STEP, *args], capture_output=True, text=True,
                       check=False, timeout=900,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


@pytest.fixture
def big():
    from harness.volumes import can_loop_mount, make_volume
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("xfs", size_mb=3072)       # sparse; inodes as needed (two trees)
    try:
        item = os.path.join(v.mountpoint, "item")
        for d in range(DIRS):
            dd = os.path.join(item, f"shard-{d:04d}")
            os.makedirs(dd)
            for f in range(FILES):
                fd = os.open(os.path.join(dd, f"{f:03d}.bin"),
                             os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
                os.write(fd, b"%d/%d\n" % (d, f))
                os.close(fd)
        yield v, item
    finally:
        v.close()


def test_a_200k_entry_archive_is_written_verified_restored_and_rechecked_in_bounded_memory(
        big):
    v, item = big
    loc = os.path.join(v.mountpoint, "archive", "item")
    made = step("archive", loc, item)
    assert made["out"] == [0, ENTRIES]

    ver = step("verify", loc, item)
    assert ver["out"] == [0, DIRS * FILES, ENTRIES]
    again = step("again", loc, item)
    assert again["out"] == [0, True]
    out = os.path.join(v.mountpoint, "out")
    res = step("restore", loc, out)
    assert res["out"] == [0, ENTRIES]
    with open(os.path.join(out, "item", "shard-0789", "056.bin"), "rb") as f:
        assert f.read() == b"789/56\n"
    with open(os.path.join(loc, "MANIFEST.jsonl"), "rb") as f:
        assert manifest_sha256(open_target(loc)) == hashlib.sha256(f.read()).hexdigest()
    print(f"peak memory, {ENTRIES} entries: " + ", ".join(
        f"{what} {doc['mb']:.0f} MB ({doc['s']:.1f} s)" for what, doc in (
            ("archive", made), ("verify --against", ver), ("restore", res),
            ("staleness", again))))
    for what, doc in (("archive", made), ("verify", ver), ("restore", res),
                      ("staleness", again)):
        assert doc["mb"] < BOUND_MB, f"{what}: {doc['mb']:.0f} MB (bound {BOUND_MB})"
