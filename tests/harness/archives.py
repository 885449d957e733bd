"""Shared helpers for the archive / verify / restore tests.

``make_awkward_tree`` builds every case the issue names on a real filesystem;
``snapshot`` records what a user would compare after a restore; ``stock_restore`` is the
README's loop with stock zstd and tar.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat as S
import subprocess
import sys

import pytest

AWKWARD_NAMES = [b"new\nline.txt", b"bad\xff\xfeutf8.bin", b" leading space", b"back\\slash",
                 b"car\rriage", b"tab\there", "ünïcødé-名前.txt".encode()]


def run(*cmd, cwd=None, check=True, input=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, check=check, capture_output=True, input=input, env=env)


def vacate(*args, env=None, check=False) -> subprocess.CompletedProcess:
    """The real command line, in a child process (as a user runs it)."""
    return subprocess.run([sys.executable, "-m", "vacate", *args], capture_output=True,
                          env=env, check=check)


def make_awkward_tree(root: str, *, big_mb: int = 3) -> str:
    """A tree under ``root``/src with every awkward case; returns its path."""
    src = os.path.join(root, "src")
    b = os.fsencode(src)
    os.makedirs(os.path.join(src, "sub", "deep"))
    os.makedirs(os.path.join(src, "empty", "nested-empty"))
    with open(os.path.join(src, "weights.bin"), "wb") as f:
        f.write(os.urandom(big_mb << 20))
    for i, name in enumerate(AWKWARD_NAMES):
        with open(b + b"/" + name, "wb") as f:
            f.write(b"content %d of %r\n" % (i, name))
    for i in range(40):
        with open(os.path.join(src, "sub", "deep", f"rec{i:03d}.json"), "w") as f:
            json.dump({"i": i, "text": "lorem ipsum " * (i % 7)}, f)
    open(os.path.join(src, "zero-length"), "wb").close()
    os.link(os.path.join(src, "weights.bin"), os.path.join(src, "sub", "hardlink.bin"))
    os.link(os.path.join(src, "weights.bin"), b + b"/sub/hard\nlink2")
    os.symlink("../weights.bin", os.path.join(src, "sub", "rel-link"))
    os.symlink(b"dangling-\xff-target", b + b"/sub/odd-link")
    os.mkfifo(os.path.join(src, "fifo"))
    # sparse: 64 MiB with two small data islands, and one ending in a hole
    with open(os.path.join(src, "sparse.img"), "wb") as f:
        f.truncate(64 << 20)
        f.seek(5 << 20)
        f.write(b"island one" * 1000)
        f.seek(40 << 20)
        f.write(os.urandom(200_000))
    with open(os.path.join(src, "hole-at-start-and-end.img"), "wb") as f:
        f.truncate(16 << 20)
        f.seek(8 << 20)
        f.write(b"middle")
    if os.geteuid() == 0:
        os.mknod(os.path.join(src, "null-dev"), 0o640 | S.S_IFCHR, os.makedev(1, 3))
        os.chown(os.path.join(src, "sub", "deep", "rec001.json"), 4321, 8765)
        os.chown(os.path.join(src, "sub"), 1000, 1000)
    os.chmod(os.path.join(src, "sub", "deep", "rec002.json"), 0o600)
    os.chmod(os.path.join(src, "sub", "deep", "rec003.json"), 0o4755)
    os.utime(os.path.join(src, "sub", "deep", "rec004.json"), ns=(0, 981173106_123456789))
    os.utime(os.path.join(src, "sub", "deep", "rec005.json"), ns=(0, -86400_500000000))
    os.utime(os.path.join(src, "sub", "rel-link"), ns=(0, 1_000_000_007), follow_symlinks=False)
    os.chmod(os.path.join(src, "sub", "deep"), 0o555)
    os.utime(os.path.join(src, "sub", "deep"), ns=(0, 1_500_000_000_250_000_000))
    os.utime(os.path.join(src, "empty", "nested-empty"), ns=(0, 1_400_000_000_000_000_001))
    return src


def _sha(path: bytes) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def snapshot(root: str) -> dict:
    """path -> what a user compares: type, mode, owner, mtime (ns), size, link, content hash,
    and which paths share an inode."""
    out = {}
    inodes: dict[int, list] = {}
    base = os.fsencode(root)
    for d, dirs, files in os.walk(base):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, base)
            rec = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid,
                   "mtime_ns": st.st_mtime_ns}
            if S.S_ISREG(st.st_mode):
                rec["size"] = st.st_size
                rec["sha"] = _sha(p)
                inodes.setdefault((st.st_dev, st.st_ino), []).append(rel)
            elif S.S_ISLNK(st.st_mode):
                rec["link"] = os.readlink(p)
            elif S.S_ISCHR(st.st_mode) or S.S_ISBLK(st.st_mode):
                rec["rdev"] = st.st_rdev
            out[rel] = rec
    groups = sorted(sorted(v) for v in inodes.values() if len(v) > 1)
    return {"entries": out, "hardlink_groups": groups}


def stock_restore(archive_dir: str, out: str) -> None:
    """README: for p in *.tar.zst; do zstd -dc "$p" | tar -xpf - -C OUT; done"""
    os.makedirs(out, exist_ok=True)
    run("sh", "-c", 'set -e; for p in *.tar.zst; do zstd -qdc "$p" | tar -xpf - -C "$1"; done',
        "sh", out, cwd=archive_dir)


def sha256sum_check(archive_dir: str, out: str) -> subprocess.CompletedProcess:
    return run("sha256sum", "--strict", "-c", os.path.join(archive_dir, "SHA256SUMS"), cwd=out,
               check=False)


def needs_tools(*tools):
    import shutil
    missing = [t for t in tools if shutil.which(t) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


def snapshot_diff(a: dict, b: dict) -> list:
    """Readable differences between two snapshots (empty when equal)."""
    out = []
    ea, eb = a["entries"], b["entries"]
    for k in sorted(set(ea) | set(eb)):
        if ea.get(k) != eb.get(k):
            va, vb = ea.get(k) or {}, eb.get(k) or {}
            out.append((k, {f: (va.get(f), vb.get(f)) for f in set(va) | set(vb)
                            if va.get(f) != vb.get(f)}))
    if a["hardlink_groups"] != b["hardlink_groups"]:
        out.append(("hardlink_groups", a["hardlink_groups"], b["hardlink_groups"]))
    return out
