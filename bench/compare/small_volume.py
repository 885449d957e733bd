"""This checkout's vacate against another checkout's, interleaved, on a small real volume:
`check --no-scan` and `check` with the configured users read, and `scan --json` (what the
bench scripts' peer rows leave out). Medians of N rounds, the order alternating each round.

    sudo flock /tmp/vacate-bench.lock nice -n -10 python3 bench/compare/small_volume.py \\
        --baseline-src /tmp/vacate-before/src --rounds 9

(root: a loop-mounted ext4 volume is made and removed; both checkouts' C modules built, as
bench/build_c.py does.)
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

from harness.volumes import make_volume


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-src", required=True, metavar="DIR",
                    help="the src/ of the checkout to compare with")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    srcs = {"this": os.path.join(HERE, "..", "..", "src"), "baseline": args.baseline_src}
    v = make_volume("ext4")
    m = v.mountpoint
    try:
        os.makedirs(f"{m}/models/q")
        with open(f"{m}/models/q/w.bin", "wb") as f:
            f.write(os.urandom(1 << 20))
        for i in range(2000):
            os.makedirs(f"{m}/data/d{i % 50}", exist_ok=True)
            with open(f"{m}/data/d{i % 50}/f{i}", "w") as f:
                f.write("x")
        variants = {"check --no-scan (+config)": ["check", "--json", "--no-scan", m],
                    "check (+walk, +config)": ["check", "--json", m],
                    "scan --json": ["scan", "--json", m]}
        times: dict[tuple[str, str], list[float]] = {(s, k): [] for s in srcs for k in variants}
        for r in range(args.rounds):
            order = list(srcs) if r % 2 == 0 else list(reversed(srcs))
            for k, argv in variants.items():
                for s in order:
                    env = dict(os.environ, PYTHONPATH=srcs[s])
                    t0 = time.perf_counter()
                    subprocess.run([sys.executable, "-m", "vacate", *argv], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   check=False)
                    times[(s, k)].append(time.perf_counter() - t0)
        print(f"| command | this ms | baseline ms | this ÷ baseline |  ({args.rounds} rounds)")
        print("|---|---:|---:|---:|")
        for k in variants:
            a = statistics.median(times[("this", k)])
            b = statistics.median(times[("baseline", k)])
            print(f"| {k} | {a * 1000:.1f} | {b * 1000:.1f} | {a / b:.2f} |")
    finally:
        v.close()


if __name__ == "__main__":
    main()
