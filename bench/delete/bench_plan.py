"""`vacate scan`, `vacate plan --delete item` and the plan's delete step on the bench tree
(bench_delete.py's image: 1,000,000 files in ``item/``), side by side: wall time and peak
memory (the process or its largest child, ``ru_maxrss``), the plan's and the entries file's
size; then ``rm -rf`` of the same tree on a fresh copy.

    sudo python3 bench/delete/bench_plan.py [--files N] [--src SRC]

``--src``: the ``src`` directory of the vacate to measure (default: this checkout's), so an
older commit can be run on the same copy for comparison. Needs root (loop mounts).
"""

from __future__ import annotations

import argparse
import os
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
from vacate.act import apply, delete_step
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--src", default=os.path.join(HERE, "..", "..", "src"))
    ap.add_argument("--no-delete", action="store_true")
    a = ap.parse_args()
    base = bench_delete.base_image(a.files)
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
