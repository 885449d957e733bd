"""When vacate may fork a helper process, and how a helper dies with its parent. Standard
library only.

The walk, the first look over ``/proc``, the recognisers and the delete split work over forked
children on machines with more than one CPU. A fork is safe only while this process runs no
other thread (a lock a thread holds is copied held, and the child waits on it forever: the
lock of ``sys.stdin``'s buffer, an import lock, a logging handler's), and worth it only with a
CPU to spare. Threads are counted as the kernel sees them (``/proc/self/task``, what CPython
3.12's own warning counts), so a C library's threads count too.

One fork is made under threads on purpose: :mod:`~vacate.observing.collectors.guarded`'s,
whose child only makes system calls and reports through a pipe (its doc says why).
"""

from __future__ import annotations

import os
import sys


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads() -> int:
    """The threads of this process, as the kernel counts them (those Python did not start
    included); where ``/proc`` cannot tell, those the threading module knows."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        threading = sys.modules.get("threading")
        return 1 if threading is None else threading.active_count()


def threaded() -> bool:
    """Other threads running here (a reader, a test's helper, an embedding program): no fork
    then."""
    return threads() > 1


def can_fork() -> bool:
    return hasattr(os, "fork") and cpus() >= 2 and not threaded()


def die_with_parent(parent: int) -> None:
    """In a forked child: ask the kernel to SIGKILL it when its parent dies (Linux prctl
    PR_SET_PDEATHSIG), so a parent killed outright (SIGKILL, OOM) leaves no child behind."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)       # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:   # the parent died before prctl took effect
        os._exit(1)
