"""When vacate may fork a helper process, and how a helper dies with its parent. Standard
library only.

The walk, the first look over ``/proc`` and the recognisers split work over forked children
on machines with more than one CPU. A fork is safe only while this process runs no other
thread (a thread's locks would be copied held), and worth it only with a CPU to spare.
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


def threaded() -> bool:
    """Other threads running here (a test's helper, an embedding program): no fork then."""
    threading = sys.modules.get("threading")
    return threading is not None and threading.active_count() > 1


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
