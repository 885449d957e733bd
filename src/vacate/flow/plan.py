"""``plan``: observe the volume, record what each item to archive or delete is, and decide
the plan (:func:`vacate.decide.plan.make_plan`). Reads only (but for the entries files it
writes beside the plan); prints nothing.

An item to archive is recorded for its identity alone (totals and digest); an item to delete
also into an entries file beside the plan (:func:`vacate.observing.entries.write_entries_file`),
which the plan names by its sha256: the plan stays a few hundred bytes an item, whatever the
item holds."""

from __future__ import annotations

import os
import time

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


def identity_of(rec) -> Identity:
    """What an item is, from recording it (:func:`vacate.observing.entries.record_item`)."""
    return Identity(dev=rec.root[2], ino=rec.root[3], apparent_bytes=rec.apparent_bytes,
                    disk_bytes=0, files=rec.files, newest_mtime_ns=rec.newest_mtime_ns,
                    newest_ctime_ns=rec.newest_ctime_ns, digest=rec.digest)


def entries_store() -> str:
    """Where entries files go when the plan is not written to a file (``-o``):
    ``$XDG_STATE_HOME/vacate/entries``, by default ``~/.local/state/vacate/entries``; apply
    looks beside the plan first, then here. Files are named by their sha256, so plans share
    it safely."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "state")
    return os.path.join(base, "vacate", "entries")


def plan(path: str, *, host: Host | None = None, archive_to: str | None = None,
         overrides: list[tuple[str, str]] = (), grace_s: float = 10.0, snapshot: bool = True,
         outputs: tuple[str, ...] = (), mask_references: bool = False) -> Plan:
    """The plan to retire the volume mounted at ``path``. ``outputs``: files the plan and its
    journal will be written to (refused on the volume itself, like ``archive_to``)."""
    from vacate.observing.entries import record_item, write_entries_file

    host = host or Host.local()
    target = mounts.resolve_target(path, host)
    if os.path.realpath(path) != target.mountpoint:
        raise UsageError(f"{path} is not a mount point (it is on {target.mountpoint}): a plan "
                         "retires a whole volume", hint=f"vacate plan {target.mountpoint}")
    local_dest = archive_to if archive_to and "://" not in archive_to else None
    store = os.path.dirname(os.path.abspath(outputs[0])) if outputs else entries_store()
    for what, p in [("--archive-to", local_dest)] + [("the plan file", o) for o in outputs] + \
            [("the entries files' directory", store)]:
        if p and on_target(p, target, host):
            raise UsageError(f"{what} {p} is on the volume being retired")
    obs = observe(path, host=host)
    try:
        first = make_plan(obs, archive_to=archive_to, overrides=overrides, grace_s=grace_s,
                          snapshot=snapshot, mask_references=mask_references)
    except PlanRefused as e:
        raise UsageError(str(e)) from None
    identities, entries = {}, {}
    for it in first.items:
        if it.action == "archive":
            identities[it.path] = identity_of(record_item(it.path, dev=target.st_dev))
        elif it.action == "delete":
            os.makedirs(store, exist_ok=True)
            rec = write_entries_file(it.path, dev=target.st_dev, directory=store)
            identities[it.path] = identity_of(rec)
            entries[it.path] = rec.reference()
    free = None
    if local_dest:
        st = os.statvfs(existing_parent(local_dest))
        free = st.f_bavail * st.f_frsize
    return make_plan(obs, archive_to=archive_to, overrides=overrides, grace_s=grace_s,
                     snapshot=snapshot, identities=identities, entries=entries,
                     mask_references=mask_references,
                     dest_free=free, created_at=time.time())
