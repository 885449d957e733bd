"""A 200,000-entry item planned and deleted: the plan and the memory of planning and of the
delete step stay in proportion to the item's directories, not its entries (an entry recorded
in the plan, or held in memory, costs ~100 bytes of plan and ~400 bytes of memory: 20 MB and
80 MB here, which these bounds would not hold)."""

import json
import os
import subprocess
import sys

import pytest

from vacate.observing.entries import FILE_SCHEMA

pytestmark = pytest.mark.root

DIRS, FILES = 2000, 100                   # 202,001 entries with the item

PLAN = """
import resource, sys
from vacate.cli.main import main
rc = main(sys.argv[1:])
r = resource.getrusage
# the planning process itself: it records the item (a per-entry record would be here); its
# children are the walk's and the recognisers' workers and the tools it runs (blkid, ...).
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across execve, so a process started by a
# large pytest would report pytest's size
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print("MAXRSS", hwm, rc, file=sys.stderr)
print("CHILDREN", r(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
"""

DELETE = """
import resource, sys
from vacate.act import delete_step
from vacate.flow import apply
from vacate.act.base import Context
plan, _ = apply.load(sys.argv[1])
step = next(s for s in plan.steps if s.kind == "delete")
out = delete_step.run(step, Context(plan=plan, plan_path=sys.argv[1]))
print(out.status, out.detail)
r = resource.getrusage
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print("MAXRSS", max(hwm, r(resource.RUSAGE_CHILDREN).ru_maxrss), file=sys.stderr)
"""


def maxrss_mb(err: str) -> float:
    line = next(x for x in err.splitlines() if x.startswith("MAXRSS"))
    return int(line.split()[1]) / 1024


def python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                          timeout=600)


@pytest.fixture
def big(tmp_path):
    from harness.volumes import can_loop_mount, make_volume
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4", size_mb=4096)       # sparse; ~262k inodes
    try:
        item = os.path.join(v.mountpoint, "item")
        for d in range(DIRS):
            dd = os.path.join(item, f"shard-{d:04d}")
            os.makedirs(dd)
            for f in range(FILES):
                os.close(os.open(os.path.join(dd, f"{f:03d}.bin"),
                                 os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        yield v, item
    finally:
        v.close()


@pytest.mark.slow
def test_a_200k_entry_item_is_planned_and_deleted_in_memory_bounded_by_directories(big,
                                                                                  tmp_path):
    v, item = big
    plan_file = str(tmp_path / "retire.plan")
    p = python(PLAN, "plan", v.mountpoint, "--delete", "item", "-o", plan_file, "--json")
    assert "MAXRSS" in p.stderr, p.stderr
    plan_mb = maxrss_mb(p.stderr)
    doc = json.loads(p.stdout)
    (it,) = [i for i in doc["items"] if i["path"] == item]
    ref = it["entries"]
    assert ref["schema"] == FILE_SCHEMA and ref["entries"] == 1 + DIRS * (FILES + 1)
    assert ref["dirs"] == DIRS + 1 and it["identity"]["files"] == DIRS * FILES
    # the plan: a few numbers for the item; the observation in it has the scan's table of
    # directories (~115 bytes each); per entry it would be ~20 MB more
    assert os.path.getsize(plan_file) < 64 * 1024 + 200 * DIRS
    assert len(json.dumps(it)) < 2048
    # the entries file beside it holds every entry, compressed (~15 bytes an entry)
    side = tmp_path / ref["file"]
    assert side.stat().st_size == ref["bytes"] < 40 * (DIRS * FILES)

    d = python(DELETE, plan_file)
    assert d.stdout.startswith("ok "), (d.stdout, d.stderr)
    delete_mb = maxrss_mb(d.stderr)
    assert not os.path.lexists(item)
    # memory (the process or its largest worker): the interpreter and vacate (~45 MB) and
    # then a few KB a directory
    bound = 64 + 8 * DIRS / 1024
    print(f"plan {os.path.getsize(plan_file)} bytes, {plan_mb:.0f} MB; entries file "
          f"{ref['bytes']} bytes; delete {delete_mb:.0f} MB")
    assert plan_mb < bound, f"plan: {plan_mb:.0f} MB (bound {bound:.0f}); {p.stderr[-300:]}"
    assert delete_mb < bound, f"delete: {delete_mb:.0f} MB (bound {bound:.0f})"
