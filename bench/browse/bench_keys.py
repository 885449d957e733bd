"""Keypress latency of ``vacate browse`` for real: the command run in tmux (80x24) on the
1M-entry observation bench_browse.py generates, with its full file listing beside it
(``OBS.files``: a directory's files listed), each key sent alone (``tmux send-keys``)
and the pane read back (``capture-pane``) until it has stopped changing. Two figures per key:

- in the app: from the key event's arrival to the last screen update it caused, written to
  the terminal (``VACATE_BROWSE_TIMING``, :mod:`vacate.browse.timing`);
- end to end: from just before ``send-keys`` to the last change of the pane tmux shows
  (polled every ~2 ms; includes starting the tmux client for send-keys, ~2-4 ms, printed
  as ``tmux alone``: one capture-pane).

    PYTHONPATH=src python3 bench/browse/bench_keys.py [--keep OBS] [--runs N]

Medians over N runs of the sequence (default 3); each run starts the command afresh, so
"Enter wide (first)" is the first visit of the directory of 100,000 entries each time
(and "Enter flat (first)" of the directory of 100,000 files, read from the listing).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..", "src")
sys.path.insert(0, HERE)

from bench_browse import generate, generate_files

# (label, tmux key): at the end of /data sorted by size is flat; sorted by name, wide is
# last; s keeps it selected, sorted by size
SEQUENCE = [
    ("j", "j"), ("k", "k"), ("PgDn", "PageDown"), ("Home", "Home"), ("End", "End"),
    ("n (sort by name)", "n"), ("End", "End"), ("s (sort by size)", "s"),
    ("Enter wide (first)", "Enter"),
    ("wide: j", "j"), ("wide: PgDn", "PageDown"), ("wide: End", "End"), ("wide: Home", "Home"),
    ("wide: n", "n"), ("wide: M", "M"), ("wide: a", "a"), ("wide: s", "s"),
    ("Backspace (up)", "BSpace"), ("Enter wide (again)", "Enter"), ("Backspace (again)", "BSpace"),
    # flat (100,000 files) is first by name; s keeps it selected
    ("n", "n"), ("Home", "Home"), ("s", "s"),
    ("Enter flat (first)", "Enter"), ("flat: j", "j"), ("flat: End", "End"),
    ("flat: Home", "Home"), ("flat: n", "n"), ("flat: M", "M"), ("flat: a", "a"),
    ("flat: s", "s"), ("flat: Space (the menu)", "Space"), ("k (marked keep)", "k"),
    ("Backspace", "BSpace"),
]
SETTLE = 0.4       # the pane unchanged this long: the key's answer is complete


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def pane(name: str) -> str:
    return tmux("capture-pane", "-p", "-t", name)


def one_run(obs: str, log: str, name: str) -> tuple[list[tuple[str, float]], float]:
    cmd = (f"VACATE_BROWSE_TIMING={shlex.quote(log)} PYTHONPATH={shlex.quote(SRC)} "
           f"{shlex.quote(sys.executable)} -m vacate browse {shlex.quote(obs)}; sleep 30")
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)
    tmux("new-session", "-d", "-s", name, "-x", "80", "-y", "24", cmd)
    try:
        end = time.monotonic() + 60
        while "sort:" not in pane(name):
            if time.monotonic() > end:
                raise SystemExit("the screen never showed:\n" + pane(name))
            time.sleep(0.05)
        time.sleep(1.0)
        t = time.monotonic()
        for _ in range(20):
            pane(name)
        tmux_ms = (time.monotonic() - t) / 20 * 1000
        out = []
        for label, key in SEQUENCE:
            before = pane(name)
            t0 = time.monotonic()
            tmux("send-keys", "-t", name, key)
            last, changed = before, None
            while True:
                now = pane(name)
                t = time.monotonic()
                if now != last:
                    last, changed = now, t
                elif t - (changed or t0) > SETTLE:
                    break
            out.append((label, ((changed or t0) - t0) * 1000 if changed else float("nan")))
        tmux("send-keys", "-t", name, "q")
        return out, tmux_ms
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)


def in_app(log: str) -> list[float]:
    """The last update after each key, per key in the order sent, milliseconds."""
    last: dict[int, float] = {}
    with open(log) as f:
        for line in f:
            n, _key, ms = line.rstrip("\n").split("\t")
            last[int(n)] = float(ms)
    return [last.get(i + 1, float("nan")) for i in range(len(SEQUENCE))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", help="the observation (generated there when missing)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    obs = args.keep or os.path.join(tmp, "big.obs.json")
    if not os.path.exists(obs):
        generate(obs)
    if not os.path.exists(obs + ".files"):
        generate_files(obs)
    ends, apps, alone = [], [], []
    for r in range(args.runs):
        log = os.path.join(tmp, f"keys{r}.log")
        got, tmux_ms = one_run(obs, log, f"vacate-bench-keys-{os.getpid()}")
        ends.append([ms for _, ms in got])
        apps.append(in_app(log))
        alone.append(tmux_ms)
    alone = statistics.median(alone)
    rows = []
    for i, (label, _) in enumerate(SEQUENCE):
        rows.append({"key": label,
                     "in_app_ms": round(statistics.median(a[i] for a in apps), 1),
                     "end_to_end_ms": round(statistics.median(e[i] for e in ends), 1)})
    print(json.dumps({"runs": args.runs, "tmux_alone_ms": round(alone, 1), "keys": rows},
                     indent=1))


if __name__ == "__main__":
    main()
