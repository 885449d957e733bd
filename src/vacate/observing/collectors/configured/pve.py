"""Proxmox VE guests whose config uses the volume: containers (``/etc/pve/lxc/CTID.conf``:
``rootfs``, ``mpN``, ``unusedN``, raw ``lxc.*`` keys) and VMs (``/etc/pve/qemu-server/VMID.conf``:
disks, ``unusedN``), in the current config and in snapshot sections. Volume ids are resolved
through ``/etc/pve/storage.cfg`` to ZFS datasets (matched against the target's dataset) and to
paths of directory-like storages; storages that themselves live on the volume are reported too.
``pct``/``qm`` are not needed: only the files are read. Standard library only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from vacate.observing.collectors.configured.blockdev import VolumeDevice
from vacate.observing.collectors.configured.cfgfiles import (
    line_evidence,
    list_dir,
    read_text,
    spelled,
)
from vacate.observing.collectors.configured.lxc import (
    Finding,
    Scope,
    mount_entry_uses,
    running_state,
)
from vacate.observing.collectors.configured.match import VolumeView
from vacate.observing.collectors.configured.resolve import on_volume
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer, Evidence
from vacate.observing.parsers import pve_config, pve_replication, pve_storage
from vacate.observing.parsers.pve_storage import Storage

PVE = "/etc/pve"
_KINDS = (("lxc", "pve-container"), ("qemu-server", "pve-vm"))


def _dataset_on(scope: Scope, dataset: str | None) -> bool:
    ds = scope.dev.zfs_dataset
    return bool(dataset and ds and (dataset == ds or dataset.startswith(ds + "/")))


def storage_on_volume(scope: Scope, st: Storage) -> tuple[str | None, str] | None:
    """(host path, why) when a storage itself lives on the volume."""
    if st.path:
        h = on_volume(scope.host, scope.view, st.path)
        if h is not None:
            return h, f"{st.type} storage {st.id!r} has its path on the volume"
    if st.type == "zfspool" and _dataset_on(scope, st.props.get("pool")):
        return scope.volume_path, f"zfspool storage {st.id!r} is (in) the volume's dataset"
    return None


def volume_uses(scope: Scope, storages: dict[str, Storage], value: str
                ) -> tuple[list[tuple[str | None, str]], Problem | None]:
    """How one disk-like value uses the volume: [(host path, why)], and a problem when its
    storage is not defined (it could be anywhere)."""
    vol = pve_config.parse_volume(value)
    out: list[tuple[str | None, str]] = []
    if vol.path:
        h = on_volume(scope.host, scope.view, vol.path)
        if h is not None:
            out.append((h, "bind mount of a path on the volume"))
        elif scope.dev.matches(scope.host, vol.path):
            out.append((scope.volume_path, "passes the volume's device through"))
        return out, None
    if vol.storage is None:
        return out, None      # none, cdrom
    loc = pve_storage.resolve(storages, vol.volume)
    if loc is None:
        return out, Problem("unknown-storage",
                            f"storage {vol.storage!r} of {vol.volume} is not in storage.cfg")
    if _dataset_on(scope, loc.dataset):
        out.append((scope.volume_path, f"volume {vol.volume} is ZFS dataset {loc.dataset}"))
    elif loc.path:
        h = on_volume(scope.host, scope.view, loc.path)
        if h is not None:
            out.append((h, f"volume {vol.volume} lives at {loc.path}"))
    return out, None


def _guest_running(host: Host, kind: str, vmid: str) -> tuple[bool | None, int | None, str]:
    if kind == "lxc":
        return running_state(host, vmid, "/var/lib/lxc")
    text, p = read_text(host, host.run_path("qemu-server", f"{vmid}.pid"))
    if p is not None:
        return None, None, "qemu pid file unreadable"
    if text is None or not text.strip().isdigit():
        return False, None, "no qemu pid file"
    pid = int(text.strip())
    alive = os.path.exists(host.proc_path(pid))
    return alive, pid if alive else None, "qemu pid file"


def _config_files(host: Host) -> tuple[list[tuple[str, str, str, str | None]], list[Problem]]:
    """(kind, vmid, local path, node) of every guest config, each guest once."""
    out: list[tuple[str, str, str, str | None]] = []
    problems: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    nodes, p = list_dir(host, host.path(f"{PVE}/nodes"))
    if p:
        problems.append(p)
    places = [(host.path(PVE), None)] + [(n, os.path.basename(n)) for n in nodes]
    for base, node in places:
        for kind, _ctype in _KINDS:
            files, p = list_dir(host, os.path.join(base, kind), ".conf")
            if p:
                problems.append(p)
            for f in files:
                vmid = os.path.basename(f)[: -len(".conf")]
                key = (kind, vmid)
                if vmid.isdigit() and key not in seen:
                    seen.add(key)
                    out.append((kind, vmid, f, node))
    return out, problems


@dataclass
class GuestAudit:
    """How one Proxmox guest's config uses the volume."""
    found: Finding = field(default_factory=Finding)
    keys: list[str] = field(default_factory=list)       # keys of the current config that use it
    pending: list[str] = field(default_factory=list)    # keys of pending changes that use it
    snapshots: list[str] = field(default_factory=list)  # snapshot sections that name it
    hostname: str | None = None
    onboot: bool = False
    # the current config's bind mount points that use it: key -> value as written
    binds: dict[str, str] = field(default_factory=dict)
    # the current config's storage volumes that are the volume: key -> what freeing it reads
    volumes: dict[str, dict] = field(default_factory=dict)
    protection: bool = False


def _audit_guest(scope: Scope, storages: dict[str, Storage], vmid: str, local: str,
                 problems: list[Problem]) -> GuestAudit:
    audit = GuestAudit()
    found = audit.found
    text, p = read_text(scope.host, local)
    if p:
        problems.append(p)
    if text is None:
        return audit
    where = spelled(scope.host, local)
    cfg, probs = pve_config.parse(text, where)
    problems.extend(probs)
    rootfs = f"/var/lib/lxc/{vmid}/rootfs"
    for sec in cfg.sections:
        before = len(found.evidence)
        note_sec = "" if sec.name is None else f" (in {'snapshot ' if sec.is_snapshot else ''}" \
            f"[{sec.name}])"
        for ln in sec.lines:
            n = len(found.evidence)
            if pve_config.is_disk_key(ln.key):
                uses, p = volume_uses(scope, storages, ln.value)
                if p:
                    problems.append(Problem(p.code, p.message, f"{where}:{ln.line}"))
                rel = "rootfs" if ln.key == "rootfs" else \
                    "unused-disk" if ln.key.startswith("unused") else \
                    "mount-point" if ln.key.startswith("mp") else "disk"
                for h, why in uses:
                    found.add(rel, h, line_evidence("config-line", h, where, ln.line, ln.raw,
                                                    why + note_sec))
                if uses and sec.name is None and rel == "mount-point" and \
                        pve_config.parse_volume(ln.value).volume.startswith("/"):
                    audit.binds[ln.key] = ln.value
                if uses and sec.name is None and rel in ("mount-point", "unused-disk"):
                    _volume_facts(audit, storages, ln.key, ln.value)
            elif ln.key == "lxc.mount.entry":
                mount_entry_uses(scope, found, problems, where, ln.line, ln.value, ln.raw,
                                 rootfs)
            elif ln.key == "hookscript" and ":" in ln.value:
                loc = pve_storage.resolve(storages, ln.value)
                h = on_volume(scope.host, scope.view, loc.path) if loc else None
                if h is not None:
                    found.add("hookscript", h, line_evidence("config-line", h, where, ln.line,
                                                             ln.raw, "hook script on the volume"))
            elif ln.key not in ("description", "snaptime", "parent"):
                for tok, h in scope.view.paths_in_text(ln.value):
                    found.add("config-path", h, line_evidence(
                        "config-line", h, where, ln.line, ln.raw, f"{ln.key} names {tok}"))
            if len(found.evidence) > n and not sec.is_snapshot:
                keys = audit.keys if sec.name is None else audit.pending
                if ln.key not in keys:
                    keys.append(ln.key)
        if len(found.evidence) > before and sec.is_snapshot:
            audit.snapshots.append(sec.name)
    audit.hostname = cfg.current.get("hostname") or cfg.current.get("name")
    audit.onboot = cfg.current.get("onboot") == "1"
    audit.protection = cfg.current.get("protection") == "1"
    return audit


def _volume_facts(audit: GuestAudit, storages: dict[str, Storage], key: str,
                  value: str) -> None:
    """What freeing a storage volume of the guest reads: its id, storage, dataset, owner
    (the vmid its name carries), and the mount point's ``backup`` / ``replicate`` flags as
    written (absent: not written)."""
    vol = pve_config.parse_volume(value)
    if vol.storage is None or vol.volname is None:
        return
    loc = pve_storage.resolve(storages, vol.volume)
    facts = {"volume": vol.volume, "storage": vol.storage,
             "storage_type": loc.storage.type if loc else None,
             "dataset": loc.dataset if loc else None,
             "owner": pve_storage.owner(vol.volname)}
    for flag in ("backup", "replicate"):
        if flag in vol.options:
            facts[flag] = vol.options[flag] in ("1", "on", "yes", "true")
    audit.volumes[key] = facts


def _replication(host: Host, problems: list[Problem]) -> tuple[pve_replication.Job, ...]:
    """The jobs of /etc/pve/replication.cfg (none when there is no such file)."""
    local = host.path(f"{PVE}/replication.cfg")
    text, p = read_text(host, local)
    if p:
        problems.append(p)
    if text is None:
        return ()
    jobs, probs = pve_replication.parse(text, spelled(host, local))
    problems.extend(probs)
    return jobs


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    scope = Scope(host, view, VolumeDevice.of(target), target.path)
    problems: list[Problem] = []
    consumers: list[Consumer] = []
    st_local = host.path(f"{PVE}/storage.cfg")
    text, p = read_text(host, st_local)
    if p:
        problems.append(p)
    storages: dict[str, Storage] = {}
    if text is not None:
        st_where = spelled(host, st_local)
        storages, probs = pve_storage.parse(text, st_where)
        problems.extend(probs)
        for st in storages.values():
            hit = storage_on_volume(scope, st)
            if hit:
                path, why = hit
                consumers.append(Consumer(
                    f"pve-storage:{st.id}", "config-file", f"storage {st.id}", False,
                    (path,) if path else (),
                    (Evidence("config-line", path, f"{st_where}:{st.line}", why),),
                    {"storage": st.id, "storage_type": st.type}))
    files, probs = _config_files(host)
    problems.extend(probs)
    jobs = _replication(host, problems)
    for kind, vmid, local, node in files:
        audit = _audit_guest(scope, storages, vmid, local, problems)
        found = audit.found
        if not found:
            continue
        ctype = dict(_KINDS)[kind]
        running, pid, how = _guest_running(host, kind, vmid)
        attrs = {"vmid": int(vmid), "config": spelled(host, local), "running": running,
                 "state_from": how, "onboot": audit.onboot,
                 "relations": list(dict.fromkeys(found.relations)),
                 "in_current_config": bool(audit.keys), "keys": audit.keys,
                 "pending_keys": audit.pending,
                 "snapshots": audit.snapshots}
        if audit.binds:
            attrs["binds"] = audit.binds
        if audit.volumes:
            attrs["volumes"] = audit.volumes
        repl = pve_replication.jobs_of(jobs, int(vmid))
        if repl:
            attrs["replication"] = repl
        if audit.protection:
            attrs["protection"] = True
        if node:
            attrs["node"] = node
        if pid:
            attrs["pid"] = pid
        name = f"{vmid} ({audit.hostname})" if audit.hostname else vmid
        consumers.append(Consumer(f"{ctype}:{vmid}", ctype, name, False,
                                  tuple(dict.fromkeys(found.paths)), tuple(found.evidence),
                                  attrs))
    # the same storage problem once per file line is enough; unknown storages do not block
    return tuple(consumers), tuple(dict.fromkeys(problems))
