"""``vacate check`` against ``fuser -vm MNT`` and ``lsof MNT``, side by side in one run.

Builds a real loop volume (ext4 or btrfs) with holders of every kind (fd, writer, Python mmap,
mapping-only mmap, shared library, cwd, exe, deleted-open, a private mount namespace seeing a
bind of a subdirectory, on btrfs a subvolume fd and mapping), a swap file and a loop device on
it, plus N background sleepers (default 1,000, 50 of them with their cwd on the volume), then
runs every tool R times interleaved and prints medians, ratios to vacate, and how many of the
known holders each one found. Needs root. Cleans up everything it started.

    python3 bench/check/bench_check.py [--fs ext4|btrfs] [--procs 1000] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

from harness.holders import MMAP_ONLY, Holders
from harness.volumes import make_volume

# The console script next to this interpreter (a pyenv shim in front adds ~60 ms of bash).
VACATE = os.path.join(os.path.dirname(sys.executable), "vacate")
if not os.path.exists(VACATE):
    VACATE = "vacate"


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, r


def holders_found(tool: str, r: subprocess.CompletedProcess, known: set[int]) -> tuple[int, int]:
    """(known holders found, all pids reported)."""
    if tool.startswith("("):
        return 0, 0
    if tool.startswith("vacate"):
        doc = json.loads(r.stdout)
        pids = {c["pid"] for c in doc["consumers"] if c["type"] == "process"}
    elif tool == "fuser -vm":
        pids = {int(x) for x in re.findall(r"\d+", r.stdout)}
    else:
        pids = set()
        for line in r.stdout.splitlines()[1:]:
            parts = line.split()
            if len(parts) > 1 and parts[1].isdigit():
                pids.add(int(parts[1]))
    return len(pids & known), len(pids)


def kernel_found(tool: str, r: subprocess.CompletedProcess) -> int:
    if tool.startswith("("):
        return 0
    if tool.startswith("vacate"):
        doc = json.loads(r.stdout)
        return sum(c["type"] in ("swap", "loop-device", "mount") for c in doc["consumers"])
    if tool == "fuser -vm":
        return len(re.findall(r"^\s+\S+\s+(swap|mount)\s", r.stderr, re.MULTILINE)) - 1  # minus MNT
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fs", default="ext4", choices=("ext4", "xfs", "btrfs"))
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    v = make_volume(args.fs)
    h = Holders(v.mountpoint)
    crowd = None
    try:
        m = v.mountpoint
        for d in ("db", "work", "images"):
            os.makedirs(f"{m}/{d}")
        with open(f"{m}/db/data.txt", "w") as f:
            f.write("x\n" * 50000)
        with open(f"{m}/work/app.log", "w") as f:
            f.write("start\n")
        h.fd(f"{m}/db/data.txt")
        h.writer(f"{m}/work/app.log")
        h.py_mmap(f"{m}/db/data.txt")
        h.mmap_only(f"{m}/db/data.txt")
        h.shared_lib(f"{m}/lib")
        h.cwd(f"{m}/work")
        h.exe(f"{m}/bin")
        h.deleted(f"{m}/db/scratch.tmp")
        h.private_ns_bind(f"{m}/work", "app.log")
        if args.fs == "btrfs":
            subprocess.run(["btrfs", "-q", "subvolume", "create", f"{m}/subvol"], check=True)
            with open(f"{m}/subvol/f", "w") as f:
                f.write("y" * 8192)
            h.sh("subvolfd", f"exec 3<'{m}/subvol/f'")
            h.spawn("subvolmmap", [sys.executable, "-c", MMAP_ONLY, f"{m}/subvol/f",
                                   h._flag("subvolmmap")], ready=h._flag("subvolmmap"))
        h.swapfile(f"{m}/swapfile", args.fs, mb=16)
        h.loop_device(f"{m}/images/nested.img")
        known = {p.pid for p in h.procs.values()}
        # the crowd: N sleepers in one process group, 50 of them with cwd on the volume
        n_on = min(50, args.procs)
        crowd = subprocess.Popen(
            ["bash", "-c", (f"cd '{m}/work' && for i in $(seq {n_on}); do sleep 1d & done; "
                           f"cd / && for i in $(seq {args.procs - n_on}); do sleep 1d & done; "
                           "wait")], start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            kids = subprocess.run(["pgrep", "-c", "-g", str(crowd.pid)], capture_output=True,
                                  text=True, check=False).stdout.strip()
            if kids.isdigit() and int(kids) >= args.procs:
                break
            time.sleep(0.2)
        crowd_on = {int(p) for p in subprocess.run(
            ["pgrep", "-g", str(crowd.pid), "sleep"], capture_output=True, text=True,
            check=False).stdout.split()
            if os.path.realpath(f"/proc/{p}/cwd").startswith(m)}
        known |= crowd_on
        nproc = len([p for p in os.listdir("/proc") if p.isdigit()])
        vac = [VACATE, "check", "--json"]
        tools = {
            "vacate check --no-scan": vac + ["--no-scan", m],
            "vacate (live+kernel only)": vac + ["--no-scan", "--no-config", m],
            "vacate check": vac + [m],
            "fuser -vm": ["fuser", "-vm", m],
            "lsof": ["lsof", "-n", m],
            "(vacate --version: startup)": [VACATE, "--version"],
        }
        times: dict[str, list[float]] = {t: [] for t in tools}
        last: dict[str, subprocess.CompletedProcess] = {}
        for _ in range(args.runs):
            for name, cmd in tools.items():   # interleaved: one of each per round
                dt, r = timed(cmd)
                times[name].append(dt)
                last[name] = r
        base = statistics.median(times["vacate check --no-scan"])
        print(f"# {args.fs}, {nproc} processes on the host, {len(known)} known holder "
              f"processes (+ swap file, loop device, private-namespace bind), "
              f"{args.runs} interleaved runs")
        print(f"{'tool':26} {'median ms':>10} {'ratio':>7} {'holders found':>14} "
              f"{'pids reported':>14} {'kernel users':>13}")
        for name in tools:
            med = statistics.median(times[name])
            found, reported = holders_found(name, last[name], known)
            print(f"{name:28} {med * 1000:10.1f} {med / base:7.2f} "
                  f"{found:>8}/{len(known):<5} {reported:>14} {kernel_found(name, last[name]):>13}")
        return 0
    finally:
        if crowd is not None:
            try:
                os.killpg(crowd.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            crowd.wait()
        h.close()
        v.close()


if __name__ == "__main__":
    sys.exit(main())
