"""Real LXC system containers for tests (apt package ``lxc``; no network, no lxc-create).

A container gets a uniquely named directory in the real ``/var/lib/lxc`` (so LXC's own tools
and an auditor reading the host find it), a rootfs extracted from the cached Debian tarball
(tests/harness/rootfs.py) wherever the test asks (on the host disk or on a test volume), a
config written here, and ``/bin/sleep infinity`` as init. ``LxcBox.close`` stops it (kill: a
sleeping init ignores SIGPWR) and removes only what it made. Needs root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field

from harness import rootfs

LXCPATH = "/var/lib/lxc"


def lxc_available() -> bool:
    return os.geteuid() == 0 and shutil.which("lxc-start") is not None


def why_not() -> str | None:
    """Why real LXC containers cannot be made here, or None."""
    if not lxc_available():
        return "needs root and LXC (apt package lxc)"
    why = rootfs.unavailable()
    return f"no container rootfs: {why}" if why else None


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60)


@dataclass
class LxcBox:
    name: str
    config: str
    rootfs: str
    made: list[str] = field(default_factory=list)   # directories to remove on close
    log: str = ""

    def start(self) -> int:
        """Start the container; returns the host pid of its init."""
        r = _run("lxc-start", "-n", self.name, "-d", "-l", "INFO", "-o", self.log, check=False)
        if r.returncode != 0:
            log = ""
            if os.path.exists(self.log):
                with open(self.log) as f:
                    log = f.read()[-2000:]
            raise RuntimeError(f"lxc-start {self.name} failed: {r.stderr}\n{log}")
        _run("lxc-wait", "-n", self.name, "-s", "RUNNING", "-t", "20")
        return self.pid()

    def pid(self) -> int:
        return int(_run("lxc-info", "-n", self.name, "-p", "-H").stdout.strip())

    def running(self) -> bool:
        r = _run("lxc-info", "-n", self.name, "-s", "-H", check=False)
        return r.stdout.strip() == "RUNNING"

    def stop(self) -> None:
        if self.running():
            _run("lxc-stop", "-n", self.name, "-k", check=False)
            _run("lxc-wait", "-n", self.name, "-s", "STOPPED", "-t", "20", check=False)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        for d in reversed(self.made):
            shutil.rmtree(d, ignore_errors=True)


def make_box(*, rootfs_dir: str | None = None, extra: list[str] | tuple[str, ...] = (),
             prefix: str = "vacate-t") -> LxcBox:
    """Write a container (not started). ``rootfs_dir``: where its rootfs goes (default: the
    container directory on the host disk); ``extra``: config lines appended."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cdir = os.path.join(LXCPATH, name)
    os.makedirs(cdir)
    box = LxcBox(name, os.path.join(cdir, "config"), "", [cdir], os.path.join(cdir, "lxc.log"))
    try:
        r = rootfs_dir or os.path.join(cdir, "rootfs")
        if not os.path.exists(r):
            box.made.append(r)
        rootfs.extract(r)
        box.rootfs = r
        lines = [
            f"lxc.uts.name = {name}",
            "lxc.arch = amd64",
            f"lxc.rootfs.path = dir:{r}",
            "lxc.include = /usr/share/lxc/config/common.conf",
            "lxc.apparmor.profile = unconfined",   # no AppArmor in this kernel
            "lxc.net.0.type = empty",              # private netns with lo only
            "lxc.tty.max = 0",
            "lxc.init.cmd = /bin/sleep infinity",
            *extra,
        ]
        with open(box.config, "w") as f:
            f.write("# written by tests/harness/lxc_box.py\n" + "\n".join(lines) + "\n")
    except BaseException:
        box.close()
        raise
    return box
