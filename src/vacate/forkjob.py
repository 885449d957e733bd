"""A job in a forked child whose result (bytes) comes back through a pipe: for CPU work that
can run beside this process's own on another core. Standard library only.

``start(fn, *args)`` forks; the child runs ``fn(*args)`` (which returns bytes), writes them to
the pipe and leaves with ``os._exit`` (no cleanup, no buffered output of the parent written
twice). ``join`` reads the bytes and reaps the child (None when the child failed);
``discard`` kills and reaps a child whose result is no longer wanted.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

Job = tuple[int, int]       # (child pid, read end of its pipe)


def threaded() -> bool:
    """Other threads running here (a test's helper, an embedding program): no fork then."""
    threading = sys.modules.get("threading")
    return threading is not None and threading.active_count() > 1


def start(fn: Callable[..., bytes], *args) -> Job | None:
    """Run ``fn(*args)`` in a forked child; None when no child could be started (or other
    threads run here: forking them is not safe), and the caller does the work itself."""
    if threaded():
        return None
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:                 # the child: compute, write, leave
        code = 1
        try:
            os.close(r)
            view = memoryview(fn(*args))
            while view:
                view = view[os.write(w, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def join(job: Job) -> bytes | None:
    """The child's bytes; None when it failed."""
    pid, r = job
    chunks = []
    try:
        while b := os.read(r, 1 << 20):
            chunks.append(b)
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return None
    return b"".join(chunks)


def discard(job: Job) -> None:
    """Kill and reap a child whose result is not wanted (an interrupted caller)."""
    pid, r = job
    os.close(r)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
