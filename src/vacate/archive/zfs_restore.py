"""``restore_native()``: a native archive received as a new dataset, its parts checked on
the way (a part whose sha256 is not the archived one fails the restore, and the half-received
dataset is destroyed), the received snapshot's guid checked against the manifest."""

from __future__ import annotations

import time
from dataclasses import dataclass

from vacate.archive import zfs_names as zn
from vacate.archive import zfs_tool
from vacate.archive.findings import Finding, exit_code
from vacate.archive.target import LocalTarget
from vacate.archive.zfs_verify import check_listing, load, no_progress, receive
from vacate.observing.compat import SLOTS
from vacate.observing.errors import UsageError


@dataclass(frozen=True, **SLOTS)
class NativeRestoreResult:
    """What a native restore received, and where."""

    location: str
    origin: str
    into: str
    snapshot: str                   # INTO@SNAP, as received
    bytes_read: int
    findings: tuple[Finding, ...]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def exit_code(self) -> int:
        return exit_code(self.findings)


def restore_native(target: LocalTarget, into: str, *, progress=no_progress) -> NativeRestoreResult:
    t0 = time.monotonic()
    if why := zn.dataset_error(into) or ("" if "/" in into else "name it POOL/NAME"):
        raise UsageError(f"--into {into!r}: {why}")
    m = load(target)
    if zfs_tool.exists(into):
        raise UsageError(f"{into} exists: a restore makes a new dataset",
                         hint="name one that does not exist (zfs receive POOL/NEW)")
    parent = into.rsplit("/", 1)[0]
    if not zfs_tool.exists(parent):
        raise UsageError(f"{parent} does not exist: nothing to receive {into} under")
    findings = check_listing(target, m)
    if findings:
        return NativeRestoreResult(target.location, m.origin, into, "", 0, tuple(findings),
                                   time.monotonic() - t0)
    feeder, findings = receive(target, m, into, progress, "not-restored")
    got = f"{into}@{m.snapshot}"
    if not findings:
        guid = int(zfs_tool.props(got, "guid")["guid"]) if zfs_tool.exists(got) else None
        if guid != m.guid:
            findings.append(Finding("not-restored", f"{got}: guid {guid}, archived {m.guid}"))
    if findings and zfs_tool.exists(into):
        zfs_tool.destroy_r(into)       # a part did not check: nothing half-trusted is left
    return NativeRestoreResult(target.location, m.origin, into, got if not findings else "",
                               feeder.bytes, tuple(findings), time.monotonic() - t0)
