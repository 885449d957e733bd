"""The teardown: the ordered steps that retire the volume, one function per phase, each
reading the observation and what the phases before it decided (:class:`Teardown`), each
adding its steps with the evidence that led to them. Pure.

The phases, in order (:data:`PHASES`): archive and verify what nothing uses while the
services still run; stop the units whose processes use the volume, then disable what would
start them; end the remaining holders (TERM, wait, KILL); confirm the GPUs are released;
kernel users (containers, swap, loop devices, nested and other mounts, exports); archive
and verify the rest; the ZFS dataset itself archived natively and verified
(``--archive-format zfs``/``both``); snapshot, delete; configuration that would mount or use the volume
again; units that still name what goes away (masked when asked); unmount, lock the empty
mount point, and look again. Items migrated have their phases in
:mod:`vacate.decide.teardown_migrate` (copied while the services run, their units stopped,
repointed and started again from the new place, what else names them repointed).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace

from vacate.decide.actions import container_place, file_line
from vacate.decide.teardown_migrate import (
    migrate_live,
    migrate_rest,
    migrate_units,
    verdict_place,
)
from vacate.observing.model.action import Action
from vacate.observing.model.conditions import (
    Archived,
    Destroyed,
    DisableNow,
    Enabled,
    Engine,
    Exists,
    Freeable,
    Gone,
    Held,
    Immutable,
    ItemKnown,
    MountPin,
    NativeArchived,
    ReadBack,
    Running,
    Unit,
    UnitActive,
    Unmounted,
)
from vacate.observing.model.mount import ZFS_FSTYPES
from vacate.observing.model.observation import Observation
from vacate.observing.model.plan import PlanItem, Step
from vacate.observing.model.steps import (
    Archive,
    ArchiveDataset,
    Check,
    Delete,
    DestroyDataset,
    DetachLoop,
    DisableUnit,
    EditConfig,
    EndProcess,
    LockDir,
    Manual,
    MaskUnit,
    Params,
    ReleaseGpu,
    Snapshot,
    StopContainer,
    StopUnit,
    Swapoff,
    Unexport,
    Unmount,
    Verify,
    VerifyDataset,
)
from vacate.observing.model.usage import Consumer, Verdict
from vacate.observing.parsers.paths import is_under

SNAPSHOT_FS = ZFS_FSTYPES | {"btrfs"}
CONTAINERS = frozenset({"docker-container", "lxc-container", "pve-container", "pve-vm"})


class _Steps:
    def __init__(self):
        self.steps: list[Step] = []

    def add(self, params: Params, summary: str, *, action: Action | None = None,
            downtime=False, **kw) -> Step:
        """A step of the kind ``params`` is the value of."""
        n = len(self.steps) + 1
        s = Step(id=f"{n:02d}-{params.KIND}", kind=params.KIND, summary=summary,
                 action=action, params=params, downtime=downtime, **kw)
        self.steps.append(s)
        return s


def deleted(it: PlanItem) -> bool:
    """Whether the plan deletes the item from the volume (a migrate item: once what used
    it runs from the copy)."""
    return it.action == "delete" or it.action == "migrate" and it.delete_source


def archive_name(it: PlanItem) -> str:
    """The archive's name at the destination: the item's path on the volume, ``/`` as
    ``_``."""
    return it.id.removeprefix("item:").replace("/", "_")


def archive_location(archive_to: str, it: PlanItem) -> str:
    """Where the item's archive lies (a directory, or an ``s3://`` prefix)."""
    return f"{archive_to.rstrip('/')}/{archive_name(it)}"


def _archive_steps(st: _Steps, items, archive_to: str, downtime: bool) -> None:
    for it in items:
        where = archive_location(archive_to, it)
        st.add(Archive(it.path, archive_to, archive_name(it),
                                              it.exclude), f"archive {it.path} to {archive_to}", downtime=downtime,
               precondition=ItemKnown(it.identity is not None),
               postcondition=Archived(where, True))
        st.add(Verify(it.path, where, it.path), f"verify the archive of {it.path} read back from {archive_to}",
               downtime=downtime,
               postcondition=ReadBack(0))


def dataset_archive_name(dataset: str) -> str:
    """The native archive's name at the destination: ``dataset-`` and the dataset, ``/`` as
    ``_``."""
    return "dataset-" + dataset.replace("/", "_")


def dataset_archive(archive_to: str, dataset: str) -> str:
    """Where the dataset's native archive lies (a directory)."""
    return f"{archive_to.rstrip('/')}/{dataset_archive_name(dataset)}"


def dataset_snapshot(dataset: str, created_at: float) -> str:
    """The snapshot the dataset's archive is sent from, named for the plan (its dataset and
    the moment it was made): a rerun finds its own."""
    h = hashlib.sha256(f"{dataset}\0{created_at!r}".encode()).hexdigest()[:12]
    return f"vacate-archive-{h}"


def _live_users(u: PlanItem, by_id: dict[str, Consumer]) -> bool:
    return any(by_id[c].live for c in u.users if c in by_id)


LINE_EDITS = frozenset({"fstab", "cron", "nfs-export"})     # one line, named by the consumer
PVE_MOUNT_POINT = re.compile(r"mp\d+")


def _config_steps(st: _Steps, c: Consumer, x: Action) -> None:
    """The steps that disarm one configuration consumer: ``edit-config`` where vacate can
    make the edit on this host and check it first (a line with its sha256 from the
    observation; ``pct set --delete`` of container mount points), else ``manual``. A file
    inside a container is edited there by a person (vacate edits the host's)."""
    a = c.attrs
    own = x.kind == "edit-config" and not a.container
    if own and c.type in LINE_EDITS and a.line_sha256:
        st.add(EditConfig(x.params.file, x.params.line,
                                           a.line_sha256), f"{c.type} {c.name}", action=x, downtime=True,
               evidence=c.evidence)
        return
    if own and c.type == "lxc-container" and a.mount_entries:
        lines = {f"{e['file']}:{e['line']}" for e in a.mount_entries}
        for e in a.mount_entries:
            at = f"{e['file']}:{e['line']}"
            st.add(EditConfig(e["file"], e["line"], e["line_sha256"]), f"{c.type} {c.name}: lxc.mount.entry at {at}", action=x,
                   downtime=True,
                   evidence=tuple(v for v in c.evidence if v.source == at))
        rest = tuple(v for v in c.evidence if v.source not in lines)
        if not rest:
            return
        x = replace(x, subject=rest[0].source,
                    params=replace(x.params, **file_line(rest[0].source)))
        st.add(Manual(x.params.file, x.params.line), f"{c.type} {c.name}", action=x, downtime=True,
               evidence=rest)
        return
    if own and c.type == "smb-share" and a.section_lines and a.file:
        first = a.section_lines[0][0]
        st.add(EditConfig(a.file, first, a.section_lines[0][1],
                                           lines=a.section_lines), f"smb share [{c.name}] in {a.file}", action=x, downtime=True,
               evidence=c.evidence)
        return
    keys = list(x.params.keys or [])
    if own and c.type == "pve-container" and x.params.do == "delete-disks" and keys \
            and all(PVE_MOUNT_POINT.fullmatch(k) for k in keys) and a.config:
        # mpN only: deleting an unusedN key destroys the volume it names
        st.add(EditConfig(do="delete-disks", tool="pct",
                                           vmid=str(a.vmid), keys=tuple(keys),
                                           config=a.config), f"pct set {a.vmid} --delete {','.join(keys)}", action=x,
               downtime=True,
               evidence=c.evidence)
        return
    st.add(Manual(x.params.file, x.params.line,
                  a.line_sha256 if c.type in LINE_EDITS else None), f"{c.type} {c.name}",
           action=x, downtime=True, evidence=c.evidence)




@dataclass
class Teardown:
    """What the phases read (the observation, the items, the options, the verdict) and
    what they decide as they go: the steps so far, the units stopped and disabled."""

    obs: Observation
    items: tuple[PlanItem, ...]
    archive_to: str | None
    grace_s: float
    snapshot: bool
    mask_references: bool
    verdict: Verdict
    archive_format: str = "tar"
    verify_pool: str | None = None
    created_at: float = 0.0
    free_volume: bool = False
    st: _Steps = field(default_factory=lambda: _Steps())
    stopped_units: set = field(default_factory=set)      # (unit, manager label)
    disabled: set = field(default_factory=set)
    moved: set = field(default_factory=set)              # migrate items copied after a stop
    repointed: set = field(default_factory=set)          # consumers repointed, not disarmed

    def __post_init__(self):
        self.by_id = {c.id: c for c in self.obs.consumers}
        self.ev = {c.id: c.evidence for c in self.obs.consumers}
        self.blockers = {b.consumer: b for b in self.verdict.blockers}
        self.to_archive = [i for i in self.items if i.action == "archive"]
        self.users = [c for c in self.obs.consumers if c.id in self.blockers]


def archive_idle(t: Teardown) -> None:
    """1. What nothing uses now is archived while the services still run."""
    if t.archive_to and t.archive_format != "zfs":
        _archive_steps(t.st, [i for i in t.to_archive if not _live_users(i, t.by_id)],
                       t.archive_to, False)


def stop_units(t: Teardown) -> None:
    """2. Units whose processes use the volume, stopped in the manager that runs them."""
    for b in t.blockers.values():
        for a in b.actions:
            key = (a.subject, a.where.label())
            if a.kind == "stop-unit" and key not in t.stopped_units:
                t.stopped_units.add(key)
                pids = [c.attrs.pid for c in t.obs.consumers if c.type == "process"
                        and c.attrs.unit == a.subject
                        and verdict_place(c) == a.where.label()]
                t.st.add(StopUnit(), f"stop {a.subject} ({a.where.label()})", action=a,
                         downtime=True, precondition=a.precondition,
                         postcondition=UnitActive(False, tuple(pids)),
                         evidence=t.ev.get(a.consumer or "", ()))


def disable_units(t: Teardown) -> None:
    """2. What would start them again, disabled (a ``disable --now`` of a unit not stopped
    yet is a stop, then a disable)."""
    for b in t.blockers.values():
        for a in b.actions:
            if a.kind != "disable-unit":
                continue
            key = (a.subject, a.where.label())
            if isinstance(a.params, DisableNow) and a.params.now and key not in t.stopped_units:
                stop = Action("stop-unit", a.subject, ("systemctl", "stop", a.subject),
                              a.where, precondition=Unit(a.subject), consumer=a.consumer)
                t.stopped_units.add(key)
                t.st.add(StopUnit(), f"stop {a.subject} ({a.where.label()})", action=stop,
                         downtime=True, postcondition=UnitActive(False),
                         evidence=t.ev.get(a.consumer or "", ()))
            if key in t.disabled:
                continue
            t.disabled.add(key)
            dis = Action("disable-unit", a.subject, tuple(x for x in a.argv if x != "--now"),
                         a.where, precondition=Unit(a.subject), consumer=a.consumer)
            t.st.add(DisableUnit(), f"disable {a.subject} ({a.where.label()})", action=dis,
                     downtime=True, postcondition=Enabled(False),
                     evidence=t.ev.get(a.consumer or "", ()))


def disable_stopped(t: Teardown) -> None:
    """2. A unit stopped for its processes is disabled too, whether or not its files name
    the volume: an enabled server would come back at boot (disabling one that is not
    enabled is nothing)."""
    for step in list(t.st.steps):
        if step.kind != "stop-unit" or step.action is None:
            continue
        a = step.action
        key = (a.subject, a.where.label())
        if key not in t.disabled:
            t.disabled.add(key)
            dis = Action("disable-unit", a.subject, ("systemctl", "disable", a.subject),
                         a.where, precondition=Unit(a.subject), consumer=a.consumer)
            t.st.add(DisableUnit(), f"disable {a.subject} ({a.where.label()})", action=dis,
                     downtime=True, postcondition=Enabled(False), evidence=step.evidence)


def end_holders(t: Teardown) -> None:
    """3. The remaining holders: their containers stopped, or TERM, wait, KILL (never the
    init of a namespace: a person stops its container or machine)."""
    inits = {ct.init_pid for ct in t.obs.containers}
    for c in t.obs.consumers:
        if c.type != "process":
            continue
        a = c.attrs
        acts = t.blockers[c.id].actions if c.id in t.blockers else ()
        if any(x.kind == "stop-unit" for x in acts):
            continue
        pid = a.pid
        for x in acts:
            if x.kind == "stop-container":
                t.st.add(StopContainer(), f"stop container {x.subject}", action=x,
                         downtime=True, postcondition=Running(False),
                         evidence=c.evidence)
            elif x.kind == "end-process":
                if pid == 1 or pid in inits or a.lxc_monitor:
                    t.st.add(Manual(consumer=c.id), f"{c.name} (pid {pid}) is the init of a namespace: "
                                       "stop its container or machine instead", downtime=True,
                             evidence=c.evidence)
                    continue
                t.st.add(EndProcess(t.grace_s), f"end {c.name} (pid {pid}): TERM, wait "
                                        f"{t.grace_s:g} s, KILL", action=x, downtime=True,
                         precondition=x.precondition,
                         postcondition=Gone(True), evidence=c.evidence)


def release_gpus(t: Teardown) -> None:
    """4. GPUs: the driver's view, from the host."""
    pids = [c.attrs.pid for c in t.obs.consumers
            if c.type == "process" and c.attrs.gpus]
    if pids:
        t.st.add(ReleaseGpu(tuple(pids)), f"confirm no GPU is held by pid {', '.join(map(str, pids))}",
                 downtime=True, postcondition=Held(()))


def stop_containers(t: Teardown) -> None:
    """5. Containers that use the volume (their own mounts of it go with them); a docker
    container must not come back by itself."""
    for c in t.users:
        if c.type not in CONTAINERS:
            continue
        for x in t.blockers[c.id].actions:
            if x.kind == "stop-container":
                t.st.add(StopContainer(), f"stop {c.type} {x.subject}", action=x,
                         downtime=True, precondition=x.precondition, evidence=c.evidence)
            elif x.kind == "remove-container":
                x = Action("stop-container", x.subject,
                           ("docker", "update", "--restart=no", x.subject),
                           params=Engine("docker", "no"),
                           consumer=x.consumer)
                t.st.add(StopContainer(), f"no restart for docker container {x.subject}",
                         action=x, downtime=True, evidence=c.evidence)


def kernel_users(t: Teardown) -> None:
    """5. Swap, loop devices (their mounts, then the device), the other mounts innermost
    first, the exports being served now."""
    mount_of = {}            # (mountpoint, place) -> the mount consumer's unmount
    for c in t.users:
        if c.type == "mount":
            for x in t.blockers[c.id].actions:
                mount_of[(x.subject, x.where.label())] = (x, c)
    unmounted: set = set()

    def unmount(x: Action, c: Consumer) -> None:
        key = (x.subject, x.where.label())
        if key in unmounted:
            return
        unmounted.add(key)
        x, c = mount_of.get(key, (x, c))
        t.st.add(Unmount(), f"unmount {x.subject} ({x.where.label()})", action=x,
                 downtime=True, precondition=x.precondition, evidence=c.evidence)

    for c in t.users:
        if c.type == "swap":
            for x in t.blockers[c.id].actions:
                t.st.add(Swapoff(), f"swapoff {x.subject}", action=x, downtime=True,
                         precondition=x.precondition, evidence=c.evidence)
    for c in t.users:
        if c.type == "loop-device":
            for x in t.blockers[c.id].actions:
                if x.kind == "unmount":
                    unmount(x, c)
                else:
                    t.st.add(DetachLoop(), f"detach {x.subject}", action=x, downtime=True,
                             precondition=x.precondition, evidence=c.evidence)
    for x, c in sorted(mount_of.values(), key=lambda xc: -xc[0].subject.count("/")):
        unmount(x, c)
    for c in t.users:
        if c.type == "nfs-export" and c.live:
            for x in t.blockers[c.id].actions:
                t.st.add(Unexport(), f"stop exporting {x.subject}", action=x, downtime=True,
                         precondition=x.precondition, evidence=c.evidence)


def archive_rest(t: Teardown) -> None:
    """6. The rest of the archives, now that nothing uses them."""
    if t.archive_to and t.archive_format != "zfs":
        _archive_steps(t.st, [i for i in t.to_archive if _live_users(i, t.by_id)],
                       t.archive_to, True)


def _native(t: Teardown) -> bool:
    """Whether the plan archives the volume's dataset itself (its snapshot taken before the
    deletes)."""
    return t.archive_format != "tar" and bool(t.archive_to) and bool(t.obs.target.zfs_dataset)


def archive_dataset(t: Teardown) -> None:
    """6. The dataset itself (``--archive-format zfs`` or ``both``), once nothing holds it
    and before any delete: its snapshot, named for the plan, sent into parts at the
    destination; then proved receivable (``--verify-pool``) or its stream parsed."""
    ds = t.obs.target.zfs_dataset
    if not _native(t):
        return
    snap = dataset_snapshot(ds, t.created_at)
    where = dataset_archive(t.archive_to, ds)
    t.st.add(ArchiveDataset(ds, snap, t.archive_to, dataset_archive_name(ds)),
             f"archive the dataset {ds} (zfs send of @{snap}) to {t.archive_to}",
             downtime=True, postcondition=NativeArchived(where, f"{ds}@{snap}"))
    how = f"received into {t.verify_pool}" if t.verify_pool else \
        "its stream parsed end to end (the weaker check: no --verify-pool)"
    t.st.add(VerifyDataset(where, t.verify_pool),
             f"verify the dataset's archive {where}: {how}", downtime=True,
             postcondition=ReadBack(0))


def snapshot_and_delete(t: Teardown) -> None:
    """7-8. A snapshot before the deletes (ZFS, btrfs; not where the dataset's native
    archive took one already), the deletes, the space freed."""
    deletes = [i for i in t.items if deleted(i)]
    fstype = t.obs.target.mount.fstype
    if deletes and t.snapshot and fstype in SNAPSHOT_FS and not _native(t):
        t.st.add(Snapshot("zfs" if fstype in ZFS_FSTYPES else fstype, t.obs.target.zfs_dataset,
                          tuple(i.path for i in deletes)),
                 f"snapshot before deleting ({fstype})", downtime=True,
                 postcondition=Exists(True))
    for it in deletes:
        moved = it.action == "migrate"
        t.st.add(Delete(it.path, it.exclude), f"delete {it.path} ({it.files} files)" + (
                     f", migrated to {it.migrate_to}" if moved else ""), downtime=True,
                 precondition=ItemKnown(it.identity is not None,
                                        it.migrate_to if moved else None),
                 postcondition=Gone(True))
    if deletes:
        t.st.add(Check("freed"), "compare the space freed with what was expected", downtime=True,)


CONFIG_TYPES = frozenset({"fstab", "cron", "smb-share", "nfs-export", "lxc-container",
                          "pve-container", "pve-vm", "symlink", "config-file"})


def disarm_config(t: Teardown) -> None:
    """9. Configuration that would mount or use the volume again."""
    for c in t.obs.consumers:
        if c.id not in t.blockers or c.type not in CONFIG_TYPES:
            continue
        if c.type == "nfs-export" and c.live or c.id in t.repointed:
            continue
        for x in t.blockers[c.id].actions:
            if x.kind in ("stop-container", "remove-container"):
                continue             # stopped with the kernel users
            _config_steps(t.st, c, x)


def mask_references(t: Teardown) -> None:
    """Units that still name what goes away: masked only when asked (the report lists
    them)."""
    if not t.mask_references:
        return
    gone = [i.path for i in t.items if i.action in ("archive", "delete")]
    for c in t.obs.consumers:
        if c.type != "systemd-unit" or c.id in t.blockers or not any(
                is_under(p, g) for p in c.paths for g in gone):
            continue
        place = container_place(c.attrs.container, c.attrs.user)
        x = Action("mask-unit", c.name, ("systemctl", "mask", c.name), place,
                   precondition=Unit(c.name), consumer=c.id)
        t.st.add(MaskUnit(), f"mask {c.name} ({place.label()}): it names what goes away",
                 action=x, downtime=True, evidence=c.evidence)


def retire(t: Teardown) -> None:
    """10. Unmount, lock the mount point, look again."""
    tg = t.obs.target
    t.st.add(Unmount(), f"unmount {tg.mountpoint}", downtime=True,
             action=Action("unmount", tg.mountpoint, ("umount", tg.mountpoint),
                           precondition=MountPin(tg.mount.mount_id)),
             precondition=MountPin(tg.mount.mount_id, tg.mount.dev),
             postcondition=Unmounted(False))
    t.st.add(LockDir(tg.mountpoint), f"make the empty {tg.mountpoint} immutable (chattr +i)",
             downtime=True, postcondition=Immutable(True))
    t.st.add(Check("retired", tg.mount.dev, tg.mount.source), "look again by the recorded mount identity: nothing uses it, nothing "
                      "mounts it again", downtime=True,)


VERIFIES = frozenset({"verify", "verify-dataset", "verify-copy"})


def free_dataset(t: Teardown) -> None:
    """11. The dataset freed, last (``--free-volume`` on plain ZFS; on Proxmox, ``--ct``, the
    volume is freed through ``pct``): ``zfs destroy -r``, with the snapshots listed, once
    every archive of it is verified in this apply. Whether it may be is the plan's
    ``blocked`` (:mod:`vacate.decide.freeing`); the step checks it again before it acts."""
    from vacate.decide.freeing import listed
    from vacate.decide.pve_free import guest_volumes

    ds = t.obs.target.zfs_dataset
    if not t.free_volume or not ds or t.obs.ct is not None or guest_volumes(t.obs):
        return                   # (a Proxmox guest's volume is freed through pct, below)
    own = (dataset_snapshot(ds, t.created_at),)
    snaps = listed(t.obs.dataset, own)
    if _native(t):
        restore = (f"the dataset's archive {dataset_archive(t.archive_to, ds)}: cat its "
                   f"parts | zstd -dc | zfs receive {ds} (see its README)")
    else:
        restore = (f"the items' tar archives in {t.archive_to} (vacate restore, or zstd -dc "
                   "| tar -x) into a new dataset" if t.archive_to else
                   "nothing: every item was deleted or migrated")
    verified = tuple(s.id for s in t.st.steps if s.kind in VERIFIES)
    with_snaps = f", with its snapshots {', '.join('@' + n for n in snaps)}" if snaps else ""
    t.st.add(DestroyDataset(ds, snaps, restore),
             f"destroy the dataset {ds} (zfs destroy -r){with_snaps}; restored from {restore}",
             downtime=True, precondition=Freeable(verified), postcondition=Destroyed(ds))


def free_guest_volume(t: Teardown) -> None:
    """11. ``--free-volume`` on Proxmox: the container's volume freed through pct
    (:mod:`vacate.decide.pve_free`)."""
    from vacate.decide.pve_free import free_steps

    verified = tuple(s.id for s in t.st.steps if s.kind in VERIFIES)
    for params, summary, post in free_steps(t.obs, t.free_volume):
        t.st.add(params, summary, downtime=True, precondition=Freeable(verified),
                 postcondition=post)


PHASES = (archive_idle, migrate_live, migrate_units, stop_units, disable_units, disable_stopped, end_holders,
          release_gpus, stop_containers, kernel_users, archive_rest, archive_dataset,
          migrate_rest, snapshot_and_delete,
          disarm_config, mask_references, retire, free_dataset, free_guest_volume)


def teardown(t: Teardown) -> tuple[Step, ...]:
    """The ordered steps: each phase in turn."""
    for phase in PHASES:
        phase(t)
    return tuple(t.st.steps)
