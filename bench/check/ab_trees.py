"""``vacate check --json --no-scan --no-config`` from two source trees, interleaved, against
``fuser -vm``: was a change slower? The machine is shared and noisy; runs alternate so both
trees see the same noise, and the ratios to ``fuser`` are what to compare.

A real ext4 loop volume with holders (fd, cwd, deleted-open, a private mount namespace's bind)
and a crowd of 1,000 sleepers (50 with their cwd on the volume). Needs root.

    git archive REV src | tar -x -C /tmp/before
    python3 bench/check/ab_trees.py /tmp/before/src src [--rounds 25]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

from harness.holders import Crowd, Holders
from harness.volumes import make_volume

ENTRY = "import sys; sys.path.insert(0, %r); from vacate.cli.main import entry; entry()"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=25)
    a = ap.parse_args()
    trees = {"before": os.path.abspath(a.before), "after": os.path.abspath(a.after)}
    for src in trees.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", src], check=True,
                       capture_output=True)
    v = make_volume("ext4")
    h = Holders(v.mountpoint)
    crowd = None
    try:
        m = v.mountpoint
        with open(f"{m}/f", "w") as f:
            f.write("x")
        os.makedirs(f"{m}/sub")
        with open(f"{m}/sub/g", "w") as f:
            f.write("x")
        h.fd(f"{m}/f")
        h.deleted(f"{m}/gone")
        h.cwd(m)
        h.private_ns_bind(f"{m}/sub", "g")
        crowd = Crowd(m, 50, 950)
        runs: dict[str, list[float]] = {"before": [], "after": [], "fuser -vm": []}
        for _ in range(a.rounds):
            for name, vals in runs.items():
                argv = (["fuser", "-vm", m] if name not in trees else
                        [sys.executable, "-S", "-c", ENTRY % trees[name], "check", "--json",
                         "--no-scan", "--no-config", m])
                t0 = time.perf_counter()
                r = subprocess.run(argv, capture_output=True, check=False)
                vals.append((time.perf_counter() - t0) * 1000)
                if name in trees and r.returncode != 1:
                    raise SystemExit(f"{name}: exit {r.returncode}: {r.stderr[-400:]!r}")
    finally:
        if crowd is not None:
            crowd.close()
        h.close()
        v.close()
    base = statistics.median(runs["fuser -vm"])
    print(f"# {a.rounds} interleaved rounds; before={trees['before']} after={trees['after']}")
    for name, vals in runs.items():
        med = statistics.median(vals)
        print(f"{name:10} median {med:6.1f} ms  min {min(vals):6.1f} ms  ratio {med / base:.2f}")


if __name__ == "__main__":
    main()
