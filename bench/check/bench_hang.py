"""``vacate check`` against ``fuser -vm`` and ``lsof`` on a host where a FUSE filesystem does
not answer (its daemon stopped, like a dead ``sshfs``), side by side in one run.

Builds a real ext4 loop volume with one holder (an open fd), and a real FUSE filesystem
(``tests/harness/fusefs.py``) with holders on it: an fd, a cwd, a deleted-open file, and a
process in a mount namespace of its own holding a file and its cwd there; then stops the
daemon and runs every tool R times interleaved against the ext4 volume, each with a limit
(``--limit``, default 20 s): a run past it is killed and counted as a hang. Prints the median
time of the runs that finished, how many hung, and whether the holder was found. Needs root,
``/dev/fuse``, ``fusermount`` and ``mfusepy``. Cleans up everything it started.

    python3 bench/check/bench_hang.py [--runs 3] [--limit 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

from harness.fusefs import fuse_mount, stopped
from harness.holders import Holders
from harness.volumes import make_volume

ENTRY = "import sys; from vacate.cli.main import entry; entry()"


def timed(argv: list[str], limit: float) -> tuple[float | None, str]:
    """(seconds, stdout), or (None, "") when it ran past ``limit`` (killed, with its group)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None, ""
    return time.monotonic() - t0, out


def found(name: str, out: str, pid: int) -> bool:
    if name.startswith("vacate"):
        try:
            return any(c.get("pid") == pid for c in json.loads(out)["consumers"])
        except (ValueError, KeyError):
            return False
    return str(pid) in out.split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", type=float, default=20.0)
    a = ap.parse_args()
    v = make_volume("ext4")
    hv = Holders(v.mountpoint)
    top = tempfile.mkdtemp(prefix="vacate-fuse-")
    mnt = os.path.join(top, "mnt")
    os.mkdir(mnt)
    hf = Holders(mnt)
    try:
        with open(f"{v.mountpoint}/data.bin", "wb") as f:
            f.write(os.urandom(4096))
        holder = hv.fd(f"{v.mountpoint}/data.bin")
        with fuse_mount(mnt) as daemon:
            with open(f"{mnt}/a", "w") as f:
                f.write("remote\n")
            hf.fd(f"{mnt}/a")
            hf.cwd(mnt)
            hf.deleted(f"{mnt}/b")
            flag = os.path.join(hf.tmp, "ns.ready")
            hf.spawn("ns", ["unshare", "-m", "--propagation", "private", "bash", "-c",
                            f"exec 3<'{mnt}/a'; cd '{mnt}' && : > '{flag}' && exec sleep 1d"],
                     ready=flag)
            m = v.mountpoint
            tools = {
                "vacate check --json": [sys.executable, "-c", ENTRY, "check", "--json", m],
                "vacate --no-scan --no-config": [sys.executable, "-c", ENTRY, "check",
                                                 "--json", "--no-scan", "--no-config", m],
                "fuser -vm": ["fuser", "-m", m],
                "lsof": ["lsof", "-t", m],
                "lsof -b": ["lsof", "-b", "-t", m],
            }
            times: dict[str, list[float]] = {k: [] for k in tools}
            hung = dict.fromkeys(tools, 0)
            ok = dict.fromkeys(tools, 0)
            with stopped(daemon):
                time.sleep(0.3)
                for _ in range(a.runs):
                    for name, argv in tools.items():
                        took, out = timed(argv, a.limit)
                        if took is None:
                            hung[name] += 1
                            continue
                        times[name].append(took * 1000)
                        ok[name] += found(name, out, holder)
    finally:
        hf.close()
        hv.close()
        shutil.rmtree(top, ignore_errors=True)
        v.close()
    print(f"# ext4 volume with 1 holder; a FUSE filesystem with 4 holders (fd, cwd, deleted, "
          f"other mount namespace) whose daemon is stopped; {a.runs} interleaved runs, "
          f"limit {a.limit:g} s")
    print(f"{'tool':30} {'median ms':>10} {'hung':>6} {'holder found':>13}")
    for name in tools:
        med = f"{statistics.median(times[name]):.0f}" if times[name] else "-"
        print(f"{name:30} {med:>10} {hung[name]:>3}/{a.runs:<2} {ok[name]:>6}/{a.runs}")


if __name__ == "__main__":
    main()
