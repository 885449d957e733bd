"""vacate's safe delete (``vacate.act.delete.delete_item``) against ``rm -rf`` on the
1,000,000-entry bench tree (bench/scan/bench_scan_tree.py's generator: datasets, a hub
cache, checkpoints, source checkouts, deep chains, odd names), side by side.

    sudo python3 bench/delete/bench_delete.py [--files N] [--rounds R] [--workers W] [--python]

The tree is built once into ``ITEM`` (``item/``) of an ext4 image (cached in
/var/tmp/vacate-bench/delete-N.img). Every run deletes a fresh copy of it: the image is
copied (``cp --sparse=always``: the same blocks, inodes and times for every run), attached
and mounted; the tree is recorded with ``record_entries`` (what ``vacate plan`` does; it also
brings the metadata into the page cache, so both tools start from the same warm state: the
rm runs are recorded too, and the record thrown away); then one tool deletes ``item/``,
timed. vacate's time is the ``delete_item`` call (the apply step: the record is already in
memory, read from the plan); the record's time is printed apart. Rounds rotate which tool
goes first. ``--python``: a third tool in every round, vacate with ``VACATE_NO_C=1`` (the
delete's loop over a directory in Python, as on a far host, instead of ``_fastdel``). Needs
root (loop mounts).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scan"))
import bench_scan_tree as scan_tree

CACHE = scan_tree.CACHE
ITEM = "item"

VACATE = """
import json, os, sys, time
from vacate.act.delete import delete_item, record_entries
item, root, workers, delete = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
dev = os.stat(root).st_dev
t0 = time.perf_counter()
rec = record_entries(item, dev=dev)
t1 = time.perf_counter()
out = {"record_s": t1 - t0, "entries": len(rec), "problems": len(rec.problems)}
if delete:
    c0 = os.times()
    t1 = time.perf_counter()
    r = delete_item(item, rec, target_root=root, dev=dev, workers=workers or None)
    c1 = os.times()
    user = c1.user + c1.children_user - c0.user - c0.children_user
    cpu = user + c1.system + c1.children_system - c0.system - c0.children_system
    out.update(delete_s=time.perf_counter() - t1, cpu_s=cpu, user_s=user, outcome=r.outcome,
               removed=r.entries,
               kept=len(r.kept), errors=[p.message for p in r.errors[:3]], workers=r.workers)
print(json.dumps(out))
"""


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def base_image(files: int) -> str:
    """The image holding the built tree in ``item/`` (built once)."""
    img = os.path.join(CACHE, f"delete-{files}.img")
    stamp = img + ".done"
    if os.path.exists(stamp):
        return img
    os.makedirs(CACHE, exist_ok=True)
    with open(img, "wb") as f:
        f.truncate(16 << 30)
    sh("mkfs.ext4", "-q", "-F", "-N", str(int(files * 1.3)), "-L", "vacatedel", img)
    mnt = tempfile.mkdtemp(prefix="vacate-delbuild-")
    sh("mount", "-o", "loop", img, mnt)
    try:
        b = scan_tree.Builder(os.path.join(mnt, ITEM), files)
        os.mkdir(b.root)
        b.build()
        n = b.n
    finally:
        os.sync()
        sh("umount", mnt)
        os.rmdir(mnt)
    with open(stamp, "w") as f:
        f.write(f"{n}\n")
    print(f"built {n} entries in {img}", flush=True)
    return img


class Copy:
    """A fresh copy of the base image, attached and mounted read-write."""

    def __init__(self, base: str):
        self.img = base + ".run"
        sh("cp", "--sparse=always", base, self.img)
        self.mnt = tempfile.mkdtemp(prefix="vacate-delrun-")
        sh("mount", "-o", "loop", self.img, self.mnt)
        self.item = os.path.join(self.mnt, ITEM)

    def close(self) -> None:
        subprocess.run(["umount", self.mnt], check=False)
        os.rmdir(self.mnt)
        os.unlink(self.img)


PY_LOOP = "vacate, Python loop"


def vacate(c: Copy, workers: int, delete: bool, no_c: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": os.path.join(HERE, "..", "..", "src")}
    if no_c:
        env["VACATE_NO_C"] = "1"
    p = subprocess.run([sys.executable, "-c", VACATE, c.item, c.mnt, str(workers),
                        "1" if delete else "0"], check=True, capture_output=True, text=True,
                       env=env)
    return json.loads(p.stdout)


def run(tool: str, base: str, workers: int) -> dict:
    c = Copy(base)
    try:
        if tool == "rm -rf":
            out = vacate(c, workers, False)          # the same warm-up as vacate's record
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(["rm", "-rf", c.item], check=True)
            out["delete_s"] = time.perf_counter() - t
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            out["cpu_s"] = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
            out["user_s"] = r1.ru_utime - r0.ru_utime
        else:
            out = vacate(c, workers, True, no_c=tool == PY_LOOP)
            assert out["outcome"] == "ok", out
        assert not os.path.lexists(c.item), f"{tool} left {c.item}"
        return out
    finally:
        c.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=0, help="vacate's workers (0: its default)")
    ap.add_argument("--python", action="store_true",
                    help="also vacate with its delete loop in Python (VACATE_NO_C=1)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (loop mounts)", file=sys.stderr)
        return 2
    base = base_image(a.files)
    tools = ("rm -rf", "vacate") + ((PY_LOOP,) if a.python else ())
    times: dict[str, list[float]] = {t: [] for t in tools}
    cpu: dict[str, list[float]] = {t: [] for t in tools}
    for i in range(a.rounds):
        order = tools[i % len(tools):] + tools[:i % len(tools)]     # each goes first in turn
        for tool in order:
            out = run(tool, base, a.workers)
            times[tool].append(out["delete_s"])
            cpu[tool].append(out["cpu_s"])
            extra = (f"  (record {out['record_s']:.2f} s, {out['entries']} entries, "
                     f"{out.get('workers', '-')} workers)") if tool != "rm -rf" else ""
            print(f"round {i + 1}  {tool:18} {out['delete_s']:7.2f} s wall "
                  f"{out['cpu_s']:6.2f} s CPU ({out['user_s']:5.2f} user)  load {os.getloadavg()[0]:.1f}{extra}", flush=True)
    rm, rmc = statistics.median(times["rm -rf"]), statistics.median(cpu["rm -rf"])
    print(f"\nmedian of {a.rounds}: rm -rf {rm:.2f} s wall, {rmc:.2f} s CPU")
    for tool in tools[1:]:
        va, vac = statistics.median(times[tool]), statistics.median(cpu[tool])
        print(f"{tool}: {va:.2f} s wall, {vac:.2f} s CPU (user + system, workers included); "
              f"{tool} / rm -rf = {va / rm:.2f} (CPU {vac / rmc:.2f})")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
