"""Deciding: what a volume's observation means. Which consumers use which items, each
item's status, the blockers with their next actions, and the verdict: pure functions of an
:class:`Observation`, which touch nothing on the machine.

Blockers: every live consumer (a process, swap, loop device, mount, active NFS export), and
every configured consumer that will use the volume again by itself: fstab lines, crontabs,
exports and shares, and units/containers that are enabled, running or start on boot. A
configured user that is neither (a disabled, stopped unit naming a path) is not a blocker: its
items are ``referenced`` and a warning says it breaks when started.
"""

from __future__ import annotations

from vacate.decide.actions import actions_for
from vacate.observing.model.common import Problem
from vacate.observing.model.inventory import Item
from vacate.observing.model.mount import Target
from vacate.observing.model.observation import Observation
from vacate.observing.model.usage import (
    STATUS_ORDER,
    Blocker,
    CheckResult,
    Consumer,
    ItemUsage,
    Verdict,
)
from vacate.observing.parsers.paths import is_under as _under

DISPOSABLE = frozenset({"re-downloadable", "regenerable"})
# Configured users that come back by themselves (at boot, on a schedule, for a client).
SELF_STARTING = frozenset({"fstab", "cron", "nfs-export", "smb-share"})
STARTS_FLAGS = ("active", "running", "enabled", "onboot", "autostart")


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


def holds(it: Item, items) -> list[Item] | None:
    """What a plain directory is, by what it holds: the outermost items inside ``it`` when
    ``it`` says nothing of its own (no classification, or one without ``recoverable``: a
    ``models/`` whose only file is a model) and they hold every file it has; else None."""
    c = it.classification
    if not it.is_dir or (c is not None and c.recoverable is not None):
        return None
    inner = [i for i in items if i.parent == it.path and i.path != it.path]
    outer = [i for i in inner if not any(j is not i and _under(i.path, j.path) for j in inner)]
    if not outer or sum(i.stats.files for i in outer) != it.stats.files:
        return None
    return outer


def statuses(items: tuple[Item, ...], users: dict[str, list[str]],
             by_id: dict[str, Consumer]) -> tuple[ItemUsage, ...]:
    own = {it.id: _own_status(it, users[it.id], by_id) for it in items}
    for it in items:
        # a directory that is only what it holds has their status, not "cold" of its own
        held = holds(it, items) if own[it.id] == "cold" else None
        if held:
            own[it.id] = min((own[i.id] for i in held), key=STATUS_ORDER.index)
    strongest = dict(own)
    for it in items:
        if it.parent is not None:
            top = next((t for t in items if t.path == it.parent), None)
            if top is not None and STATUS_ORDER.index(own[it.id]) < STATUS_ORDER.index(
                    strongest[top.id]):
                strongest[top.id] = own[it.id]
    return tuple(ItemUsage(it, strongest[it.id], tuple(users[it.id])) for it in items)


# -- verdict -----------------------------------------------------------------------------------
def describe(c: Consumer) -> str:
    a = c.attrs
    paths = ", ".join(c.paths[:2]) + (f" and {len(c.paths) - 2} more" if len(c.paths) > 2 else "")
    if c.type == "process":
        who = f"{c.name} (pid {a.pid}"
        if a.unit:
            who += f", {a.unit}"
        if a.container:
            who += f", in {a.container['type']} {a.container['name']}"
        elif a.pid_namespace:
            who += f", in {a.pid_namespace}"
        who += ")"
        gone = " (deleted)" if a.deleted_paths else ""
        return f"{who} holds {'+'.join(a.access or [])} on {paths}{gone}"
    if c.type == "swap":
        return f"active swap file {paths}"
    if c.type == "loop-device":
        return f"loop device {c.name} is backed by {paths}"
    if c.type == "mount":
        if a.nested:
            return f"{c.name} is mounted on top of the volume"
        ns = "" if a.namespace == "host" else f" in the mount namespace of pid {a.pid}"
        return f"the volume is also mounted at {c.name}{ns} (root {a.root})"
    if c.type == "nfs-export" and c.live:
        return f"NFS is exporting {a.export} to {a.client} now"
    flags = [k for k in STARTS_FLAGS if getattr(a, k, None) is True]
    state = f" ({', '.join(flags)})" if flags else ""
    return f"{c.type} {c.name}{state} names {paths}"


def is_blocker(c: Consumer) -> bool:
    if c.live:
        return True
    if c.type == "smb-share" and c.attrs.available is False:
        return False   # `available = no`: Samba does not serve it; referenced, not in use
    if c.type in SELF_STARTING:
        return True
    return any(getattr(c.attrs, k, None) is True for k in STARTS_FLAGS)


def verdict(consumers: tuple[Consumer, ...], problems: tuple[Problem, ...]) -> Verdict:
    by_id = {c.id: c for c in consumers}
    blockers = []
    for c in consumers:
        if not is_blocker(c):
            continue
        blockers.append(Blocker(c.id, describe(c), actions_for(c, by_id)))
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
            out.append(Problem("referenced", f"{describe(c)}: it breaks when started",
                               c.paths[0] if c.paths else None))
    return out


def check(obs: Observation) -> CheckResult:
    """What ``vacate check`` answers, from an observation alone."""
    target, inv, consumers = obs.target, obs.inventory, obs.consumers
    users, whole = attribute(target, inv.items, consumers)
    by_id = {c.id: c for c in consumers}
    items = statuses(inv.items, users, by_id)
    problems = obs.problems
    if not obs.configured:
        problems += (Problem("configured-skipped",
                             "configured users were not read (--no-config)"),)
    v = verdict(consumers, problems)
    warnings = tuple(inv.warnings) + problems + tuple(_referenced_warnings(consumers))
    return CheckResult(target=target, scan=inv, verdict=v, items=items, consumers=consumers,
                       warnings=warnings, whole_volume=tuple(whole), scanned=obs.scanned,
                       elapsed_s=obs.elapsed_s, host=obs.host, ct=obs.ct)
