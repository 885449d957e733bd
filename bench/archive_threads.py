#!/usr/bin/env python3
"""Where ``vacate archive``'s CPU goes, per thread: one in-process archive of the bench tree
(or a part of it), CPU seconds of the main thread, each lane and the rest (zstd's workers).

    python3 bench/archive_threads.py [--sub models|data|checkpoints] [--runs 3]
                                     [--src OTHER_CHECKOUT/src ...]

Run ``bench/archive_bench.py`` once first (it builds the tree). With several ``--src`` the
checkouts run interleaved (A/B comparisons on a noisy machine); medians are printed. Each run
is a child process; the tree is read once before each (warm page cache), outside the time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CHILD = r'''
import os, sys, threading, time, shutil
src, tree, out = sys.argv[1:4]
sys.path.insert(0, src)
from vacate.archive import writer as W
from vacate.archive.target import LocalTarget
tick = os.sysconf("SC_CLK_TCK")
names = {threading.get_native_id(): "main"}
orig = W._Writer.__init__
def init(self, *a, **k):
    orig(self, *a, **k)
    for n in ("hash_lane", "out_lane", "write_lane", "finisher"):
        names[getattr(self, n).t.native_id] = n
W._Writer.__init__ = init
cpu = {}
def sample():
    for tid in os.listdir("/proc/self/task"):
        try:
            f = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu[int(tid)] = (int(f[11]) + int(f[12])) / tick
stop = False
def watch():
    while not stop:
        sample()
        time.sleep(0.02)
shutil.rmtree(out, ignore_errors=True)
buf = bytearray(1 << 20)
for d, _, fs in os.walk(tree):
    for f in fs:
        fd = os.open(os.path.join(d, f), os.O_RDONLY)
        while os.readv(fd, [buf]):
            pass
        os.close(fd)
m = threading.Thread(target=watch, daemon=True)
m.start()
names[m.native_id] = "watcher"
sample()
base = dict(cpu)
t0, c0 = time.monotonic(), time.process_time()
W.archive([tree], LocalTarget(os.path.join(out, "t")), "t")
wall, total = time.monotonic() - t0, time.process_time() - c0
stop = True
m.join()
agg = {"wall": wall, "cpu": total}
for tid, c in cpu.items():
    n = names.get(tid, "zstd+other")
    agg[n] = agg.get(n, 0) + c - base.get(tid, 0)
shutil.rmtree(out, ignore_errors=True)
print(" ".join(f"{k}={v:.3f}" for k, v in agg.items()))
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/var/tmp/vacate-bench-archive")
    ap.add_argument("--sub", default="", help="a folder of the tree (models, data, ...)")
    ap.add_argument("--runs", type=int, default=3)
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    ap.add_argument("--src", action="append", help=f"a checkout's src (default {here})")
    a = ap.parse_args()
    tree = os.path.join(a.root, "tree", a.sub) if a.sub else os.path.join(a.root, "tree")
    if not os.path.isdir(tree):
        sys.exit(f"{tree}: no such tree; run bench/archive_bench.py first")
    srcs = a.src or [here]
    res: dict[str, dict[str, list[float]]] = {s: {} for s in srcs}
    print(f"{tree}; load {os.getloadavg()[0]:.1f}")
    for i in range(a.runs):
        for s in srcs:                              # interleaved
            r = subprocess.run([sys.executable, "-c", CHILD, s, tree,
                                os.path.join(a.root, "out", "threads")],
                               capture_output=True, text=True, check=True)
            vals = dict(kv.split("=") for kv in r.stdout.split())
            for k, v in vals.items():
                res[s].setdefault(k, []).append(float(v))
            print(f"  run {i + 1} {s}: {r.stdout.strip()} (load {os.getloadavg()[0]:.1f})",
                  flush=True)
    print("\nmedians (seconds):")
    for s, d in res.items():
        print(f"  {s}: " + " ".join(f"{k}={statistics.median(v):.2f}" for k, v in d.items()))


if __name__ == "__main__":
    main()
