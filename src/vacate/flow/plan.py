"""``plan``: observe the volume, record what each item to archive or delete is, and decide
the plan (:func:`vacate.decide.plan.make_plan`). Reads only; prints nothing."""

from __future__ import annotations

import os
import time

from vacate.flow.carve import carve
from vacate.flow.running import refuse_running_system
from vacate.observing.collectors import mounts
from vacate.observing.observe import observe
from vacate.decide.plan import PlanRefused, make_plan
from vacate.observing.errors import UsageError
from vacate.observing.fsio import existing_parent
from vacate.observing.host import Host
from vacate.observing.model.plan import Identity, Plan


def on_target(path: str, target, host: Host) -> bool:
    """Whether ``path`` (or the directory it would be made in) lies on the target's
    filesystem."""
    m = mounts.resolve_target(existing_parent(path), host).mount
    return (m.major, m.minor) == (target.mount.major, target.mount.minor)


def identity_of(entries) -> Identity:
    """What an item is, from its recorded entries."""
    rows = list(entries.entries())
    first = rows[0]
    files = sum(1 for e in rows if e.kind not in ("dir", "subvolume", "mountpoint"))
    return Identity(dev=first.dev, ino=first.ino,
                    apparent_bytes=sum(e.size for e in rows),
                    disk_bytes=0, files=files,
                    newest_mtime_ns=max((e.mtime_ns for e in rows), default=None),
                    newest_ctime_ns=max((e.ctime_ns for e in rows), default=None),
                    digest=entries.digest())


def plan(path: str, *, host: Host | None = None, archive_to: str | None = None,
         overrides: list[tuple[str, str]] = (), grace_s: float = 10.0, snapshot: bool = True,
         outputs: tuple[str, ...] = (), mask_references: bool = False) -> Plan:
    """The plan to retire the volume mounted at ``path``. ``outputs``: files the plan and its
    journal will be written to (refused on the volume itself, like ``archive_to``)."""
    from vacate.observing.entries import record_entries

    host = host or Host.local()
    target = mounts.resolve_target(path, host)
    refuse_running_system(path, target, host)
    if os.path.realpath(path) != target.mountpoint:
        raise UsageError(f"{path} is not a mount point (it is on {target.mountpoint}): a plan "
                         "retires a whole volume", hint=f"vacate plan {target.mountpoint}")
    local_dest = archive_to if archive_to and "://" not in archive_to else None
    for what, p in [("--archive-to", local_dest)] + [("the plan file", o) for o in outputs]:
        if p and on_target(p, target, host):
            raise UsageError(f"{what} {p} is on the volume being retired")
    obs = carve(observe(path, host=host), list(overrides))
    try:
        first = make_plan(obs, archive_to=archive_to, overrides=overrides, grace_s=grace_s,
                          snapshot=snapshot, mask_references=mask_references)
    except PlanRefused as e:
        raise UsageError(str(e)) from None
    identities, entries = {}, {}
    for it in first.items:
        if it.action in ("archive", "delete"):
            rec = record_entries(it.path, dev=target.st_dev)
            identities[it.path] = identity_of(rec)
            if it.action == "delete":
                entries[it.path] = rec.to_json()
    free = None
    if local_dest:
        st = os.statvfs(existing_parent(local_dest))
        free = st.f_bavail * st.f_frsize
    return make_plan(obs, archive_to=archive_to, overrides=overrides, grace_s=grace_s,
                     snapshot=snapshot, identities=identities, entries=entries,
                     mask_references=mask_references,
                     dest_free=free, created_at=time.time())
