"""A real FUSE filesystem whose daemon can be stopped (``SIGSTOP``): the dead ``sshfs`` case.

``python3 fusefs.py MOUNTPOINT`` serves a small in-memory tree (files can be created,
written, read and removed) in the foreground, with attribute and entry caching off, so every
``stat`` reaches the daemon. :func:`fuse_mount` starts it in its own process group and, when
done, resumes and kills it and detaches the mount (``fusermount -u -z``), also after a failure.
Needs root, ``/dev/fuse``, ``fusermount`` and the ``mfusepy`` package.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time


def can_fuse() -> bool:
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse") or not shutil.which("fusermount"):
        return False
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


def is_mounted(mnt: str) -> bool:
    """Something is mounted at ``mnt`` (in this mount namespace)."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        return any(line.split(" ")[4] == mnt for line in f)


@contextlib.contextmanager
def fuse_mount(mnt: str):
    """Mount the filesystem at ``mnt`` (an empty directory); yields the daemon's Popen."""
    # its log goes to a file, not a pipe: a chatty daemon must never block on it
    with tempfile.TemporaryFile() as log:
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), mnt],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=log, start_new_session=True)
        try:
            end = time.monotonic() + 15
            while not is_mounted(mnt):
                if p.poll() is not None or time.monotonic() > end:
                    log.seek(0)
                    raise RuntimeError(f"FUSE daemon did not mount {mnt}: "
                                       f"{log.read().decode(errors='replace')}")
                time.sleep(0.02)
            yield p
        finally:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, sig)
            p.wait(timeout=10)
            subprocess.run(["fusermount", "-u", "-z", mnt], capture_output=True, check=False)


def stopped(p: subprocess.Popen):
    """The daemon stopped (its filesystem no longer answers) until the block ends."""
    @contextlib.contextmanager
    def cm():
        os.killpg(p.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGCONT)
    return cm()


def _serve(mnt: str) -> None:
    from mfusepy import FUSE, FuseOSError, Operations

    now = time.time()

    class Mem(Operations):
        def __init__(self):
            self.files: dict[str, bytearray] = {}
            self.dirs = {"/"}

        def _attr(self, path):
            if path in self.dirs:
                return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, "st_mtime": now,
                        "st_atime": now, "st_ctime": now}
            if path in self.files:
                return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1,
                        "st_size": len(self.files[path]), "st_mtime": now, "st_atime": now,
                        "st_ctime": now}
            raise FuseOSError(errno.ENOENT)

        def getattr(self, path, fh=None):
            return self._attr(path)

        def readdir(self, path, fh):
            pre = path.rstrip("/") + "/"
            names = {p[len(pre):].split("/")[0] for p in [*self.dirs, *self.files]
                     if p.startswith(pre) and p != pre}
            return [".", "..", *sorted(names)]

        def mkdir(self, path, mode):
            self.dirs.add(path)

        def create(self, path, mode, fi=None):
            self.files[path] = bytearray()
            return 0

        def open(self, path, flags):
            self._attr(path)
            return 0

        def read(self, path, size, offset, fh):
            return bytes(self.files[path][offset:offset + size])

        def write(self, path, data, offset, fh):
            buf = self.files[path]
            buf[offset:offset + len(data)] = data
            return len(data)

        def truncate(self, path, length, fh=None):
            del self.files[path][length:]

        def unlink(self, path):
            self.files.pop(path, None)

    FUSE(Mem(), mnt, foreground=True, attr_timeout=0, entry_timeout=0, hard_remove=True)


if __name__ == "__main__":
    _serve(sys.argv[1])
