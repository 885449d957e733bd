"""A test filesystem with the semantics of LazyFS: what was not fsync'd is lost in a "cut".

A FUSE filesystem that keeps every change (data, attributes, names) in its daemon's memory and
makes it durable only when it is synced:

- ``fsync`` / ``fdatasync`` of a file makes that file's data and attributes durable (both
  alike: fdatasync is no weaker here), never its names;
- ``fsync`` of a directory makes that directory's entries durable; a file fsync'd in a
  directory that was never synced has no name after a cut, and is gone;
- a rename is one thing, made durable by syncing its *destination* directory, which takes
  the old name away with it; syncing only its source keeps the old name (the file is
  never lost between the two). A rename within one directory is durable when that
  directory is synced. The rule in full: :mod:`harness.lazyfs_model`'s docstring.
- ``syncfs``, ``sync`` and ``sync -f`` make nothing durable: a FUSE daemon is not told of
  them. Nor does ``close``, ``flush`` or unmounting.

A *cut* (:meth:`LazyFS.cut`) is the crash: everything not durable is dropped, in place. The
mount stays (the same ``st_dev``), mounted with the kernel's caches off (``direct_io``, every
timeout 0, no ``kernel_cache``), so nothing from before the cut is served after it. Kill the
programs writing first (``SIGKILL``, then wait for them): a cut with a writer still running is
a crash that the writer survives, and its handles on dropped inodes then fail with ``EIO``.
:meth:`LazyFS.pending` says, inode by inode, what a cut now would drop. :meth:`LazyFS.arm`
makes the cut itself, right after a given request: every crash point of a program, in turn.

The backing directory holds the durable state at rest: its tree is loaded as durable when the
filesystem is mounted, and rewritten with what is durable when it is unmounted (as if the
machine had crashed then). In between the daemon holds both states in memory: meant for test
trees of megabytes, not gigabytes.

Limits: regular files, directories and symbolic links only (no device nodes, FIFOs or
xattrs); no ``renameat2`` flags (``RENAME_NOREPLACE`` fails with ``EINVAL``: libfuse 2); no
shared writable ``mmap`` guarantees; one request served at a time. A name that is a file
before a cut and a directory after it, while a program still holds it, can read as ``EIO``
(the kernel marks that inode bad).

Needs root, ``/dev/fuse``, ``fusermount`` and ``mfusepy`` (:func:`harness.fusefs.can_fuse`).
The daemon runs as its own process (:mod:`harness.lazyfs_daemon`), never in the test's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Self

from harness.fusefs import can_fuse, is_mounted

DAEMON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lazyfs_daemon.py")

__all__ = ["LazyFS", "can_fuse"]


class LazyFS:
    """The filesystem over ``backing`` mounted at ``mountpoint`` (both existing directories),
    as a context manager (see the module's docstring)."""

    def __init__(self, backing: str, mountpoint: str, timeout: float = 15.0):
        self.backing = os.path.abspath(backing)
        self.mountpoint = os.path.abspath(mountpoint)
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self._dir = ""
        self._log = None

    @property
    def sock(self) -> str:
        return os.path.join(self._dir, "control.sock")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="lazyfs-")
        self._log = open(os.path.join(self._dir, "daemon.log"), "w+b")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, DAEMON, self.backing, self.mountpoint, self.sock],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            start_new_session=True)
        end = time.monotonic() + self.timeout
        while not (is_mounted(self.mountpoint) and os.path.exists(self.sock)):
            if self.proc.poll() is not None or time.monotonic() > end:
                log = self.log()
                self.close()
                raise RuntimeError(f"lazyfs daemon did not mount {self.mountpoint} within "
                                   f"{self.timeout:g} s: {log}")
            time.sleep(0.02)

    def log(self) -> str:
        """What the daemon wrote to its stdout and stderr."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def _ask(self, command: str) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(self.timeout)
            try:
                s.connect(self.sock)
                s.sendall(command.encode() + b"\n")
                reply = s.makefile("rb").readline()
            except OSError as e:
                raise RuntimeError(f"lazyfs daemon (pid {self.proc.pid}) did not answer "
                                   f"{command!r}: {e}; its log: {self.log()}") from e
        got = json.loads(reply)
        if not got.get("ok"):
            raise RuntimeError(f"lazyfs daemon refused {command!r}: {got}")
        return got

    def cut(self) -> dict:
        """Drop everything not durable, in place (the crash)."""
        return self._ask("cut")

    def pending(self) -> list[dict]:
        """What a cut now would drop: ``{"path", "ino", "pending": [...]}`` per inode."""
        return self._ask("pending")["pending"]

    def arm(self, step: int) -> None:
        """Cut right after the ``step``-th request from now that changes something (a
        write, a rename, an fsync, ...; 1 is the first), and then refuse every request with
        EIO until :meth:`thaw`: the machine went down after that step. 0 disarms."""
        self._ask(f"arm {int(step)}")

    def state(self) -> dict:
        """``{"steps": N, "cut": bool}`` as :meth:`thaw` says them, without thawing: whether
        an armed cut was made yet."""
        got = self._ask("state")
        return {"steps": got["steps"], "cut": got["cut"]}

    def thaw(self) -> dict:
        """Serve again after an armed cut: ``{"steps": N, "cut": bool}``, how many changing
        requests came since :meth:`arm` and whether the cut was made."""
        got = self._ask("thaw")
        return {"steps": got["steps"], "cut": got["cut"]}

    def close(self) -> None:
        """Unmount (the backing directory then holds what was durable) and stop the daemon;
        a daemon that does not end within the timeout is killed, and the mount detached."""
        if self.proc is None:
            return
        p, self.proc = self.proc, None
        end = time.monotonic() + self.timeout
        while is_mounted(self.mountpoint) and p.poll() is None and time.monotonic() < end:
            r = subprocess.run(["fusermount", "-u", self.mountpoint], capture_output=True,
                               check=False)
            if r.returncode == 0:
                break
            time.sleep(0.1)
        try:
            p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
        if is_mounted(self.mountpoint):
            subprocess.run(["fusermount", "-u", "-z", self.mountpoint], capture_output=True,
                           check=False)
        if self._log is not None:
            self._log.close()
            self._log = None
        shutil.rmtree(self._dir, ignore_errors=True)
