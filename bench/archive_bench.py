#!/usr/bin/env python3
"""Benchmark ``vacate archive`` / ``vacate verify`` against their peers, in one run.

    python3 bench/archive_bench.py [--gb 2.5] [--runs 3] [--root /var/tmp/vacate-bench-archive]
                                   [--only archive|verify|bare]

Builds (once) a tree of incompressible "weights" plus compressible JSON (JSONL and many small
files) under ROOT/tree, then runs, interleaved, RUNS times each:
  archive: vacate archive | bare `tar -cf - | zstd -T0 -3` | hand-made (tar|zstd, then
           sha256sum of every file) | `restic backup` to a fresh local repository
  verify:  vacate verify | hand-made (`zstd -dc | tar -x` to scratch, then `sha256sum -c`) |
           bare `zstd -dc | tar -t`
and prints medians and ratios (the machine is shared: compare within one run).
Needs: zstd, tar, sha256sum, restic (apt-get install restic).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time


def build_tree(tree: str, gb: float) -> None:
    marker = os.path.join(tree, ".complete")
    if os.path.exists(marker):
        return
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tree)
    total = int(gb * 1e9)
    weights = int(total * 0.7)
    rnd = random.Random(1)
    wdir = os.path.join(tree, "models", "weights")
    os.makedirs(wdir)
    n = 0
    while weights > 0:                       # incompressible shards of ~256 MB
        size = min(weights, 256 << 20)
        with open(os.path.join(wdir, f"model-{n:05d}.safetensors"), "wb") as f:
            left = size
            while left:
                k = min(left, 16 << 20)
                f.write(os.urandom(k))
                left -= k
        weights -= size
        n += 1
    ddir = os.path.join(tree, "data")
    os.makedirs(ddir)
    jsonl = int(total * 0.25)
    words = ["token", "draft", "eagle", "speculative", "decode", "hidden", "state", "layer",
             "prompt", "response", "assistant", "user", "the", "of", "and", "model"]
    k = 0
    while jsonl > 0:
        with open(os.path.join(ddir, f"train-{k:03d}.jsonl"), "w") as f:
            written = 0
            while written < min(jsonl, 128 << 20):
                line = json.dumps({"id": rnd.getrandbits(48), "text": " ".join(
                    rnd.choice(words) for _ in range(60)), "score": rnd.random()}) + "\n"
                f.write(line)
                written += len(line)
        jsonl -= written
        k += 1
    small = os.path.join(tree, "checkpoints")
    for i in range(10000):                    # many small JSON files
        d = os.path.join(small, f"step-{i // 500:03d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"state-{i:05d}.json"), "w") as f:
            json.dump({"step": i, "lr": 1e-4 * rnd.random(), "loss": rnd.random(),
                       "notes": " ".join(rnd.choice(words) for _ in range(rnd.randint(5, 400)))},
                      f)
    open(marker, "w").close()


def settle(*trees: str) -> None:
    """Before each timed command, outside its time: write back what earlier commands left
    dirty (so no command pays for another's writeback), and read the tree so that it is in
    the page cache (other work on the machine may have evicted it; every command gets the
    same warm cache; for verify, the archives: vacate writes its parts with O_DIRECT, past
    the page cache, where `tar | zstd` leaves its output cached)."""
    subprocess.run(["sync"], check=True)
    buf = bytearray(1 << 20)
    for d, _, files in (w for t in trees for w in os.walk(t)):
        for f in files:
            fd = os.open(os.path.join(d, f), os.O_RDONLY)
            try:
                while os.readv(fd, [buf]):
                    pass
            finally:
                os.close(fd)


def timed(cmd: str, env=None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(["bash", "-c", "set -eo pipefail; " + cmd], env=env,
                       capture_output=True, check=False)
    dt = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"failed: {cmd}\n{r.stderr.decode()[-2000:]}")
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/var/tmp/vacate-bench-archive")
    ap.add_argument("--gb", type=float, default=2.5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", choices=["archive", "verify", "bare"], default=None,
                    help="bare: only vacate archive against bare tar|zstd (quick iteration)")
    a = ap.parse_args()
    tree = os.path.join(a.root, "tree")
    out = os.path.join(a.root, "out")
    build_tree(tree, a.gb)
    size = int(subprocess.run(["du", "-sb", "--exclude=.complete", tree], capture_output=True,
                              text=True, check=True).stdout.split()[0])
    nfiles = sum(len(f) for _, _, f in os.walk(tree)) - 1
    print(f"tree: {size / 1e9:.2f} GB, {nfiles} files; {os.cpu_count()} CPUs; "
          f"load {os.getloadavg()[0]:.1f}")
    # the vacate of this checkout, whatever an editable install elsewhere points at
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = dict(os.environ, RESTIC_PASSWORD="bench", RESTIC_CACHE_DIR=os.path.join(a.root,
                                                                                  "rcache"),
               PYTHONPATH=src)
    vac = f"{sys.executable} -m vacate"
    parent, base = os.path.split(tree)
    archive_cmds = {
        "vacate archive": f"rm -rf {out}/v && {vac} archive {tree} --to {out}/v --name t "
                          "--no-progress >/dev/null",
        "tar|zstd -T0 -3": f"rm -rf {out}/b && mkdir -p {out}/b && tar -cf - -C {parent} "
                           f"{base} | zstd -q -T0 -3 -o {out}/b/t.tar.zst",
        "hand-made (tar|zstd + sha256sum)":
            f"rm -rf {out}/h && mkdir -p {out}/h && tar -cf - -C {parent} {base} | "
            f"zstd -q -T0 -3 -o {out}/h/t.tar.zst && cd {parent} && "
            f"find {base} -type f -print0 | xargs -0 sha256sum > {out}/h/SHA256SUMS",
        "restic backup": f"rm -rf {out}/r && restic init -q -r {out}/r && "
                         f"restic backup -q -r {out}/r {tree}",
    }
    verify_cmds = {
        "vacate verify": f"{vac} verify {out}/v/t --no-progress >/dev/null",
        "hand-made (zstd -dc|tar -x, sha256sum -c)":
            f"rm -rf {out}/scratch && mkdir -p {out}/scratch && zstd -qdc {out}/h/t.tar.zst | "
            f"tar -xf - -C {out}/scratch && cd {out}/scratch && "
            f"sha256sum --quiet -c {out}/h/SHA256SUMS && rm -rf {out}/scratch",
        "zstd -dc|tar -t": f"zstd -qdc {out}/b/t.tar.zst | tar -tf - >/dev/null",
    }
    os.makedirs(out, exist_ok=True)
    results: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    if a.only == "bare":
        archive_cmds = {k: archive_cmds[k] for k in ("vacate archive", "tar|zstd -T0 -3")}
    for group, cmds in (("archive", archive_cmds), ("verify", verify_cmds)):
        if a.only and a.only != group and not (a.only == "bare" and group == "archive"):
            continue
        for i in range(a.runs):
            for name, cmd in cmds.items():       # interleaved
                settle(tree) if group == "archive" else settle(*(f"{out}/{x}" for x in "vbh"))
                dt, ct = timed(cmd, env)
                results.setdefault(name, []).append(dt)
                cpu.setdefault(name, []).append(ct)
                print(f"  run {i + 1} {name}: {dt:.2f} s wall, {ct:.2f} s CPU "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    print("\nmedians: wall seconds, GB/s of the tree, CPU seconds:")
    for k, v in med.items():
        print(f"  {k:45s} {v:7.2f} s  {size / v / 1e9:5.2f} GB/s  {mcpu[k]:7.2f} s CPU")

    def ratio(a_, b_):
        if a_ in med and b_ in med:
            print(f"  {a_} vs {b_}: speed {med[b_] / med[a_]:.2f}x, "
                  f"CPU {mcpu[b_] / mcpu[a_]:.2f}x")
    print("\nratios (>1 means vacate is faster):")
    ratio("vacate archive", "tar|zstd -T0 -3")
    ratio("vacate archive", "hand-made (tar|zstd + sha256sum)")
    ratio("vacate archive", "restic backup")
    ratio("vacate verify", "hand-made (zstd -dc|tar -x, sha256sum -c)")
    ratio("vacate verify", "zstd -dc|tar -t")
    if "vacate archive" in med:
        vb = sum(os.path.getsize(os.path.join(out, "v", "t", f))
                 for f in os.listdir(os.path.join(out, "v", "t")) if f.endswith(".tar.zst"))
        bb = os.path.getsize(os.path.join(out, "b", "t.tar.zst"))
        print(f"\nsize: vacate parts {vb / 1e9:.3f} GB, tar|zstd {bb / 1e9:.3f} GB")


if __name__ == "__main__":
    main()
