"""``check``: everything that uses the volume, each item's status, and the verdict.

Runs the inventory (``scan``, or a plain listing of the top level with ``scan_tree=False``),
the live collectors (processes, kernel users) and the configured-users collector, attributes
every consumer's paths to items, and decides ``safe_to_unmount``. Prints nothing.

Blockers: every live consumer (a process, swap, loop device, mount, active NFS export), and
every configured consumer that will use the volume again by itself: fstab lines, crontabs,
exports and shares, and units/containers that are enabled, running or start on boot. A
configured user that is neither (a disabled, stopped unit naming a path) is not a blocker: its
items are ``referenced`` and a warning says it breaks when started.
"""

from __future__ import annotations

import os
import time

from vacate.collectors import kernel, mounts, procs
from vacate.collectors.mounts import is_under as _under
from vacate.host import Host
from vacate.model.common import Problem
from vacate.model.inventory import Item, ScanResult, Stats
from vacate.model.mount import Target
from vacate.model.usage import (
    STATUS_ORDER,
    Blocker,
    CheckResult,
    Consumer,
    ItemUsage,
    Verdict,
)

DISPOSABLE = frozenset({"re-downloadable", "regenerable"})
# Configured users that come back by themselves (at boot, on a schedule, for a client).
SELF_STARTING = frozenset({"fstab", "cron", "nfs-export", "smb-share"})
STARTS_FLAGS = ("active", "running", "enabled", "onboot", "autostart")


# -- inventory ---------------------------------------------------------------------------------
def list_top(target: Target) -> ScanResult:
    """The top-level entries with their own ``lstat`` only (``--no-scan``): no walk."""
    t0 = time.monotonic()
    items = []
    warnings = []
    try:
        with os.scandir(target.path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as e:
        entries = []
        warnings.append(Problem("unreadable-dir", f"{target.path}: {e.strerror}", target.path))
    nested = {m.mountpoint for m in target.nested_mounts}
    for e in entries:
        if e.path in nested:
            continue        # a mount below: not the volume's (and a dead one would hang stat)
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        is_dir = e.is_dir(follow_symlinks=False)
        stats = Stats(st.st_size, st.st_blocks * 512, 0 if is_dir else 1, 1 if is_dir else 0,
                      st.st_mtime, st.st_atime)
        items.append(Item("item:" + e.name, e.path, None, is_dir, stats))
    return ScanResult(target, Stats(), tuple(items), (), (), tuple(warnings),
                      time.monotonic() - t0)


def _configured(host: Host, target: Target, containers) -> tuple[tuple[Consumer, ...],
                                                                   tuple[Problem, ...]]:
    try:
        from vacate.collectors.configured import collect
    except ImportError as e:
        return (), (Problem("configured-unavailable",
                            f"configured users (unit files, fstab, containers...) were not read: "
                            f"{e}"),)
    return collect(host, target, containers=containers)


# -- attribution and statuses ------------------------------------------------------------------
def attribute(target: Target, items: tuple[Item, ...], consumers: tuple[Consumer, ...]
              ) -> tuple[dict[str, list[str]], list[str]]:
    """item id -> consumer ids using it (its subtree, or a directory containing it); and the
    consumers that use the volume as a whole (its root, or paths outside the items)."""
    users: dict[str, list[str]] = {it.id: [] for it in items}
    whole: list[str] = []
    for c in consumers:
        hit_any = False
        for p in c.paths:
            if p == target.path or not _under(p, target.path):
                if c.id not in whole:
                    whole.append(c.id)
                continue
            for it in items:
                if (_under(p, it.path) or _under(it.path, p)) and c.id not in users[it.id]:
                    users[it.id].append(c.id)
                    hit_any = True
        if not hit_any and c.paths and c.id not in whole and all(
                _under(p, target.path) and p != target.path for p in c.paths):
            whole.append(c.id)   # a path on the volume that no item holds (created since)
    return users, whole


def _own_status(it: Item, user_ids: list[str], by_id: dict[str, Consumer]) -> str:
    if any(by_id[u].live for u in user_ids):
        return "active"
    if user_ids:
        return "referenced"
    c = it.classification
    if c is not None and c.kind == "filesystem-artifact":
        return "artifact"
    if c is not None and c.recoverable in DISPOSABLE:
        return "disposable"
    return "cold"


def statuses(items: tuple[Item, ...], users: dict[str, list[str]],
             by_id: dict[str, Consumer]) -> tuple[ItemUsage, ...]:
    own = {it.id: _own_status(it, users[it.id], by_id) for it in items}
    strongest = dict(own)
    for it in items:
        if it.parent is not None:
            top = next((t for t in items if t.path == it.parent), None)
            if top is not None and STATUS_ORDER.index(own[it.id]) < STATUS_ORDER.index(
                    strongest[top.id]):
                strongest[top.id] = own[it.id]
    return tuple(ItemUsage(it, strongest[it.id], tuple(users[it.id])) for it in items)


# -- verdict -----------------------------------------------------------------------------------
def _systemctl(container: dict | None, pid: int | None = None, pid_ns: str | None = None) -> str:
    """How a person reaches the manager that runs a unit: a container's, else, for a process in
    a pid namespace of its own (systemd as PID 1 of a private namespace, not a container), the
    manager seen from inside it, else the host's."""
    if not container:
        return f"nsenter -t {pid} -a systemctl" if pid_ns and pid is not None else "systemctl"
    if container.get("type") == "nspawn":
        return f"systemctl -M {container['name']}"
    if container.get("ctid") is not None:
        return f"pct exec {container['ctid']} -- systemctl"
    if container.get("type") == "lxc":
        return f"lxc-attach -n {container['name']} -- systemctl"
    return "systemctl"


def process_action(c: Consumer, by_id: dict[str, Consumer]) -> str:
    a = c.attrs
    ct = a.get("container")
    unit = a.get("unit")
    pid = a.get("pid")
    if a.get("lxc_monitor") and ct:
        return f"pct stop {ct['ctid']}" if ct.get("ctid") is not None \
            else f"lxc-stop -n {ct['name']}"
    if ct and ct.get("type") == "docker":
        return f"docker stop {ct.get('docker_name') or ct['name'][:12]}"
    if unit and unit.endswith(".service"):
        sc = _systemctl(ct, pid, a.get("pid_namespace"))
        if a.get("user_manager") is not None:   # a unit of a user's own manager
            who = a.get("user") if a.get("uid") == a["user_manager"] and a.get("user") \
                else a["user_manager"]
            sc = sc.replace("systemctl", f"systemctl --user -M {who}@", 1)
        action = f"{sc} stop {unit}"
        where = f"{ct['type']}:{ct['name']}" if ct else None
        for cid in (f"systemd-unit:{unit}", f"systemd-unit:{where}:{unit}"):
            u = by_id.get(cid)
            if u is not None and u.attrs.get("enabled") is not False:
                action += f" && {sc} disable {unit}"
                break
        return action
    return f"kill -TERM {pid}"


def _describe(c: Consumer) -> str:
    a = c.attrs
    paths = ", ".join(c.paths[:2]) + (f" and {len(c.paths) - 2} more" if len(c.paths) > 2 else "")
    if c.type == "process":
        who = f"{c.name} (pid {a.get('pid')}"
        if a.get("unit"):
            who += f", {a['unit']}"
        if a.get("container"):
            who += f", in {a['container']['type']} {a['container']['name']}"
        elif a.get("pid_namespace"):
            who += f", in {a['pid_namespace']}"
        who += ")"
        gone = " (deleted)" if a.get("deleted_paths") else ""
        return f"{who} holds {'+'.join(a.get('access', []))} on {paths}{gone}"
    if c.type == "swap":
        return f"active swap file {paths}"
    if c.type == "loop-device":
        return f"loop device {c.name} is backed by {paths}"
    if c.type == "mount":
        if a.get("nested"):
            return f"{c.name} is mounted on top of the volume"
        ns = "" if a.get("namespace") == "host" else f" in the mount namespace of pid {a.get('pid')}"
        return f"the volume is also mounted at {c.name}{ns} (root {a.get('root')})"
    if c.type == "nfs-export" and c.live:
        return f"NFS is exporting {a.get('export')} to {a.get('client')} now"
    flags = [k for k in STARTS_FLAGS if a.get(k) is True]
    state = f" ({', '.join(flags)})" if flags else ""
    return f"{c.type} {c.name}{state} names {paths}"


def configured_action(c: Consumer) -> str:
    a = c.attrs
    if a.get("action"):
        return str(a["action"])
    where = c.evidence[0].source if c.evidence else c.name
    if c.type == "systemd-unit":
        sc = "systemctl --user" if a.get("scope") == "user" else "systemctl"
        if a.get("active") is True:
            return f"{sc} disable --now {c.name}"
        return f"{sc} disable {c.name}"
    if c.type == "fstab":
        return f"remove or comment out the entry at {where} (then: systemctl daemon-reload)"
    if c.type == "cron":
        return f"remove or change the job at {where}"
    if c.type == "nfs-export":
        return f"remove the export at {where}, then exportfs -ra"
    if c.type == "smb-share":
        return f"remove the share at {where}, then smbcontrol all reload-config"
    return f"change or remove {where}"


def is_blocker(c: Consumer) -> bool:
    if c.live:
        return True
    if c.type == "smb-share" and c.attrs.get("available") is False:
        return False   # `available = no`: Samba does not serve it; referenced, not in use
    if c.type in SELF_STARTING:
        return True
    return any(c.attrs.get(k) is True for k in STARTS_FLAGS)


def verdict(consumers: tuple[Consumer, ...], problems: tuple[Problem, ...]) -> Verdict:
    by_id = {c.id: c for c in consumers}
    blockers = []
    for c in consumers:
        if not is_blocker(c):
            continue
        if c.type == "process":
            action = process_action(c, by_id)
        elif c.live:
            action = str(c.attrs.get("action") or configured_action(c))
        else:
            action = configured_action(c)
        blockers.append(Blocker(c.id, _describe(c), action))
    unknowns = tuple(p for p in problems if p.blocks_verdict)
    if blockers:
        safe: bool | None = False
    elif unknowns:
        safe = None
    else:
        safe = True
    return Verdict(safe, tuple(blockers), unknowns)


def _referenced_warnings(consumers: tuple[Consumer, ...]) -> list[Problem]:
    out = []
    for c in consumers:
        if not c.live and not is_blocker(c):
            out.append(Problem("referenced", f"{_describe(c)}: it breaks when started",
                               c.paths[0] if c.paths else None))
    return out


def check(path: str, *, host: Host | None = None, scan_tree: bool = True,
          configured: bool = True, nvml=None, early=None) -> CheckResult:
    """``early``: a :class:`vacate.collectors.procs_probe.Early` the CLI started (or None)."""
    host = host or Host.local()
    t0 = time.monotonic()
    try:
        target = mounts.resolve_target(path, host)
    except BaseException:
        if early is not None:
            early.close()
        raise
    live = procs.collect(host, target, nvml=nvml, early=early)
    kcons, kprob = kernel.collect(host, target, live.namespaces)
    if configured:
        ccons, cprob = _configured(host, target, live.containers)
    else:
        ccons, cprob = (), (Problem("configured-skipped",
                                    "configured users were not read (--no-config)"),)
    if scan_tree:
        from vacate.core.scan import scan

        inv = scan(path, host=host)
    else:
        inv = list_top(target)
    consumers = live.consumers + kcons + tuple(ccons)
    # one consumer per id (a kernel mount may be found twice, a config twice)
    consumers = tuple({c.id: c for c in consumers}.values())
    problems = live.problems + kprob + tuple(cprob)
    users, whole = attribute(target, inv.items, consumers)
    by_id = {c.id: c for c in consumers}
    items = statuses(inv.items, users, by_id)
    v = verdict(consumers, problems)
    warnings = tuple(inv.warnings) + problems + tuple(_referenced_warnings(consumers))
    return CheckResult(target=target, scan=inv, verdict=v, items=items, consumers=consumers,
                       warnings=warnings, whole_volume=tuple(whole), scanned=scan_tree,
                       elapsed_s=time.monotonic() - t0)
