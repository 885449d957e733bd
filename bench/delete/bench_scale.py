"""`vacate scan`, `vacate plan … --delete item` and the plan's delete step on a tree of N
entries (10,000,000 by default): peak memory (``ru_maxrss`` of the process or its largest
child), wall time, the plan's and the entries file's size.

    sudo python3 bench/delete/bench_scale.py [--entries N] [--keep]

The tree is built once into ``item/`` of a sparse ext4 image (cached in
/var/tmp/vacate-bench/scale-N.img, built with ``mknod``: empty files, so the image holds
little more than inode tables and directories, ~0.5 GB a million entries): 100 top-level
directories, each with 60 directories of 100 leaf directories of 16 files -- the 1M bench
tree's ~16 entries a directory. The image is mounted read-write and the delete removes the
tree: the image is rebuilt for the next run (``--keep``: measure scan and plan only).
Needs root (loop mounts).
"""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
import tempfile

import bench_plan

CACHE = "/var/tmp/vacate-bench"
TOP, MID, FILES = 100, 60, 16


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def shape(entries: int) -> int:
    """Leaf directories per middle directory for about ``entries`` entries."""
    return max(1, round((entries / (TOP * MID) - 1) / (FILES + 1)))


def build(img: str, entries: int) -> int:
    leaves = shape(entries)
    with open(img, "wb") as f:
        f.truncate(max(4 << 30, entries * 1200))
    sh("mkfs.ext4", "-q", "-F", "-N", str(int(entries * 1.1) + 1000), "-L", "vacatescale", img)
    mnt = tempfile.mkdtemp(prefix="vacate-scalebuild-")
    sh("mount", "-o", "loop,noatime", img, mnt)
    n = 0
    mode = 0o644 | stat.S_IFREG
    try:
        os.mkdir(os.path.join(mnt, "item"))
        for t in range(TOP):
            tp = os.path.join(mnt, "item", f"t{t:03d}")
            os.mkdir(tp)
            n += 1
            for m in range(MID):
                mp = os.path.join(tp, f"m{m:03d}")
                os.mkdir(mp)
                n += 1
                for leaf in range(leaves):
                    lp = os.path.join(mp, f"leaf-{leaf:04d}")
                    os.mkdir(lp)
                    fd = os.open(lp, os.O_RDONLY | os.O_DIRECTORY)
                    try:
                        for i in range(FILES):
                            os.mknod(f"file-{i:02d}.bin", mode, dir_fd=fd)
                    finally:
                        os.close(fd)
                    n += 1 + FILES
            if t % 10 == 9:
                print(f"  {n} entries", flush=True)
    finally:
        os.sync()
        sh("umount", mnt)
        os.rmdir(mnt)
    return n + 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=10_000_000)
    ap.add_argument("--keep", action="store_true", help="scan and plan only, no delete")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--src", default=os.path.join(os.path.dirname(__file__), "..", "..", "src"))
    a = ap.parse_args()
    img = os.path.join(CACHE, f"scale-{a.entries}.img")
    os.makedirs(CACHE, exist_ok=True)
    if not os.path.exists(img + ".done"):
        n = build(img, a.entries)
        with open(img + ".done", "w") as f:
            f.write(f"{n}\n")
        print(f"built {n} entries in {img} ({int(sh('du', '-k', img).split()[0]) >> 10} MB "
              "on disk)", flush=True)
    if a.build_only:
        return 0
    mnt = tempfile.mkdtemp(prefix="vacate-scalerun-")
    out = tempfile.mkdtemp(prefix="vacate-scaleplan-")
    sh("mount", "-o", "loop", img, mnt)
    try:
        print(f"load {os.getloadavg()[0]:.1f}", flush=True)
        w, mb, _ = bench_plan.timed(a.src, bench_plan.CLI, "scan", mnt, "--json")
        print(f"scan            {w:7.2f} s {mb:7.0f} MB", flush=True)
        plan = os.path.join(out, "retire.plan")
        w, mb, _ = bench_plan.timed(a.src, bench_plan.CLI, "plan", mnt, "--delete", "item",
                                    "-o", plan)
        side = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)
                   if f.startswith("vacate-entries-"))
        print(f"plan            {w:7.2f} s {mb:7.0f} MB  plan {os.path.getsize(plan) / 1e6:.2f} MB"
              f"  entries file {side / 1e6:.1f} MB", flush=True)
        if not a.keep:
            w, mb, text = bench_plan.timed(a.src, bench_plan.DELETE, plan)
            print(f"delete step     {w:7.2f} s {mb:7.0f} MB  {text.strip()[:80]}", flush=True)
        print(f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        subprocess.run(["umount", mnt], check=False)
        os.rmdir(mnt)
        subprocess.run(["rm", "-rf", out], check=False)
    if not a.keep:          # the tree is gone: the next run builds it again
        os.unlink(img + ".done")
        os.unlink(img)
    return 0


if __name__ == "__main__":
    sys.exit(main())
