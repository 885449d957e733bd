"""Migrate's copy and read-back beside ``cp -a``, ``rsync -a`` and a cold ``cat``, on one
pair of loop volumes (ext4 -> ext4: a real copy, no reflink). Needs root.

    python3 bench/migrate_bench.py [MB] [FILES] [--rounds=N] [--baseline-src=SRC]

``--baseline-src``: the copy and read-back of another tree's ``vacate`` (SRC: its ``src``
directory) timed in the same rounds, as "base copy" and "base read-back" (the two taken in
turn first, round by round). Each copy goes to an empty directory on the destination;
"cold" means every file's cached pages were dropped first (POSIX_FADV_DONTNEED after fsync,
per file: nothing global)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness.volumes import make_volume

from vacate.act import copy_tree


def drop(root: str) -> None:
    for d, _dirs, files in os.walk(root):
        for n in files:
            fd = os.open(os.path.join(d, n), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def load_copy_tree(src: str):
    """Another tree's ``vacate/act/copy_tree.py``, as a module of its own."""
    path = os.path.join(src, "vacate", "act", "copy_tree.py")
    spec = importlib.util.spec_from_file_location("baseline_copy_tree", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module                   # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


def fill(root: str) -> None:
    """Write the whole free space of the volume at ``root`` once, then free it: its image
    is sparse, and a block the host has not allocated yet costs many times one it has, at
    random (wherever ext4 puts a copy), in every copy alike."""
    path = os.path.join(root, ".fill")
    zeros = bytes(8 << 20)
    with open(path, "wb") as f:
        try:
            while True:
                f.write(zeros)
        except OSError:
            pass
        os.fsync(f.fileno())
    os.unlink(path)
    subprocess.run(["sync", "-f", root], check=True)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = int(opts.get("rounds", 1))
    versions = [("vacate", copy_tree)]
    if "baseline-src" in opts:
        versions.append(("base", load_copy_tree(opts["baseline-src"])))
    mb = int(args[0]) if args else 512
    files = int(args[1]) if len(args) > 1 else 8
    a, b = make_volume("ext4", size_mb=mb + 200), make_volume("ext4", size_mb=mb * 2 + 300)
    try:
        fill(b.mountpoint)
        src = os.path.join(a.mountpoint, "model")
        os.makedirs(src)
        per = (mb << 20) // files
        for i in range(files):
            with open(os.path.join(src, f"shard-{i:03d}.safetensors"), "wb") as f:
                f.writelines(os.urandom(1 << 20) for _ in range(per >> 20))
        peers = [("cp -a", lambda d: subprocess.run(["cp", "-a", src, d], check=True))]
        if shutil.which("rsync") is not None:
            peers.append(("rsync -a", lambda d: subprocess.run(["rsync", "-a", src + "/",
                                                                d + "/"], check=True)))
        ours = [(f"{label} copy", lambda d, m=module: m.copy_pass(src, d))
                for label, module in versions]
        runs: dict[str, list[float]] = {}
        for i in range(rounds):              # interleaved: each in turn, every round
            every = peers + ours                 # each goes first in turn
            for name, fn in every[i % len(every):] + every[:i % len(every)]:
                dest = os.path.join(b.mountpoint, name.replace(" ", "_"), "model")
                os.makedirs(os.path.dirname(dest))
                drop(src)
                # each one's data on the disk: cp and rsync do not fsync, so a sync is counted
                runs.setdefault(name, []).append(timed(lambda fn=fn, dest=dest: (
                    fn(dest), subprocess.run(["sync", "-f", dest], check=False))))
                module = dict(versions).get(name[:-len(" copy")])
                if module is not None:
                    pre = "" if module is copy_tree else "base "
                    drop(dest)
                    runs.setdefault(f"{pre}cold cat", []).append(timed(lambda dest=dest: (
                        subprocess.run(f"cat {dest}/* > /dev/null", shell=True, check=True))))
                    drop(dest)
                    runs.setdefault(f"{pre}read-back", []).append(
                        timed(lambda dest=dest, m=module: m.read_back(src, dest)))
                    os.unlink(copy_tree.state_path(dest))
                shutil.rmtree(os.path.dirname(dest))
        med = {k: statistics.median(v) for k, v in runs.items()}
        print(f"{mb} MB in {files} files, ext4 loop -> ext4 loop, median of {rounds} "
              "interleaved rounds")
        for name, t in med.items():
            peer = name[:-len("read-back")] + "cold cat" if name.endswith("read-back") \
                else "cp -a"
            ratio = None if name.endswith("cold cat") else t / med[peer]
            print(f"  {name:14} {t:6.2f} s  {mb / t:7.0f} MB/s" +
                  (f"  {ratio:4.2f}x {peer}" if ratio is not None else ""))
        for name, times in runs.items():
            print(f"  {name:14} rounds: " + " ".join(f"{t:.2f}" for t in times))
        for name in [label for label, _fn in peers[1:] + ours]:
            paired = statistics.median(x / y for x, y in zip(runs[name], runs["cp -a"]))
            print(f"  {name} against cp -a in the same round: median {paired:4.2f}x")
        for name in ("copy", "read-back") if len(versions) > 1 else ():
            ours, base = runs["vacate copy" if name == "copy" else name], runs[f"base {name}"]
            paired = statistics.median(x / y for x, y in zip(ours, base))
            print(f"  {name} against the baseline's in the same round: median {paired:4.2f}x")
    finally:
        a.close()
        b.close()


if __name__ == "__main__":
    main()
