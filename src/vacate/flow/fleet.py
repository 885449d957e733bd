"""``check`` on many hosts at once: ``forks`` of them at a time (Ansible's default 5), each in
its own ssh :class:`~vacate.remote.ssh.Session` on a thread of its own (the work is waiting on
ssh; deciding is quick), so one slow or dead host holds up only its own slot, and only until
ssh's ``ConnectTimeout`` / keep-alives or ``timeout_s`` end it.

A host that could not be looked at is a :class:`HostCheck` with its error, never an exception
out of the run: the fleet's answer is every host's answer."""

from __future__ import annotations

import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace

from vacate.observing.errors import EXIT_IN_USE, EXIT_OK, EXIT_UNKNOWN, Unanswered, VacateError
from vacate.remote.inventory import InventoryHost

DEFAULT_FORKS = 5

# what a host that could not be looked at comes to, by why (its warning's code)
PROBLEM_CODES = {"unreachable": "host-unreachable", "unsupported": "connection-unsupported",
                 "refused": "host-refused", "timeout": "host-timeout", "stalled": "host-stalled",
                 "unanswered": "filesystem-not-answering", "error": "host-error"}


@dataclass(frozen=True)
class HostCheck:
    """One host's answer: ``result`` (a CheckResult), or ``error`` with its ``kind`` (a key of
    :data:`PROBLEM_CODES`) and ``hint``; ``unanswered`` the far target whose filesystem did
    not answer, when that was the error."""

    name: str                   # inventory_hostname
    label: str                  # how ssh reached it (user@host:port), or the name
    result: object = None
    error: str | None = None
    kind: str | None = None
    hint: str | None = None
    unanswered: object = None
    elapsed_s: float = 0.0

    @property
    def code(self) -> str:
        """The code of the warning a host that could not be looked at comes to."""
        return PROBLEM_CODES.get(self.kind or "error", "host-error")

    @property
    def safe(self) -> bool | None:
        """True safe to unmount, False in use, None could not tell."""
        return None if self.result is None else self.result.verdict.safe_to_unmount


def exit_code(checks) -> int:
    """1 if any host is in use (the stronger news), else 3 if any could not be told, else 0."""
    safes = [c.safe for c in checks]
    if False in safes:
        return EXIT_IN_USE
    if None in safes:
        return EXIT_UNKNOWN
    return EXIT_OK


def check_hosts(hosts: list[InventoryHost], path: str, *, forks: int = DEFAULT_FORKS,
                scan_tree: bool = True, configured: bool = True,
                timeout_s: float | None = None, stall_s: float | None = None,
                on_done=None) -> list[HostCheck]:
    """Check ``path`` on every host, ``forks`` at a time; the answers in the hosts' order.
    ``timeout_s`` bounds a host's whole look, ``stall_s`` its silence (the far side's
    heartbeat; :data:`vacate.remote.ssh.STALL_S` unless given).
    ``on_done(check, done, total)`` is called as each host finishes (from the calling
    thread)."""
    out: list[HostCheck | None] = [None] * len(hosts)
    live = _Live()
    ex = ThreadPoolExecutor(max_workers=max(1, forks), thread_name_prefix="vacate-host")
    try:
        futures = {ex.submit(check_one, h, path, scan_tree=scan_tree, configured=configured,
                             timeout_s=timeout_s, stall_s=stall_s, live=live): i
                   for i, h in enumerate(hosts)}
        for n, f in enumerate(as_completed(futures), 1):
            i = futures[f]
            out[i] = f.result()
            if on_done is not None:
                on_done(out[i], n, len(hosts))
    except BaseException:
        # interrupted (Ctrl-C, SIGTERM): start no other host, end the sessions under way
        ex.shutdown(wait=False, cancel_futures=True)
        live.abort()
        raise
    ex.shutdown(wait=True)
    return out


def check_one(h: InventoryHost, path: str, *, scan_tree: bool = True, configured: bool = True,
              timeout_s: float | None = None, stall_s: float | None = None,
              live: _Live | None = None) -> HostCheck:
    """Look at ``path`` on one host and decide; every failure becomes the answer."""
    if h.target is None:
        return HostCheck(h.name, h.name, error=h.error, kind=h.kind)
    from vacate.remote import Remote

    label = h.target.label
    start = time.monotonic()
    reach = Remote(h.target if stall_s is None else replace(h.target, stall_s=stall_s))
    watch = _Watch(reach, timeout_s)
    if live is not None and not live.add(watch):
        return HostCheck(h.name, label, error=f"{label}: not looked at (interrupted)",
                         kind="error")
    try:
        watch.start()
        check = look(h.name, label, reach, path, scan_tree=scan_tree, configured=configured,
                     start=start)
    except VacateError as e:
        check = _failed(h.name, label, start, "error", e.message, e.hint)
    except Exception as e:  # noqa: BLE001 -- a bug for one host must not end the others' run
        where_ = traceback.extract_tb(e.__traceback__)[-1:]
        at = f" at {where_[0].filename}:{where_[0].lineno}" if where_ else ""
        check = _failed(h.name, label, start, "error", f"{label}: {type(e).__name__}: {e}{at}")
    finally:
        watch.stop()
        reach.close()
        if live is not None:
            live.discard(watch)
    if check.error is not None and watch.expired:
        return _failed(h.name, label, start, "timeout",
                       f"{label}: no answer within {timeout_s:g} s",
                       hint="raise --host-timeout, or look at it alone with --host")
    return check


def look(name: str, label: str, reach, path: str, *, scan_tree: bool = True,
         configured: bool = True, start: float | None = None) -> HostCheck:
    """Observe ``path`` through ``reach`` (a :mod:`vacate.remote` reach: ssh, or Ansible's
    module transport) and decide here: the one answer ``check --inventory`` and the
    ``vacate.volume.check`` module both give. What vacate could not tell (a
    :class:`VacateError`) becomes the answer; any other error goes up (for Ansible: the host
    unreachable)."""
    from vacate.decide import verdict

    start = time.monotonic() if start is None else start
    try:
        obs = reach.observe(path, scan_tree=scan_tree, configured=configured)
        result = verdict.check(obs)
    except Unanswered as e:
        return _failed(name, label, start, "unanswered", e.message, e.hint, e.target)
    except VacateError as e:
        from vacate.remote.ssh import Stalled, Unreachable

        kind = "stalled" if isinstance(e, Stalled) else \
            "unreachable" if isinstance(e, Unreachable) else "error"
        return _failed(name, label, start, kind, e.message, e.hint)
    return HostCheck(name, label, result=result, elapsed_s=time.monotonic() - start)


def _failed(name, label, start, kind, message, hint=None, unanswered=None) -> HostCheck:
    return HostCheck(name, label, error=message, kind=kind, hint=hint, unanswered=unanswered,
                     elapsed_s=time.monotonic() - start)


class _Live:
    """The hosts under way, so that an interrupted run can end their sessions; a host that
    starts after that is not looked at."""

    def __init__(self):
        self._watches: set[_Watch] = set()
        self._stopped = False
        self._lock = threading.Lock()

    def add(self, watch: _Watch) -> bool:
        with self._lock:
            if self._stopped:
                return False
            self._watches.add(watch)
            return True

    def discard(self, watch: _Watch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def abort(self) -> None:
        with self._lock:
            self._stopped = True
            watches = list(self._watches)
        for w in watches:
            w.abort()


class _Watch:
    """Ends a host's ssh session when ``timeout_s`` passes (the read waiting on it then ends
    and the host is reported as timed out), or when the run is interrupted."""

    def __init__(self, reach, timeout_s: float | None):
        self.reach = reach
        self.timeout_s = timeout_s
        self.expired = False
        self.aborted = False
        self._timer = None
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.timeout_s is not None:
            self._timer = threading.Timer(self.timeout_s, self._expire)
            self._timer.daemon = True
            self._timer.start()
        _ = self.reach.session   # started now (ssh runs), so there is a process to end
        with self._lock:
            if self.expired or self.aborted:
                self._kill()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            self._kill()

    def abort(self) -> None:
        """End the session now (the run was interrupted)."""
        with self._lock:
            self.aborted = True
            self._kill()

    def _kill(self) -> None:
        if self.reach._session is not None:
            self.reach._session.end()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
