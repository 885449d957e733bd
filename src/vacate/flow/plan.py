"""``plan``: observe the volume, record what each item to archive or delete is, and decide
the plan (:func:`vacate.decide.plan.make_plan`). Reads only; prints nothing."""

from __future__ import annotations

import time

from vacate.decide.plan import PlanRefused, make_plan
from vacate.observing.errors import UsageError
from vacate.observing.host import Host
from vacate.observing.model.plan import Identity, Plan


def on_target(where, path: str, target) -> bool:
    """Whether ``path`` (or the directory it would be made in) lies on the target's
    filesystem, as the machine ``where`` looks at sees it."""
    m = where.call("target", path=path, nearest=True).mount
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


def plan(path: str, *, host: Host | None = None, where=None, archive_to: str | None = None,
         overrides: list[tuple[str, str]] = (), grace_s: float = 10.0, snapshot: bool = True,
         outputs: tuple[str, ...] = (), mask_references: bool = False) -> Plan:
    """The plan to retire the volume mounted at ``path``, looked at through ``where`` (a
    :mod:`vacate.remote` reach: this machine's ``host`` by default, or another over ssh).
    ``outputs``: files the plan and its journal will be written to here (refused on the
    volume itself when it is this machine's, like ``archive_to``)."""
    from vacate.remote import Local

    where = where or Local(host)
    target = where.call("target", path=path)
    if target.path != target.mountpoint:
        raise UsageError(f"{path} is not a mount point (it is on {target.mountpoint}): a plan "
                         "retires a whole volume", hint=f"vacate plan {target.mountpoint}")
    local_dest = archive_to if archive_to and "://" not in archive_to else None
    here = isinstance(where, Local) and where.ct is None
    checks = [("--archive-to", local_dest)] + \
        ([("the plan file", o) for o in outputs] if here else [])
    for what, p in checks:
        if p and on_target(where, p, target):
            raise UsageError(f"{what} {p} is on the volume being retired")
    obs = where.observe(path)
    try:
        first = make_plan(obs, archive_to=archive_to, overrides=overrides, grace_s=grace_s,
                          snapshot=snapshot, mask_references=mask_references)
    except PlanRefused as e:
        raise UsageError(str(e)) from None
    identities, entries = {}, {}
    for it in first.items:
        if it.action in ("archive", "delete"):
            rec = where.call("record_entries", path=it.path, dev=target.st_dev)
            identities[it.path] = identity_of(rec)
            if it.action == "delete":
                entries[it.path] = rec.to_json()
    free = where.call("free_bytes", path=local_dest) if local_dest else None
    return make_plan(obs, archive_to=archive_to, overrides=overrides, grace_s=grace_s,
                     snapshot=snapshot, identities=identities, entries=entries,
                     mask_references=mask_references,
                     dest_free=free, created_at=time.time())
