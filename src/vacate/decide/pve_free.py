"""``--free-volume`` on Proxmox: the container's volume freed through ``pct`` once its mount
point's deletion took effect (tests/fixtures/proxmox/pve-free-rules.txt: ``pct set CTID
--delete mpN`` on a running container stays pending until it stops or restarts; then the
volume is ``unusedN`` of its config, and ``pct set CTID --delete unusedN`` frees it, with
``zfs destroy -r`` on zfspool storage, only when the container owns it and nothing else of
its config names it). Pure: the observation in, steps and blockers out.

What blocks it, each named in ``plan.blocked`` (the plan is not applied as it stands): the
volume owned by another guest (pct would drop the key and free nothing), the mount point
marked ``backup=0``, the guest replicated (``pvesr``), the volume named by a snapshot section
or by the pending changes of the config (pct would drop the key and keep the volume), the
guest protected, a storage other than zfspool (its freeing is not proved here), and an item
kept on the volume outside a verified archive of the plan (freeing the volume would lose it).
The plan never restarts the container: a pending deletion is said in the step, and the
operator restarts it (``pct reboot CTID``).
"""

from __future__ import annotations

import re

from vacate.decide import freeing
from vacate.observing.model.conditions import Freed
from vacate.observing.model.observation import Observation
from vacate.observing.model.plan import PlanItem
from vacate.observing.model.steps import FreeGuestVolume
from vacate.observing.model.usage import Consumer

MOUNT_POINT = re.compile(r"mp\d+")
UNUSED = re.compile(r"unused\d+")


def guest_volumes(obs: Observation) -> list[tuple[Consumer, str, dict]]:
    """(the container, its key, the volume's facts) for each mount point or unused key of a
    Proxmox container's current config that is the volume itself."""
    out = []
    for c in obs.consumers:
        if c.type != "pve-container" or not c.attrs.volumes:
            continue
        for key, facts in sorted(c.attrs.volumes.items()):
            if MOUNT_POINT.fullmatch(key) or UNUSED.fullmatch(key):
                out.append((c, key, facts))
    return out


def blockers(obs: Observation, items: tuple[PlanItem, ...], free_volume: bool,
             archive_format: str, archive_to: str | None,
             verify_pool: str | None = None) -> list[str]:
    """Why the plan cannot free the guest's volume as asked (empty: it can, or it is not
    asked)."""
    found = guest_volumes(obs) if free_volume else []
    out: list[str] = []
    for c, key, f in found:
        vmid, vol = c.attrs.vmid, f.get("volume")
        where = f"{vol} ({key} of CT {vmid})"
        if f.get("owner") != vmid:
            out.append(f"{where} is owned by guest {f.get('owner')}, not CT {vmid}: pct set "
                       f"{vmid} --delete would only drop it from the config and free nothing")
        if f.get("backup") is False:
            out.append(f"{where} is marked backup=0: Proxmox backs none of it up; freeing it "
                       f"is not planned while the mark says so (pct set {vmid} --{key} "
                       "...,backup=1, or free it by hand)")
        if c.attrs.replication:
            out.append(f"CT {vmid} is replicated (pvesr job {', '.join(c.attrs.replication)}"
                       f"{'; ' + key + ' has replicate=0' if f.get('replicate') is False else ''}"
                       f"): remove the job first (pvesr delete JOB)")
        if c.attrs.snapshots:
            out.append(f"{where} is named by snapshot {', '.join(c.attrs.snapshots)} of CT "
                       f"{vmid}: pct would drop the key and keep the volume (delete the "
                       f"snapshot first: pct delsnapshot {vmid} NAME)")
        if c.attrs.pending_keys:
            out.append(f"{where} is named by the pending changes of CT {vmid} "
                       f"({', '.join(c.attrs.pending_keys)}): pct would keep the volume")
        if c.attrs.protection:
            out.append(f"CT {vmid} has protection enabled: pct refuses to remove its drives")
        if f.get("storage_type") != "zfspool" or not f.get("dataset"):
            out.append(f"{where} is on {f.get('storage_type') or 'an unknown'} storage "
                       f"{f.get('storage')!r}: freeing it is planned only on zfspool storage")
        elif f.get("dataset") != obs.target.zfs_dataset:
            out.append(f"{where} is ZFS dataset {f.get('dataset')}, not the volume's "
                       f"{obs.target.zfs_dataset}: not freed")
    if found and obs.dataset is not None:   # pct's zfs destroy -r meets what ZFS's would
        out += freeing.blockers(obs.dataset, items, archive_format, verify_pool)
    elif found:
        kept = [i.path for i in freeing.kept_outside(items, archive_format)]
        if kept:
            out.append("freeing the volume would lose what the plan keeps on it outside a "
                       "verified archive: " + ", ".join(kept) + " (archive them, or "
                       "--archive-format zfs)")
        if archive_format != "tar" and verify_pool is None:
            out.append(freeing.PARSED_ONLY)
        if not archive_to:
            out.append("freeing the volume needs a verified archive of this apply: no "
                       "destination was given (--archive-to)")
    return out


def free_steps(obs: Observation, free_volume: bool) -> list[tuple[FreeGuestVolume, str, Freed]]:
    """The free-guest-volume steps (params, summary, postcondition), each after the
    container's mount point deletion (a pending one takes effect when it restarts: said,
    never done by the plan)."""
    if not free_volume:
        return []
    out = []
    for c, key, f in guest_volumes(obs):
        if not f.get("dataset") or f.get("storage_type") != "zfspool":
            continue
        vmid = str(c.attrs.vmid)
        after = "" if UNUSED.fullmatch(key) else \
            (f" once the removal of {key} took effect (a running CT {vmid} must restart "
             f"first: pct reboot {vmid}; vacate does not restart it)")
        summary = (f"free {f['volume']} of CT {vmid}: pct set {vmid} --delete unusedN"
                   f"{after}; zfs destroy -r {f['dataset']} by pct")
        out.append((FreeGuestVolume(vmid, c.attrs.config or "", key, f["volume"],
                                    f["dataset"]), summary, Freed(True)))
    return out
