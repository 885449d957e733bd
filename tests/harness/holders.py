"""Real processes (and kernel objects) that use a volume in every way an auditor must see.

``Holders(mnt)`` starts each holder in its own session (so its pid is its process group) and
``close()`` kills exactly those groups, then undoes the swap files and loop devices it set up.
Each ``start_*`` returns the pid of the process that holds the volume (after it is ready).

Every holder dies with the test process even when that is killed (``kill -9`` of pytest, a
CI timeout) and ``close()`` never runs: each is started with ``PR_SET_PDEATHSIG`` = SIGKILL
through a small exec wrapper (kept across ``exec``; a holder that is a shell ``exec``s its last
command, so the holding process is the one started), and a :class:`Crowd`'s sleepers are each
tied the same way to a leader that is tied to the test process.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

MMAP_ONLY = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True); libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_RDONLY); a = libc.mmap(None, 4096, 1, 1, fd, 0); os.close(fd)
assert a not in (None, ctypes.c_void_p(-1).value)
open(sys.argv[2], "w").close()
time.sleep(1e9)
"""

PY_MMAP = r"""
import mmap, sys, time
f = open(sys.argv[1], "rb"); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); f.close()
open(sys.argv[2], "w").close()
time.sleep(1e9)
"""


# Runs argv[1:] tied to the test process: SIGKILL when its parent ends (PR_SET_PDEATHSIG,
# kept across exec); when the parent already ended, before the call, it ends now. Done in a
# process of its own rather than in a preexec_fn, which is unsafe with threads.
DIE_WITH_PARENT = r"""
import ctypes, os, signal, sys
if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0) != 0 or \
        os.getppid() != int(sys.argv[1]):
    os._exit(1)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def tied(argv: list[str]) -> list[str]:
    """``argv`` run so that it dies with this process."""
    return [sys.executable, "-c", DIE_WITH_PARENT, str(os.getpid()), *argv]


# A crowd's leader: forks the sleepers (each dies with the leader, which dies with the test)
CROWD_LEADER = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
for d, n in ((sys.argv[1], int(sys.argv[2])), ("/", int(sys.argv[3]))):
    for _ in range(n):
        if os.fork() == 0:
            if libc.prctl(1, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != me:
                os._exit(1)
            os.chdir(d)
            os.execvp("sleep", ["sleep", "1d"])
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
"""


def _wait_for(path: str, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise TimeoutError(f"holder never became ready ({path})")
        time.sleep(0.01)


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


@dataclass
class Holders:
    mnt: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    swaps: list[str] = field(default_factory=list)
    loops: list[str] = field(default_factory=list)
    tmp: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="vacate-holders-"))

    def _flag(self, label: str) -> str:
        return os.path.join(self.tmp, f"{label}.ready")

    def spawn(self, label: str, argv: list[str], *, ready: str | None = None,
              env: dict | None = None, cwd: str | None = None) -> int:
        p = subprocess.Popen(tied(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True,
                             env=env, cwd=cwd)
        self.procs[label] = p
        if ready:
            _wait_for(ready)
        return p.pid

    def sh(self, label: str, script: str, **kw) -> int:
        flag = self._flag(label)
        return self.spawn(label, ["bash", "-c", script + f"; : > '{flag}'; exec sleep 1d"],
                          ready=flag, **kw)

    # -- one kind each ---------------------------------------------------------------------
    def fd(self, path: str) -> int:
        return self.sh("fd", f"exec 3<'{path}'")

    def writer(self, path: str) -> int:
        return self.sh("writer", f"exec 5>>'{path}'; echo tick >&5")

    def py_mmap(self, path: str) -> int:
        return self.spawn("pymmap", [sys.executable, "-c", PY_MMAP, path, self._flag("pymmap")],
                          ready=self._flag("pymmap"))

    def mmap_only(self, path: str) -> int:
        return self.spawn("mmaponly", [sys.executable, "-c", MMAP_ONLY, path,
                                       self._flag("mmaponly")], ready=self._flag("mmaponly"))

    def shared_lib(self, libdir: str) -> int:
        """``sleep`` with libc loaded from ``libdir`` on the volume (a mapping, no fd)."""
        os.makedirs(libdir, exist_ok=True)
        shutil.copy2("/lib/x86_64-linux-gnu/libc.so.6", os.path.join(libdir, "libc.so.6"))
        env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        pid = self.spawn("lib", ["sleep", "1d"], env=env)
        self._wait_maps(pid, libdir)
        return pid

    def cwd(self, path: str) -> int:
        return self.spawn("cwd", ["sleep", "1d"], cwd=path)

    def exe(self, bindir: str) -> int:
        os.makedirs(bindir, exist_ok=True)
        exe = os.path.join(bindir, "sleeper")
        shutil.copy2(shutil.which("sleep"), exe)
        pid = self.spawn("exe", [exe, "1d"])
        self._wait_maps(pid, bindir)
        return pid

    def deleted(self, path: str) -> int:
        return self.sh("deleted", f"exec 4>'{path}'; head -c 65536 /dev/zero >&4; rm -f '{path}'")

    def private_ns_bind(self, subdir: str, file_name: str) -> tuple[int, str]:
        """A process in a private mount namespace that sees ``subdir`` of the volume only
        through a bind mount at a path of its own, and holds ``file_name`` in it open."""
        where = os.path.join(self.tmp, "nsbind")
        os.makedirs(where, exist_ok=True)
        flag = self._flag("nsbind")
        script = (f"mount --bind '{subdir}' '{where}' && umount -l '{self.mnt}' 2>/dev/null; "
                  f"cd '{where}' && exec 3<'{file_name}' && : > '{flag}' && exec sleep 1d")
        pid = self.spawn("nsbind", ["unshare", "-m", "--propagation", "private",
                                    "bash", "-c", script], ready=flag)
        return pid, where

    def _wait_maps(self, pid: int, needle: str, timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with open(f"/proc/{pid}/maps") as f:
                    if needle in f.read():
                        return
            except OSError:
                pass
            time.sleep(0.01)
        raise TimeoutError(f"pid {pid} never mapped {needle}")

    # -- kernel users ---------------------------------------------------------------------
    def swapfile(self, path: str, fstype: str, mb: int = 16) -> str:
        if fstype == "btrfs":
            run("btrfs", "filesystem", "mkswapfile", "-s", f"{mb}m", path)
        else:
            with open(path, "wb") as f:
                f.write(b"\0" * mb * 1024 * 1024)
            os.chmod(path, 0o600)
            run("mkswap", "-q", path)
        run("swapon", path)
        self.swaps.append(path)
        return path

    def loop_device(self, path: str, mb: int = 8) -> str:
        with open(path, "wb") as f:
            f.truncate(mb * 1024 * 1024)
        dev = run("losetup", "-f", "--show", path).stdout.strip()
        self.loops.append(dev)
        return dev

    def pid(self, label: str) -> int:
        return self.procs[label].pid

    def stop(self, label: str) -> None:
        p = self.procs.pop(label)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=10)

    def close(self) -> None:
        for label in list(self.procs):
            self.stop(label)
        for path in self.swaps:
            run("swapoff", path, check=False)
        self.swaps.clear()
        for dev in self.loops:
            run("losetup", "-d", dev, check=False)
        self.loops.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)


@dataclass
class Crowd:
    """``n_on`` sleepers working in ``on_dir`` and ``n_off`` more in ``/``, in one process
    group of their own (stdio on /dev/null) with their leader; ``close()`` kills that group."""
    on_dir: str
    n_on: int
    n_off: int
    proc: subprocess.Popen | None = None
    on: set[int] = field(default_factory=set)
    off: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.proc = subprocess.Popen(
            tied([sys.executable, "-c", CROWD_LEADER, self.on_dir, str(self.n_on),
                  str(self.n_off)]),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, cwd="/")
        try:
            end = time.monotonic() + 60
            pids: list[int] = []
            while len(pids) < self.n_on + self.n_off:
                if time.monotonic() > end:
                    raise TimeoutError("the crowd of sleepers never came up")
                time.sleep(0.2)
                pids = [int(p) for p in run("pgrep", "-g", str(self.proc.pid), "-x", "sleep",
                                            check=False).stdout.split()]
            for p in pids:
                (self.on if os.readlink(f"/proc/{p}/cwd") == self.on_dir else self.off).add(p)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc = None
