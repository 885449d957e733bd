"""Real loop-mounted volumes (ext4, xfs, btrfs) for tests. Needs root.

Each volume is a sparse image file, attached with ``losetup`` (so the loop device is visible
and stable) and mounted on a fresh directory. ``Volume.close`` undoes only what it did.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

MKFS = {
    "ext4": ["mkfs.ext4", "-q", "-F", "-L", "vacatetest"],
    "xfs": ["mkfs.xfs", "-q", "-f", "-L", "vacatetest"],
    "btrfs": ["mkfs.btrfs", "-q", "-f", "-L", "vacatetest"],
}
MIN_MB = {"ext4": 64, "xfs": 320, "btrfs": 128}


def can_loop_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("losetup") is not None


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


@dataclass
class Volume:
    fstype: str
    image: str
    device: str
    mountpoint: str
    workdir: str
    extra_mounts: list[str] = field(default_factory=list)

    def mount_tmpfs(self, rel: str, size: str = "4m") -> str:
        """A nested tmpfs mount below the volume (it blocks an unmount)."""
        path = os.path.join(self.mountpoint, rel)
        os.makedirs(path, exist_ok=True)
        run("mount", "-t", "tmpfs", "-o", f"size={size}", "vacatetest-nested", path)
        self.extra_mounts.append(path)
        return path

    def bind(self, src: str, dst: str) -> str:
        """Bind-mount ``src`` on ``dst`` (made if missing); undone by ``close``."""
        os.makedirs(dst, exist_ok=True)
        run("mount", "--bind", src, dst)
        self.extra_mounts.append(dst)
        return dst

    def close(self) -> None:
        for path in reversed(self.extra_mounts):
            run("umount", "-l", path, check=False)
        self.extra_mounts.clear()
        run("umount", self.mountpoint, check=False)
        if os.path.ismount(self.mountpoint):
            run("umount", "-l", self.mountpoint, check=False)
        run("losetup", "-d", self.device, check=False)
        run("chattr", "-i", self.mountpoint, check=False)    # locked by a vacate apply
        shutil.rmtree(self.workdir, ignore_errors=True)


def make_volume(fstype: str = "ext4", size_mb: int | None = None,
                options: str | None = None, inodes: int | None = None) -> Volume:
    """Create, attach and mount a fresh volume. The caller must ``close()`` it.
    ``inodes``: at least this many (ext4 sets its inode count when it is made)."""
    size_mb = max(size_mb or 0, MIN_MB[fstype])
    workdir = tempfile.mkdtemp(prefix=f"vacate-{fstype}-")
    image = os.path.join(workdir, "vol.img")
    mnt = os.path.join(workdir, "mnt")
    os.mkdir(mnt)
    with open(image, "wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    try:
        run(*MKFS[fstype], *(["-N", str(inodes)] if inodes and fstype == "ext4" else []),
            image)
        device = run("losetup", "-f", "--show", image).stdout.strip()
    except Exception:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    cmd = ["mount", "-t", fstype]
    if options:
        cmd += ["-o", options]
    try:
        run(*cmd, device, mnt)
    except Exception:
        run("losetup", "-d", device, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return Volume(fstype, image, device, mnt, workdir)
