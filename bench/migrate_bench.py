"""Migrate's copy and read-back beside ``cp -a``, ``rsync -a`` and a cold ``cat``, on one
pair of loop volumes (ext4 -> ext4: a real copy, no reflink). Needs root.

    python3 bench/migrate_bench.py [MB] [FILES]

Each copy goes to an empty directory on the destination; "cold" means every file's cached
pages were dropped first (POSIX_FADV_DONTNEED after fsync, per file: nothing global)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness.volumes import make_volume  # noqa: E402

from vacate.act import copy_tree  # noqa: E402


def drop(root: str) -> None:
    for d, _dirs, files in os.walk(root):
        for n in files:
            fd = os.open(os.path.join(d, n), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    mb = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    a, b = make_volume("ext4", size_mb=mb + 200), make_volume("ext4", size_mb=mb * 2 + 300)
    try:
        src = os.path.join(a.mountpoint, "model")
        os.makedirs(src)
        per = (mb << 20) // files
        for i in range(files):
            with open(os.path.join(src, f"shard-{i:03d}.safetensors"), "wb") as f:
                for _ in range(per >> 20):
                    f.write(os.urandom(1 << 20))
        rows = []
        for name, fn in (
                ("cp -a", lambda d: subprocess.run(["cp", "-a", src, d], check=True)),
                ("rsync -a", lambda d: subprocess.run(["rsync", "-a", src + "/", d + "/"],
                                                      check=True)),
                ("vacate copy", lambda d: copy_tree.copy_pass(src, d))):
            if name == "rsync -a" and shutil.which("rsync") is None:
                continue
            dest = os.path.join(b.mountpoint, name.replace(" ", "_"), "model")
            os.makedirs(os.path.dirname(dest))
            drop(src)
            # each one's data on the disk: cp and rsync do not fsync, so a sync is counted
            t = timed(lambda fn=fn, dest=dest: (fn(dest), subprocess.run(
                ["sync", "-f", dest], check=False)))
            rows.append((name, t))
            if name != "vacate copy":
                shutil.rmtree(os.path.dirname(dest))
        dest = os.path.join(b.mountpoint, "vacate_copy", "model")
        drop(dest)
        cat = timed(lambda: subprocess.run(
            f"cat {dest}/* > /dev/null", shell=True, check=True))
        drop(dest)
        rb = timed(lambda: copy_tree.read_back(src, dest))
        print(f"{mb} MB in {files} files, ext4 loop -> ext4 loop")
        base = dict(rows)["cp -a"]
        for name, t in rows:
            print(f"  {name:12} {t:6.2f} s  {mb / t:7.0f} MB/s  {t / base:4.2f}x cp -a")
        print(f"  {'cold cat':12} {cat:6.2f} s  {mb / cat:7.0f} MB/s")
        print(f"  {'read-back':12} {rb:6.2f} s  {mb / rb:7.0f} MB/s  {rb / cat:4.2f}x cold cat")
    finally:
        a.close()
        b.close()


if __name__ == "__main__":
    main()
