#!/usr/bin/env python3
"""Benchmark the native ZFS archive against its peers, in one run (zfs-fuse or kernel ZFS).

    python3 bench/zfs/bench_native.py [--gb 2] [--runs 3] [--root /var/tmp/vacate-bench-zfs]

Makes (once per run of this script) a pool on a sparse file under ROOT with a dataset of GB
gigabytes (70 % incompressible "weights", 30 % JSON lines) and its snapshot, then runs,
interleaved, RUNS times each, and prints medians and ratios:
  archive: `vacate archive --zfs DS@SNAP` | peer `zfs send -p DS@SNAP | zstd -T0 -3 > FILE`
  verify:  `vacate verify --verify-pool POOL` (receive into a scratch dataset, compare its file
           list with the one the archive recorded and its data, a full send of it digested,
           with the source snapshot's, sent beside the receive; destroy the scratch) | peer
           `zstd -dc FILE | zfs receive POOL/peer` then `tar -cf - . | sha256sum` in the
           received tree (its destroy timed apart, and shown both ways)
Within a round vacate and its peer alternate which goes first.
The zfs-fuse daemon is shared machine-wide: started only when none runs, stopped only if
started here. Needs root, zfs, zstd, tar, sha256sum.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "src")


def sh(cmd: str, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], check=False,
                       capture_output=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(f"failed ({r.returncode}): {cmd}\n{r.stdout.decode()[-2000:]}"
                         f"{r.stderr.decode()[-2000:]}\n")
        r.check_returncode()
    return r


def timed(cmd: str) -> float:
    t = time.perf_counter()
    sh(cmd)
    return time.perf_counter() - t


def fill(mnt: str, gb: float) -> None:
    total = int(gb * 1e9)
    rnd = random.Random(1)
    n = 0
    left = int(total * 0.7)
    while left > 0:
        with open(os.path.join(mnt, f"model-{n:03d}.safetensors"), "wb") as f:
            k = min(left, 128 << 20)
            f.writelines(os.urandom(min(16 << 20, k - o)) for o in range(0, k, 16 << 20))
            left -= k
        n += 1
    words = ["token", "draft", "eagle", "decode", "hidden", "state", "layer", "prompt"]
    left = total - int(total * 0.7)
    k = 0
    os.makedirs(os.path.join(mnt, "data"))
    while left > 0:
        with open(os.path.join(mnt, "data", f"train-{k:03d}.jsonl"), "w") as f:
            lines = [f'{{"i": {i}, "text": "{" ".join(rnd.choices(words, k=40))}"}}\n'
                     for i in range(20000)]
            text = "".join(lines)
            f.write(text)
            left -= len(text)
        k += 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--root", default="/var/tmp/vacate-bench-zfs")
    a = ap.parse_args()
    root = a.root
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    started = None
    if subprocess.run(["pgrep", "-x", "zfs-fuse"], capture_output=True, check=False
                      ).returncode != 0 and shutil.which("zfs-fuse"):
        os.makedirs("/var/run/zfs", exist_ok=True)
        os.makedirs("/var/lock/zfs", exist_ok=True)
        sh(f"zfs-fuse -p {root}/zfs-fuse.pid")
        for _ in range(40):
            if os.path.exists("/var/run/zfs/zfs_socket"):
                break
            time.sleep(0.25)
        with open(f"{root}/zfs-fuse.pid") as f:
            started = int(f.read())
    pool = f"vb{uuid.uuid4().hex[:8]}"
    img = f"{root}/pool.img"
    with open(img, "wb") as f:
        # sparse: room for the source, the scratch and two peers (a peer may stay "busy", not
        # destroyed, for minutes on zfs-fuse)
        f.truncate(int(a.gb * 6e9) + (1 << 30))
    sh(f"zpool create -m {root}/mnt {pool} {img}")
    env = f"PYTHONPATH={SRC} {sys.executable} -m vacate"
    try:
        ds = f"{pool}/subvol-129-disk-0"
        sh(f"zfs create {ds}")
        fill(f"{root}/mnt/subvol-129-disk-0", a.gb)
        sh(f"zfs snapshot {ds}@retire")
        ref = int(sh(f"zfs get -Hp -o value referenced {ds}@retire").stdout)
        print(f"dataset {ds}@retire: {ref / 1e9:.2f} GB referenced; {a.runs} runs each, "
              "interleaved", flush=True)
        t = {"vacate archive": [], "peer send|zstd": [], "vacate verify": [],
             "peer receive+tar|sha256sum": [], "peer's destroy (untimed above)": []}
        for i in range(a.runs):
            out = f"{root}/out{i}"
            ours = [("vacate archive",
                     f"{env} archive --zfs {ds}@retire --to {out} --name ct --no-progress"),
                    ("vacate verify",
                     f"{env} verify {out}/ct --verify-pool {pool} --no-progress")]
            peer = [("peer send|zstd",
                     f"zfs send -p {ds}@retire | zstd -T0 -3 -q > {root}/peer.zst"),
                    ("peer receive+tar|sha256sum",
                     (f"zstd -dc {root}/peer.zst | zfs receive {pool}/peer{i} && "
                     f"cd $(zfs get -Hp -o value mountpoint {pool}/peer{i}) && "
                     "tar -cf - . | sha256sum")),
                    ("peer's destroy (untimed above)",
                     # a name per round: zfs-fuse may call a dataset busy for minutes
                     (f"for i in $(seq 240); do zfs destroy -r {pool}/peer{i} && break; "
                     "sleep 0.25; done 2>/dev/null; true"))]
            # each pair in turn, who goes first alternating by round
            for k in range(2):
                pair = [ours[k], peer[k]] if i % 2 == 0 else [peer[k], ours[k]]
                for label, cmd in pair:
                    t[label].append(timed(cmd))
            label, cmd = peer[2]
            t[label].append(timed(cmd))
            shutil.rmtree(out)
        med = {k: statistics.median(v) for k, v in t.items()}
        for k, v in t.items():
            print(f"{k:30s} median {med[k]:7.2f} s  runs {' '.join(f'{x:.2f}' for x in v)}")
        print(f"archive: vacate / peer = {med['vacate archive'] / med['peer send|zstd']:.2f}x")
        print(f"verify:  vacate / peer = "
              f"{med['vacate verify'] / med['peer receive+tar|sha256sum']:.2f}x "
              "(vacate's destroy of its scratch timed, the peer's not)")
        with_destroy = med["peer receive+tar|sha256sum"] + med["peer's destroy (untimed above)"]
        print(f"verify:  vacate / (peer + its destroy) = {med['vacate verify'] / with_destroy:.2f}x")
    finally:
        for _ in range(240):       # zfs-fuse says "busy" for a while after heavy use
            if subprocess.run(["zpool", "destroy", "-f", pool], capture_output=True,
                              check=False).returncode == 0:
                break
            time.sleep(0.25)
        else:
            print(f"pool {pool} could not be destroyed: its file {img} is kept", flush=True)
            started = None
        if started:
            subprocess.run(["kill", str(started)], check=False)
            shutil.rmtree(root, ignore_errors=True)
        elif os.path.exists(img) and pool not in sh("zpool list -H -o name").stdout.decode():
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
