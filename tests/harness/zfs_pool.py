"""A real ZFS pool for tests, with zfs-fuse (apt package ``zfs-fuse``; kernel ZFS cannot load
here): a pool on a sparse file with a uniquely named pool and Proxmox-style datasets. The
zfs-fuse daemon is shared by everyone on the machine (one socket), so it is started only when
none runs and stopped only by whoever started it. Needs root and /dev/fuse.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field

SOCKET = "/var/run/zfs/zfs_socket"


def zfs_available() -> bool:
    return os.geteuid() == 0 and shutil.which("zfs-fuse") is not None and \
        os.path.exists("/dev/fuse")


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60)


def _daemon_pid() -> int | None:
    r = _run("pgrep", "-x", "zfs-fuse", check=False)
    pids = [int(p) for p in r.stdout.split()]
    return pids[0] if pids else None


@dataclass
class ZfsPool:
    name: str
    workdir: str
    mountpoint: str
    started_pid: int | None = None        # the daemon, when we started it
    datasets: list[str] = field(default_factory=list)

    def create(self, dataset: str) -> str:
        """Create ``POOL/dataset``; returns its mountpoint."""
        full = f"{self.name}/{dataset}"
        _run("zfs", "create", full)
        self.datasets.append(full)
        return os.path.join(self.mountpoint, dataset)

    def close(self) -> None:
        gone = False
        for _ in range(120):  # "pool is busy" for a while after datasets were used (seconds
            r = _run("zpool", "destroy", "-f", self.name, check=False)   # on a loaded machine)
            if r.returncode == 0 or "no such pool" in r.stderr:
                gone = True
                break
            time.sleep(0.25)
        if not gone:          # still busy (a mount namespace elsewhere holds its mounts)
            gone = _run("zpool", "export", "-f", self.name, check=False).returncode == 0
        if not gone:
            # its image is kept: a pool whose file was removed under the daemon is FAULTED
            # there, and later commands of the shared daemon wait on it
            print(f"zfs_pool: {self.name} could not be destroyed; {self.workdir} kept")
            return
        if self.started_pid is not None and _run("zpool", "list", "-H", check=False).stdout == "":
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.started_pid, signal.SIGTERM)
            for _ in range(40):
                if not os.path.exists(f"/proc/{self.started_pid}"):
                    break
                time.sleep(0.25)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.started_pid, signal.SIGKILL)
        shutil.rmtree(self.workdir, ignore_errors=True)


def make_pool(size_mb: int = 256) -> ZfsPool:
    workdir = tempfile.mkdtemp(prefix="vacate-zfs-")
    pool = ZfsPool(f"vt{uuid.uuid4().hex[:8]}", workdir, os.path.join(workdir, "mnt"))
    try:
        if _daemon_pid() is None:
            os.makedirs("/var/run/zfs", exist_ok=True)
            os.makedirs("/var/lock/zfs", exist_ok=True)
            _run("zfs-fuse", "-p", os.path.join(workdir, "zfs-fuse.pid"))
            for _ in range(40):
                if os.path.exists(SOCKET):
                    break
                time.sleep(0.25)
            pool.started_pid = _daemon_pid()
        img = os.path.join(workdir, "pool.img")
        with open(img, "wb") as f:
            f.truncate(size_mb * 1024 * 1024)
        _run("zpool", "create", "-m", pool.mountpoint, pool.name, img)
    except BaseException:
        pool.close()
        raise
    return pool
