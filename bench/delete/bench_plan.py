"""`vacate scan`, `vacate plan --delete item` and the plan's delete step on the bench tree
(bench_delete.py's image: 1,000,000 files in ``item/``), side by side: wall time and peak
memory (the process or its largest child, ``ru_maxrss``), the plan's and the entries file's
size; then ``rm -rf`` of the same tree on a fresh copy.

    sudo python3 bench/delete/bench_plan.py [--files N] [--src SRC]
    sudo python3 bench/delete/bench_plan.py --side-by-side R

``--src``: the ``src`` directory of the vacate to measure (default: this checkout's), so an
older commit can be run on the same copy for comparison. ``--side-by-side R``: instead, R
rounds of ``scan --json`` and ``plan --delete item`` on one read-only mount of the image
(the cache warm after the first round, which is left out), alternating which goes first;
medians and the ratio plan / scan. Needs root (loop mounts).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import bench_delete

HERE = os.path.dirname(os.path.abspath(__file__))

CLI = """
import resource, sys
from vacate.cli.main import main
rc = main(sys.argv[1:])
r = resource.getrusage
print("MAXRSS", max(r(resource.RUSAGE_SELF).ru_maxrss, r(resource.RUSAGE_CHILDREN).ru_maxrss),
      rc, file=sys.stderr)
"""

DELETE = """
import resource, sys
from vacate.act import delete_step
from vacate.flow import apply
from vacate.act.base import Context
plan, _ = apply.load(sys.argv[1])
step = next(s for s in plan.steps if s.kind == "delete")
try:
    ctx = Context(plan=plan, plan_path=sys.argv[1])
except TypeError:           # before entries files: the plan holds the entries
    ctx = Context(plan=plan)
out = delete_step.run(step, ctx)
print(out.status, out.detail)
r = resource.getrusage
print("MAXRSS", max(r(resource.RUSAGE_SELF).ru_maxrss, r(resource.RUSAGE_CHILDREN).ru_maxrss),
      file=sys.stderr)
"""


def timed(src: str, code: str, *args: str) -> tuple[float, float, str]:
    """Wall seconds, peak MB and stdout of ``python -c code args``."""
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": src}, check=False)
    wall = time.perf_counter() - t
    line = [x for x in p.stderr.splitlines() if x.startswith("MAXRSS")]
    if not line:
        raise SystemExit(p.stderr[-3000:])
    return wall, int(line[0].split()[1]) / 1024, p.stdout


def side_by_side(base: str, src: str, rounds: int, baseline: str | None) -> None:
    """``scan`` and ``plan --delete item`` of the same read-only mount, interleaved (and the
    ``plan`` of the vacate in ``baseline``, a ``src`` directory, where one is given)."""
    mnt = tempfile.mkdtemp(prefix="vacate-benchplan-ro-")
    out = tempfile.mkdtemp(prefix="vacate-benchplan-")
    subprocess.run(["mount", "-o", "loop,ro", base, mnt], check=True)
    argv = {"scan": ("scan", mnt, "--json"),
            "plan": ("plan", mnt, "--delete", "item", "-o", os.path.join(out, "retire.plan"))}
    srcs = {"scan": src, "plan": src}
    if baseline:
        argv["baseline plan"] = argv["plan"]
        srcs["baseline plan"] = baseline
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in argv}
    cpu: dict[str, list[float]] = {k: [] for k in argv}
    try:
        for i in range(rounds + 1):
            order = list(argv) if i % 2 == 0 else list(argv)[::-1]
            for what in order:
                c0 = _children_cpu()
                w, mb, _ = timed(srcs[what], CLI, *argv[what])
                c = _children_cpu() - c0
                if i:
                    runs[what].append((w, mb))
                    cpu[what].append(c)
                print(f"round {i or '0 (warm-up)'}  {what}  {w:6.2f} s {c:6.2f} s CPU "
                      f"{mb:5.0f} MB  "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        subprocess.run(["umount", mnt], check=False)
        os.rmdir(mnt)
        subprocess.run(["rm", "-rf", out], check=False)
    med = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    print(f"\nmedian of {rounds}: scan {med['scan']:.2f} s, plan {med['plan']:.2f} s, "
          f"plan / scan = {med['plan'] / med['scan']:.2f}; peak MB scan "
          f"{max(m for _, m in runs['scan']):.0f}, plan {max(m for _, m in runs['plan']):.0f}")
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    print("median CPU (user + system, its processes included): " + ", ".join(
        f"{k} {v:.2f} s" for k, v in mcpu.items()) + f"; plan / scan = "
        f"{mcpu['plan'] / mcpu['scan']:.2f}" + (
            f", baseline plan / scan = {mcpu['baseline plan'] / mcpu['scan']:.2f}"
            if baseline else ""))
    if baseline:
        b = med["baseline plan"]
        print(f"baseline plan {b:.2f} s, baseline / scan = {b / med['scan']:.2f}, "
              f"plan / baseline plan = {med['plan'] / b:.2f}; peak MB baseline "
              f"{max(m for _, m in runs['baseline plan']):.0f}")


def _children_cpu() -> float:
    """CPU seconds (user + system) of the processes this one has waited for, and theirs."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--src", default=os.path.join(HERE, "..", "..", "src"))
    ap.add_argument("--no-delete", action="store_true")
    ap.add_argument("--side-by-side", type=int, default=0, metavar="R")
    ap.add_argument("--baseline-src", help="with --side-by-side: another vacate's plan too")
    a = ap.parse_args()
    base = bench_delete.base_image(a.files)
    if a.side_by_side:
        side_by_side(base, a.src, a.side_by_side, a.baseline_src)
        return 0
    c = bench_delete.Copy(base)
    out = tempfile.mkdtemp(prefix="vacate-benchplan-")
    try:
        plan = os.path.join(out, "retire.plan")
        w, mb, _ = timed(a.src, CLI, "scan", c.mnt, "--json")
        print(f"scan            {w:7.2f} s {mb:7.0f} MB", flush=True)
        w, mb, _ = timed(a.src, CLI, "plan", c.mnt, "--delete", "item", "-o", plan)
        side = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)
                   if f.startswith("vacate-entries-"))
        print(f"plan            {w:7.2f} s {mb:7.0f} MB  plan {os.path.getsize(plan) / 1e6:.2f} MB"
              f"  entries file {side / 1e6:.1f} MB", flush=True)
        if not a.no_delete:
            w, mb, text = timed(a.src, DELETE, plan)
            print(f"delete step     {w:7.2f} s {mb:7.0f} MB  {text.strip()[:80]}", flush=True)
    finally:
        c.close()
        subprocess.run(["rm", "-rf", out], check=False)
    if not a.no_delete:
        c = bench_delete.Copy(base)
        try:
            subprocess.run(["find", c.item, "-printf", ""], check=True)    # the same warm-up
            t = time.perf_counter()
            subprocess.run(["rm", "-rf", c.item], check=True)
            print(f"rm -rf          {time.perf_counter() - t:7.2f} s", flush=True)
        finally:
            c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
