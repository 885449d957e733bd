"""Build (once) the deterministic 1,000,000-file benchmark tree on a loop-mounted ext4 image.

Shape, roughly what a scratch volume of an ML team holds:
  datasets/       training shards: many dirs of jsonl/arrow shards, small files with data
  hub/            a Hugging Face hub-style cache: models--org--name/{blobs,snapshots,refs}, sparse
                  weight blobs, snapshot files as relative symlinks into blobs/
  checkpoints/    runs/checkpoint-N/ with optimizer shards (sparse) and small json files
  src/            source checkouts: nested dirs of small files, hardlinked duplicates
  deep/           a few chains of directories deeper than PATH_MAX
  odd/            names with newlines, spaces and invalid UTF-8
The image is cached in /var/tmp/vacate-bench/tree.img (reused when present); ``mount`` attaches
it and prints the mountpoint. Needs root.

    python3 bench/scan/bench_scan_tree.py build|mount|umount [--files N]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys

CACHE = "/var/tmp/vacate-bench"
IMAGE = os.path.join(CACHE, "tree.img")
MNT = os.path.join(CACHE, "mnt")
STAMP = os.path.join(CACHE, "tree.done")


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def mounted() -> bool:
    return os.path.ismount(MNT)


def mount() -> str:
    os.makedirs(MNT, exist_ok=True)
    if not mounted():
        sh("mount", "-o", "loop", IMAGE, MNT)
    return MNT


def umount() -> None:
    if mounted():
        sh("umount", MNT)


def write(path: str | bytes, size: int, rnd: random.Random, *, sparse: bool = False,
          dir_fd: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dir_fd)
    try:
        if sparse:
            os.write(fd, b"\0" * 64)
            os.ftruncate(fd, size)
        elif size:
            os.write(fd, rnd.randbytes(size))
    finally:
        os.close(fd)


class Builder:
    def __init__(self, root: str, target: int, seed: int = 42):
        self.root = root
        self.target = target
        self.rnd = random.Random(seed)
        self.n = 0

    def f(self, path: str, size: int = 0, **kw) -> None:
        write(path, size, self.rnd, **kw)
        self.n += 1

    def datasets(self, share: int) -> None:
        base = os.path.join(self.root, "datasets")
        per_dir = 500
        for d in range(share // per_dir):
            dd = os.path.join(base, f"corpus-{d // 40:03d}", f"split-{d % 40:02d}")
            os.makedirs(dd, exist_ok=True)
            for i in range(per_dir):
                ext = ("jsonl", "arrow", "parquet")[i % 3]
                self.f(os.path.join(dd, f"shard-{i:05d}.{ext}"), self.rnd.randrange(0, 3000))

    def hub(self, share: int) -> None:
        base = os.path.join(self.root, "hub")
        models = share // 24
        for m in range(models):
            md = os.path.join(base, f"models--org{m % 37}--model-{m:05d}")
            blobs = os.path.join(md, "blobs")
            snap = os.path.join(md, "snapshots", f"{self.rnd.getrandbits(160):040x}")
            os.makedirs(blobs, exist_ok=True)
            os.makedirs(snap, exist_ok=True)
            os.makedirs(os.path.join(md, "refs"), exist_ok=True)
            self.f(os.path.join(md, "refs", "main"), 40)
            for i in range(11):
                sha = f"{self.rnd.getrandbits(256):064x}"
                name = (f"model-{i:05d}-of-00008.safetensors" if i < 8
                        else ("config.json", "tokenizer.json", "generation_config.json")[i - 8])
                if i < 8:
                    self.f(os.path.join(blobs, sha), self.rnd.randrange(1 << 30, 5 << 30),
                           sparse=True)
                else:
                    self.f(os.path.join(blobs, sha), self.rnd.randrange(200, 4000))
                os.symlink(os.path.join("..", "..", "blobs", sha), os.path.join(snap, name))
                self.n += 1

    def checkpoints(self, share: int) -> None:
        base = os.path.join(self.root, "checkpoints")
        per = 20
        for c in range(share // per):
            cd = os.path.join(base, f"run-{c // 100:03d}", f"checkpoint-{(c % 100) * 500}")
            os.makedirs(cd, exist_ok=True)
            for i in range(4):
                self.f(os.path.join(cd, f"optimizer-{i}.pt"), 1 << 28, sparse=True)
            for i in range(per - 4):
                self.f(os.path.join(cd, f"rng_state_{i}.pth"), self.rnd.randrange(100, 2000))

    def src(self, share: int) -> None:
        base = os.path.join(self.root, "src")
        made = 0
        repo = 0
        while made < share:
            rd = os.path.join(base, f"repo-{repo:04d}")
            first = None
            for d in range(30):
                depth = 1 + d % 5
                dd = os.path.join(rd, *(f"pkg{d}_{k}" for k in range(depth)))
                os.makedirs(dd, exist_ok=True)
                for i in range(30):
                    p = os.path.join(dd, f"mod_{i:03d}.py")
                    if first is not None and i % 10 == 0:
                        os.link(first, p)      # hardlinked duplicates (dedup'd checkouts)
                        self.n += 1
                    else:
                        self.f(p, self.rnd.randrange(0, 6000))
                        first = first or p
                    made += 1
                    if made >= share:
                        return
            repo += 1

    def deep(self) -> None:
        for chain in range(3):
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
            path_len = len(self.root)
            name = "d" * 60
            depth = 0
            try:
                for nm in ("deep", f"chain{chain}"):
                    try:
                        os.mkdir(nm, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nfd = os.open(nm, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                    os.close(fd)
                    fd = nfd
                while path_len < 6000:
                    os.mkdir(name, dir_fd=fd)
                    nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                    os.close(fd)
                    fd = nfd
                    path_len += 61
                    depth += 1
                    write("leaf.txt", 10, self.rnd, dir_fd=fd)
                    self.n += 1
            finally:
                os.close(fd)

    def odd(self) -> None:
        base = os.path.join(self.root, "odd")
        os.makedirs(base, exist_ok=True)
        bbase = os.fsencode(base)
        for i in range(200):
            for nm in (f"new\nline-{i}".encode(), b"latin1-\xe9\xff-%d" % i,
                       f"sp ace {i} ".encode(), f"emoji-\u2603-{i}".encode()):
                write(os.path.join(bbase, nm), 10, self.rnd)
                self.n += 1

    def build(self) -> None:
        t = self.target
        self.deep()
        self.odd()
        self.hub(int(t * 0.06))
        self.checkpoints(int(t * 0.10))
        self.datasets(int(t * 0.40))
        self.src(t - self.n)


def build(files: int) -> None:
    os.makedirs(CACHE, exist_ok=True)
    if os.path.exists(STAMP):
        print(f"cached: {IMAGE}")
        return
    umount()
    if os.path.exists(IMAGE):
        os.unlink(IMAGE)
    with open(IMAGE, "wb") as f:
        f.truncate(16 << 30)
    sh("mkfs.ext4", "-q", "-F", "-N", str(int(files * 1.3)), "-L", "vacatebench", IMAGE)
    root = mount()
    b = Builder(root, files)
    b.build()
    os.sync()
    with open(STAMP, "w") as f:
        f.write(f"{b.n}\n")
    print(f"built {b.n} entries (files and symlinks) in {IMAGE}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=("build", "mount", "umount"))
    ap.add_argument("--files", type=int, default=1_000_000)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (loop mount)", file=sys.stderr)
        return 2
    if a.action == "build":
        build(a.files)
    elif a.action == "mount":
        print(mount())
    else:
        umount()
    return 0


if __name__ == "__main__":
    sys.exit(main())
