"""A minimal Debian bookworm root filesystem for containers in tests (LXC, docker).

Built once with ``debootstrap`` (about 50 s, needs the Debian mirror) and cached as a zstd
tarball under ``/var/cache/vacate-tests/``; every test extracts the tarball (about 0.5 s).
Concurrent builders are serialised with a lock file. Needs root.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile

CACHE_DIR = os.environ.get("VACATE_TEST_CACHE", "/var/cache/vacate-tests")
TARBALL = os.path.join(CACHE_DIR, "bookworm-minbase.tar.zst")
MIRROR = os.environ.get("VACATE_TEST_MIRROR", "http://deb.debian.org/debian")
# systemd is not needed: the containers run a plain shell as init.
INCLUDE = "procps"


class RootfsUnavailable(RuntimeError):
    """The rootfs could not be built here (no debootstrap, no mirror)."""


def _debootstrap(dest: str) -> None:
    if shutil.which("debootstrap") is None:
        raise RootfsUnavailable("debootstrap is not installed (scripts/test-deps.sh installs it)")
    r = subprocess.run(
        ["debootstrap", "--variant=minbase", f"--include={INCLUDE}", "bookworm", dest, MIRROR],
        check=False, capture_output=True, text=True)
    if r.returncode != 0:
        raise RootfsUnavailable(f"debootstrap failed: {r.stderr.strip()[-500:] or r.stdout[-500:]}")
    shutil.rmtree(os.path.join(dest, "var/cache/apt/archives"), ignore_errors=True)
    shutil.rmtree(os.path.join(dest, "var/lib/apt/lists"), ignore_errors=True)


def tarball() -> str:
    """The cached rootfs tarball, built on first use."""
    if os.path.exists(TARBALL):
        return TARBALL
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(os.path.join(CACHE_DIR, ".build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(TARBALL):
            return TARBALL
        work = tempfile.mkdtemp(prefix="rootfs-", dir=CACHE_DIR)
        try:
            tree = os.path.join(work, "tree")
            _debootstrap(tree)
            part = TARBALL + ".part"
            subprocess.run(["tar", "-C", tree, "--numeric-owner", "-I", "zstd -T0 -10",
                            "-cf", part, "."], check=True, capture_output=True)
            os.replace(part, TARBALL)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return TARBALL


def unavailable() -> str | None:
    """Why no rootfs can be had here (debootstrap missing or failing), or None."""
    try:
        tarball()
    except (RootfsUnavailable, OSError, subprocess.CalledProcessError) as e:
        return str(e)
    return None


def extract(dest: str) -> str:
    """Extract the cached rootfs into ``dest`` (created); returns ``dest``."""
    src = tarball()
    os.makedirs(dest, exist_ok=True)
    subprocess.run(["tar", "-C", dest, "--numeric-owner", "-I", "zstd", "-xf", src],
                   check=True, capture_output=True)
    return dest


if __name__ == "__main__":   # python3 tests/harness/rootfs.py: warm the cache
    print(tarball())
