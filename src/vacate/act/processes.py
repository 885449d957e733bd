"""Ending a holder process: TERM, a grace period, then KILL, each signal sent only to the
process the plan named.

A process is its pid *and* its start time (``/proc/PID/stat`` field 22, in clock ticks since
boot): a pid is reused once its process is gone, so the start time is read again right before
every signal. Where the kernel has pidfds (Linux >= 5.3) the process is pinned first
(``os.pidfd_open``), its start time checked once the pidfd is open, and every signal goes
through the pidfd (``signal.pidfd_send_signal``): a pidfd names one process for good, so no
other process can receive a signal meant for it, and its exit is waited for by polling the
pidfd. Without pidfds, ``os.kill`` follows the re-check.

A stopped process (state T) is sent SIGCONT after the TERM, so that it can act on it.

Never signalled (``ready`` says why; ``run`` answers ``manual``): PID 1 of any pid namespace
(the host's init, a container's or a booted systemd's: stop the container or machine), this
process and its ancestors, kernel threads, and container monitors (``[lxc monitor]``,
``containerd-shim``, ``conmon``: they are stopped with their container).

The helpers reading ``/proc`` (:func:`start_time`, :func:`same_process`, :func:`pid_namespace`,
:func:`namespace_init`) are shared with the other action modules.
"""

from __future__ import annotations

import os
import select
import signal
import time

from vacate.act.base import Context, Outcome
from vacate.act.kind import Kind, params
from vacate.observing.collectors.procs_probe import EXITED, PF_KTHREAD, stat_fields
from vacate.observing.host import Host
from vacate.observing.model.plan import Step

GRACE_S = 10.0


KINDS = (Kind("end-process"),)

KILL_WAIT_S = 10.0           # how long a KILLed process may take to be gone
MONITORS = ("[lxc monitor]", "containerd-shim", "conmon")


# -- /proc ------------------------------------------------------------------------------------
def _stat(pid: int, host: Host) -> list[bytes] | None:
    try:
        with open(host.proc_path(pid, "stat"), "rb") as f:
            fields = stat_fields(f.read())
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields if len(fields) >= 20 else None


def start_time(pid: int, host: Host | None = None) -> int | None:
    """``pid``'s start time (clock ticks since boot), or None when no process has that pid
    or it has exited (a zombie holds nothing: its files are closed)."""
    fields = _stat(pid, host or Host.local())
    if fields is None or fields[0] in EXITED:
        return None
    return int(fields[19])


def same_process(pid: int, start: int | None, host: Host | None = None) -> bool:
    """``pid`` is still the process that started at ``start`` (any live process with that
    pid when ``start`` is unknown)."""
    now = start_time(pid, host)
    return now is not None and (start is None or now == int(start))


def _status(pid: int, host: Host, key: str) -> list[str] | None:
    try:
        with open(host.proc_path(pid, "status"), errors="replace") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k == key:
                    return v.split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def is_namespace_init(pid: int, host: Host | None = None) -> bool:
    """``pid`` is PID 1 of its own pid namespace (the last ``NSpid`` field is 1)."""
    ns = _status(pid, host or Host.local(), "NSpid")
    return pid == 1 or bool(ns) and ns[-1] == "1"


def pid_namespace(pid: int | str, host: Host | None = None) -> str | None:
    """``pid:[INODE]`` of ``pid``'s pid namespace, or None when it is gone."""
    try:
        return os.readlink((host or Host.local()).proc_path(pid, "ns", "pid"))
    except OSError:
        return None


def namespace_init(ns: str, host: Host | None = None) -> int | None:
    """The host pid of PID 1 of the pid namespace ``ns`` (``pid:[INODE]``), or None when no
    process is (the namespace is gone)."""
    host = host or Host.local()
    try:
        names = os.listdir(host.proc)
    except OSError:
        return None
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid_namespace(pid, host) == ns and is_namespace_init(pid, host):
            return pid
    return None


def _ancestors(host: Host) -> set[int]:
    out = {os.getpid()}
    pid = os.getppid()
    while pid > 0 and pid not in out:
        out.add(pid)
        fields = _stat(pid, host)
        if fields is None:
            break
        pid = int(fields[1])
    return out


def _cmdline(pid: int, host: Host) -> str:
    try:
        with open(host.proc_path(pid, "cmdline"), "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


# -- the step ---------------------------------------------------------------------------------
def _identity(step: Step) -> tuple[int | None, int | None]:
    pre = step.precondition
    return pre.pid, pre.start_time


def done(step: Step, ctx: Context) -> bool:
    """No process has the planned pid and start time."""
    pid, start = _identity(step)
    if pid is None or start is None:
        return False
    return not same_process(pid, start, ctx.host)


def _never(pid: int, host: Host) -> str | None:
    """Why ``pid`` is one vacate never signals, or None."""
    if is_namespace_init(pid, host):
        return (f"pid {pid} is PID 1 of a pid namespace (an init: the host's, a container's "
                "or a booted systemd's): stop its container or machine instead")
    if pid in _ancestors(host):
        return f"pid {pid} is vacate itself or one of its ancestors"
    fields = _stat(pid, host)
    if fields is not None and int(fields[6]) & PF_KTHREAD:
        return f"pid {pid} is a kernel thread"
    cmd = _cmdline(pid, host)
    first = os.path.basename(cmd.split(" ", 1)[0]) if cmd else ""
    for m in MONITORS:
        if cmd.startswith(m) or first.startswith(m):
            return (f"pid {pid} is a container monitor ({cmd[:80]}): stop its container "
                    "instead")
    return None


def ready(step: Step, ctx: Context) -> str | None:
    """None when the planned process is alive as planned and is one vacate may signal."""
    pid, start = _identity(step)
    if pid is None or start is None:
        return "the step names no pid and start time"
    now = start_time(pid, ctx.host)
    if now is None:
        return f"pid {pid} is gone: there is nothing to end"
    if now != start:
        return (f"pid {pid} is another process now (started at {now}, planned {start}): "
                "the planned one is gone; nothing is signalled")
    return _never(pid, ctx.host)


class _Target:
    """The planned process, pinned by a pidfd where the kernel has them."""

    def __init__(self, pid: int, start: int, host: Host):
        self.pid, self.start, self.host = pid, start, host
        self.fd: int | None = None
        if hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal"):
            try:
                self.fd = os.pidfd_open(pid)  # novermin (3.9+, checked above)
            except ProcessLookupError:
                pass
            except OSError:          # ENOSYS: an older kernel
                self.fd = None
        self.via = "pidfd" if self.fd is not None else "kill"

    def alive(self) -> bool:
        return same_process(self.pid, self.start, self.host)

    def stopped(self) -> bool:
        fields = _stat(self.pid, self.host)
        return fields is not None and fields[0] in (b"T", b"t")

    def send(self, sig: int) -> bool:
        """Send ``sig`` if the process is still the planned one; False when it is not (gone,
        or the pid is another process's)."""
        if not self.alive():
            return False
        try:
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, sig)  # novermin (with the pidfd)
            else:
                os.kill(self.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the process to end; True when it has."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.fd is not None:
                # a pidfd is readable once its process has exited
                select.select([self.fd], [], [], min(left, 0.5))
            else:
                time.sleep(min(left, 0.05))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def skipped(step: Step, ctx: Context) -> Outcome:
    pid, start = _identity(step)
    return Outcome("skipped", f"pid {pid} (started at {start}) is gone",
                   data={"pid": pid, "signals": [], "killed": False, "waited_s": 0.0})


def not_ready(step: Step, ctx: Context, why: str) -> Outcome:
    """A process the plan identified that cannot be signalled now (another process has its
    pid, it is an init) is a person's call; a step without an identity is a failure."""
    pid, start = _identity(step)
    status = "failed" if pid is None or start is None else "manual"
    return Outcome(status, why, data={"pid": pid, "signals": []})


def run(step: Step, ctx: Context) -> Outcome:
    """TERM, wait ``params.grace_s``, KILL if it is still there; the identity re-checked
    before each signal."""
    pid, start = _identity(step)
    grace = params(step).grace_s
    target = _Target(pid, start, ctx.host)
    sent: list[str] = []
    t0 = time.monotonic()
    try:
        if not target.alive():               # gone between the check and the pidfd
            return Outcome("skipped", f"pid {pid} ended before it was signalled",
                           data={"pid": pid, "signals": [], "killed": False,
                                 "waited_s": 0.0, "via": target.via})
        if target.send(signal.SIGTERM):
            sent.append("TERM")
            # a stopped process gets its TERM only once continued (systemd does the same)
            if target.stopped() and target.send(signal.SIGCONT):
                sent.append("CONT")
        ended = target.wait(grace)
        if not ended and target.send(signal.SIGKILL):
            sent.append("KILL")
        if not ended:
            ended = target.wait(KILL_WAIT_S)
    finally:
        target.close()
    data = {"pid": pid, "start_time": start, "signals": sent, "killed": "KILL" in sent,
            "waited_s": round(time.monotonic() - t0, 3), "via": target.via}
    if not ended:
        fields = _stat(pid, ctx.host)
        state = fields[0].decode() if fields else "?"
        return Outcome("failed", f"pid {pid} did not end after {' then '.join(sent)} "
                                 f"(state {state}: waiting in the kernel?)", data=data)
    how = "ended before any signal" if not sent else "ended on TERM" if "KILL" not in sent \
        else f"ended after KILL ({grace:g} s grace)"
    return Outcome("ok", f"pid {pid} {how}", data=data)
