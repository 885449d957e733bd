"""How long ``vacate browse OBS`` takes to show its first screen, in a real terminal (tmux,
80x24), and the process's peak memory after one Enter into the largest directory. For a
real tree, e.g. the 1M-entry image of bench/delete:

    mount -o ro,loop /var/tmp/vacate-bench/delete-1000000.img /mnt/b1m
    PYTHONPATH=src python3 -m vacate observe /mnt/b1m -o /tmp/b1m.json --files
    PYTHONPATH=src python3 bench/browse/bench_open.py /tmp/b1m.json --runs 3

Wall time from starting the command until the pane shows the listing (polled every 10 ms);
medians over the runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SESSION = "vacate-bench-open"


def _pane() -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", SESSION], capture_output=True,
                          text=True, check=False).stdout


def one(obs: str) -> tuple[float, int]:
    """(seconds to the first screen, peak MB after Enter into the first entry)."""
    subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, check=False)
    t0 = time.monotonic()
    subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, "-x", "80", "-y", "24",
                    f"cd {ROOT} && PYTHONPATH=src exec python3 -m vacate browse {obs}"],
                   check=True)
    while "sort:" not in _pane():
        if time.monotonic() - t0 > 120:
            raise SystemExit("no screen in 120 s:\n" + _pane())
        time.sleep(0.01)
    opened = time.monotonic() - t0
    pid = subprocess.run(["tmux", "list-panes", "-t", SESSION, "-F", "#{pane_pid}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    time.sleep(1.0)
    subprocess.run(["tmux", "send-keys", "-t", SESSION, "Enter"], check=True)
    time.sleep(1.5)
    with open(f"/proc/{pid}/status") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, check=False)
    return opened, hwm // 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("obs", help="an observation (vacate observe PATH -o OBS [--files])")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    got = [one(os.path.abspath(args.obs)) for _ in range(args.runs)]
    opens, peaks = [g[0] for g in got], [g[1] for g in got]
    print(f"open: {[round(x, 2) for x in opens]} s, median {statistics.median(opens):.2f} s")
    print(f"peak: {peaks} MB, median {statistics.median(peaks):g} MB")
    print(f"load: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
