"""``plan``: observe the volume, record what each item to archive or delete is, and decide
the plan (:func:`vacate.decide.plan.make_plan`). Reads only (but for the entries files it
writes beside the plan); prints nothing.

An item to archive is recorded for its identity alone (totals and digest); an item to delete
also into an entries file beside the plan (:func:`vacate.observing.entries.write_entries_file`),
which the plan names by its sha256: the plan stays a few hundred bytes an item, whatever the
item holds. Where the plan is made here, the items named by ``--delete`` are recorded by the
observation's own walk (:mod:`vacate.observing.entries_fused`: one ``lstat`` an entry for
both), and those it could not record for certain are recorded alone after it."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import replace

from vacate.decide.plan import PlanRefused, deleted, make_plan
from vacate.decide.request import PlanRequest
from vacate.flow.carve import carve, is_glob
from vacate.flow.running import refuse_running_system
from vacate.observing.entries_fused import WalkRecords
from vacate.observing.errors import UsageError
from vacate.observing.fsio import makedirs_durable
from vacate.observing.host import Host
from vacate.observing.model.observation import Destination
from vacate.observing.model.plan import Identity, Plan
from vacate.observing.store import entries_store


def on_target(reach, path: str, target) -> bool:
    """Whether ``path`` (or the directory it would be made in) lies on the target's
    filesystem, as the machine ``reach`` looks at sees it."""
    m = reach.call("target", path=path, nearest=True).mount
    return (m.major, m.minor) == (target.mount.major, target.mount.minor)


def identity_of(rec) -> Identity:
    """What an item is, from recording it (:func:`vacate.observing.entries.record_item`)."""
    return Identity(dev=rec.root[2], ino=rec.root[3], apparent_bytes=rec.apparent_bytes,
                    disk_bytes=0, files=rec.files, newest_mtime_ns=rec.newest_mtime_ns,
                    newest_ctime_ns=rec.newest_ctime_ns, digest=rec.digest)


def plan(path: str, *, host: Host | None = None, reach=None, archive_to: str | None = None,
         overrides: list[tuple[str, str]] = (), grace_s: float = 10.0, snapshot: bool = True,
         outputs: tuple[str, ...] = (), mask_references: bool = False,
         migrations: dict[str, str] | None = None, archive_format: str = "tar",
         verify_pool: str | None = None, free_volume: bool = False) -> Plan:
    """The plan to retire the volume mounted at ``path``, looked at through ``reach`` (a
    :mod:`vacate.remote` reach: this machine's ``host`` by default, or another over ssh).
    ``outputs``: files the plan and its journal will be written to here (refused on the
    volume itself when it is this machine's, like ``archive_to``). With a container
    (``reach.ct``), each destination of ``migrations`` is spelled as the container spells
    it, like ``path``: the copy goes where the host has it, and the container's units are
    repointed to it as the container sees it."""
    from vacate.remote import Local

    reach = reach or Local(host)
    target = reach.call("target", path=path, ct=reach.ct)
    refuse_running_system(path, target, reach.call("system_devices"))
    if target.path != target.mountpoint:
        raise UsageError(f"{path} is not a mount point (it is on {target.mountpoint}): a plan "
                         "retires a whole volume", hint=f"vacate plan {target.mountpoint}")
    local_dest = archive_to if archive_to and "://" not in archive_to else None
    here = isinstance(reach, Local) and reach.ct is None
    store = os.path.dirname(os.path.abspath(outputs[0])) if outputs else entries_store()
    migrations = dict(migrations or {})
    inside: dict[str, str] = {}
    if reach.ct is not None:        # DEST as the container spells it: the host's path of it
        for p, d in list(migrations.items()):
            migrations[p] = reach.call("ct_view", ctid=reach.ct, path=d).host_path
            inside[migrations[p]] = d
    overrides = [*overrides, *(("migrate", p) for p in migrations
                               if ("migrate", p) not in overrides)]
    checks = [("--archive-to", local_dest)] + [("--migrate destination", d)
                                               for d in migrations.values()]
    if here:       # the plan and its entries files are written here; only here can they meet
        checks += [("the plan file", o) for o in outputs] + [("the entries files' directory",
                                                              store)]
    for what, p in checks:
        if p and on_target(reach, p, target):
            raise UsageError(f"{what} {p} is on the volume being retired")
    with contextlib.ExitStack() as stack:
        walked = None
        if here:
            named = [p if p.startswith("/") else os.path.join(target.path, p)
                     for a, p in overrides if a == "delete" and not is_glob(p)]
            if named:
                makedirs_durable(store)
                walked = WalkRecords(named, directory=store, dev=target.st_dev)
                stack.callback(walked.close)      # what the plan did not take is removed
        obs = carve(reach.observe(path, **({} if walked is None else {"records": walked})),
                    list(overrides), stat_file=lambda p: reach.call("file_stats", path=p))
        if free_volume and obs.target.zfs_dataset:     # (with --ct, the host's dataset)
            # what freeing the dataset depends on: its snapshots, their holds and clones
            obs = replace(obs, dataset=reach.call("zfs_dataset",
                                                  dataset=obs.target.zfs_dataset))
        asked = PlanRequest(archive_to=archive_to, overrides=overrides, grace_s=grace_s,
                            snapshot=snapshot, mask_references=mask_references,
                            migrations=migrations, archive_format=archive_format,
                            verify_pool=verify_pool, free_volume=free_volume)
        try:
            first = make_plan(obs, asked)
        except PlanRefused as e:
            raise UsageError(str(e)) from None
        identities, entries = {}, {}
        for it in first.items:
            if it.action == "archive":
                identities[it.path] = identity_of(reach.call("record_item", path=it.path,
                                                             dev=target.st_dev))
            elif deleted(it):
                makedirs_durable(store)
                rec = walked.recorded(it.path) if walked is not None else None
                if rec is None:
                    rec = reach.write_entries(it.path, dev=target.st_dev, directory=store)
                identities[it.path] = identity_of(rec)
                entries[it.path] = rec.reference()
        free = {d: reach.call("free_bytes", path=d) for d in set(migrations.values())}
        dests = {d: Destination(d, free[d], inside.get(d, "")) for d in free}
        if local_dest:
            tools = None if isinstance(reach, Local) else \
                reach.call("commands", names=["zstd"]).get("zstd") or ""
            dests[local_dest] = replace(dests.get(local_dest, Destination(local_dest)),
                                        free_bytes=reach.call("free_bytes", path=local_dest),
                                        zstd=tools)
        return make_plan(replace(obs, destinations=tuple(dests.values())),
                         replace(asked, identities=identities, entries=entries,
                                 created_at=time.time()))
