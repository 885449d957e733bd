"""The apply journal: ``PLAN.journal`` beside the plan, one JSON line per record, each written
and fsynced before the next thing happens.

A step's ``intent`` is written before it acts and its ``outcome`` after; a step whose last
record is an intent was started and is never read as finished (a rerun checks it again, as
dpkg's half-installed states are). The first record names the plan's sha256: a journal
belongs to one plan, and a plan edited since is not resumed. ``flock`` on the plan file keeps
one apply at a time per plan (:class:`PlanLock`).

Standard library only. This module writes the journal; what it says is read by
:mod:`vacate.observing.model.journal` (the reader every layer may import).
"""

from __future__ import annotations

import fcntl
import json
import os
import time

from vacate.observing.model.journal import (
    JournalError,
    StepState,
    check_belongs,
    read_records,
    states_of,
)

SCHEMA = "vacate.journal/1"


class PlanLock:
    """One apply at a time per plan: ``flock`` on the plan file itself, held from before
    anything is checked until the apply ends (so a refusal leaves no journal behind)."""

    def __init__(self, plan_path: str):
        self.plan_path = plan_path
        self.fd = -1

    def __enter__(self) -> PlanLock:
        self.fd = os.open(self.plan_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = -1
            raise JournalError(f"another vacate apply is running {self.plan_path}") from None
        return self

    def __exit__(self, *exc) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Journal:
    """An open journal (see the module's docstring), as a context manager."""

    def __init__(self, path: str, plan_sha256: str):
        self.path = path
        self.plan_sha256 = plan_sha256
        self.fd = -1

    def __enter__(self) -> Journal:
        recs = check_belongs(self.path, self.plan_sha256)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self._end_torn_tail()
        if not recs:
            self.write({"event": "begin", "schema": SCHEMA, "plan_sha256": self.plan_sha256})
            dfd = os.open(os.path.dirname(os.path.abspath(self.path)),
                          os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(dfd)        # the journal's own name survives a crash too
            finally:
                os.close(dfd)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _end_torn_tail(self) -> None:
        """A last line a crash cut short ends here, fsynced, before anything is appended:
        otherwise the next record would run on from it, and the reader skip both."""
        size = os.fstat(self.fd).st_size
        if size and os.pread(self.fd, 1, size - 1) != b"\n":
            os.write(self.fd, b"\n")
            os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def write(self, rec: dict) -> None:
        """Append one record and fsync it before returning."""
        rec = {"t": time.time(), **rec}
        line = (json.dumps(rec, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
        view = memoryview(line)
        while view:
            view = view[os.write(self.fd, view):]
        os.fsync(self.fd)

    def intent(self, step_id: str, kind: str) -> None:
        self.write({"event": "intent", "step": step_id, "kind": kind})

    def outcome(self, step_id: str, status: str, detail: str = "", data: dict | None = None
                ) -> None:
        self.write({"event": "outcome", "step": step_id, "status": status, "detail": detail,
                    "data": data or {}})

    def records(self) -> list[dict]:
        """Every whole record in the journal (a last line cut short by a crash is left out)."""
        return read_records(self.path)

    def states(self) -> dict[str, StepState]:
        return states_of(self.records())
