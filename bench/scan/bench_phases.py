"""The pieces of `vacate scan`, measured in-process on the bench tree (root; the tree of
bench_scan_tree.py, mounted as bench_scan.py does; ``--tree 1`` for the first one), for the
figures in BENCHMARKS.md that no whole-command run shows:

    python3 bench/scan/bench_phases.py loops               # the walk: C vs Python, 1 process
    python3 bench/scan/bench_phases.py workers --rounds 3  # walk with 2/3/4 walkers, warm and cold
    python3 bench/scan/bench_phases.py recognise           # recognising right after a walk, and
                                                           # again after 20 s idle (DAMON)
    python3 bench/scan/bench_phases.py processes --rounds 3 --counts 2 4 6
                                  # recognising side by side in 2/4/6 processes (and in one),
                                  # warm and cold (cold: right after a cold walk), interleaved
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_scan_tree as tree

from vacate.observing.collectors import walk, walk_descent
from vacate.observing.model.inventory import Item


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def loops(mnt: str, rounds: int) -> None:
    """The walk in one process, its descent in C (``walk_descent.CWalker``) and in Python
    (``walk_loops.Walker``): CPU seconds."""
    c = walk_descent.fastwalk
    if c is None:
        sys.exit("the C loop is not built")
    res: dict[str, list[float]] = {"C": [], "Python": []}
    try:
        for _ in range(rounds):
            for name, mod in (("C", c), ("Python", None)):
                walk_descent.fastwalk = mod
                t = cpu()
                walk.walk(mnt, workers=1)
                res[name].append(cpu() - t)
    finally:
        walk_descent.fastwalk = c
    for name, v in res.items():
        print(f"{name} walk, one process: median {statistics.median(v):.2f} CPU-s "
              f"({' '.join(f'{x:.2f}' for x in v)})")


def workers(mnt: str, rounds: int) -> None:
    for cold in (False, True):
        res: dict[int, list[float]] = {}
        for _ in range(rounds):
            for n in (2, 3, 4):
                if cold:
                    drop_caches()
                else:
                    walk.walk(mnt, workers=n)          # this run's cache, untimed
                t = time.perf_counter()
                walk.walk(mnt, workers=n)
                res.setdefault(n, []).append(time.perf_counter() - t)
        for n, v in res.items():
            print(f"{'cold' if cold else 'warm'} walk, {n} walkers: median "
                  f"{statistics.median(v):.2f} s ({' '.join(f'{x:.2f}' for x in v)})")
    print(f"load average: {os.getloadavg()[0]:.1f}")


def recognise(mnt: str, rounds: int) -> None:
    from vacate.observing import recognise as rec

    w = walk.walk(mnt)
    items = tuple(Item("item:" + os.path.relpath(p, mnt), p, None, d, s) for p, d, s in w.top)
    for label, pause in (("right after the last", 0), ("after 20 s idle", 20)):
        v = []
        for _ in range(rounds):
            rec.annotate(items, w.dirs)            # warm what it reads
            time.sleep(pause)
            t = time.perf_counter()
            rec.annotate(items, w.dirs)
            v.append(time.perf_counter() - t)
        print(f"recognising, {label}: median {statistics.median(v):.2f} s "
              f"({' '.join(f'{x:.2f}' for x in v)})")


def processes(mnt: str, rounds: int, counts: list[int]) -> None:
    from vacate.observing import recognise as rec
    from vacate.observing.recognise import sidebyside

    def scan() -> tuple:
        w = walk.walk(mnt)
        return tuple(Item("item:" + os.path.relpath(p, mnt), p, None, d, s)
                     for p, d, s in w.top), w.dirs

    items, dirs = scan()
    one = rec.annotate(items, dirs, parallel=False)
    real = sidebyside.processes
    try:
        for cold in (False, True):
            res: dict[int, list[float]] = {}
            for _ in range(rounds):
                for n in [1, *counts]:
                    sidebyside.processes = lambda cpu_bound=False, n=n: n
                    if cold:
                        drop_caches()
                        items, dirs = scan()
                    else:
                        rec.annotate(items, dirs, parallel=n > 1)    # this run's cache
                    t = time.perf_counter()
                    got = rec.annotate(items, dirs, parallel=n > 1)
                    res.setdefault(n, []).append(time.perf_counter() - t)
                    if got != one:
                        sys.exit(f"{n} processes: not the result of one")
            for n, v in res.items():
                print(f"{'cold' if cold else 'warm'} recognising, {n} processes: median "
                      f"{statistics.median(v):.2f} s ({' '.join(f'{x:.2f}' for x in v)})")
    finally:
        sidebyside.processes = real
    print(f"load average: {os.getloadavg()[0]:.1f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("loops", "workers", "recognise", "processes"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--counts", type=int, nargs="+", default=[2, 4, 6],
                    help="processes: the numbers of processes to compare")
    ap.add_argument("--tree", type=int, choices=sorted(tree.TREES), default=tree.DEFAULT.version,
                    help="1: the first tree (zero-filled weights); 2: the realistic hub")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (loop mount, drop_caches)")
    t = tree.TREES[a.tree]
    was_mounted = tree.mounted(t)
    mnt = tree.mount(t)
    try:
        if a.what == "processes":
            processes(mnt, a.rounds, a.counts)
        else:
            {"loops": loops, "workers": workers, "recognise": recognise}[a.what](mnt, a.rounds)
    finally:
        if not was_mounted:
            tree.umount(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
