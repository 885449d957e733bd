"""Deciding a retirement: per item keep / archive / delete, then the ordered teardown, as a
pure function of an observation (and of what the person asked).

Defaults, in this order: filesystem artifacts are kept; what can be downloaded again from a
named source (not a guess) is deleted; everything else (unique, unknown, regenerable,
guessed) is archived. ``--keep/--archive/--delete P`` override them: the deepest match wins,
a literal path beats a glob at the same depth, a tie or a pattern that matches nothing is
refused (:class:`PlanRefused`).

The teardown (each step with the evidence that led to it): archive and verify what nothing
uses while the services still run; stop the units whose processes use the volume and disable
what would start them; end the remaining holders (TERM, wait, KILL); confirm the GPUs are
released; kernel users (swap, loop devices, nested and other mounts, exports, containers);
archive and verify the rest; snapshot; delete; configuration that would mount or use the
volume again; unmount, lock the empty mount point, and look again.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import replace

from vacate.decide import verdict
from vacate.decide.actions import _file_line, container_place
from vacate.observing.model.action import Action
from vacate.observing.model.observation import Observation
from vacate.observing.model.plan import Identity, Plan, PlanItem, Step
from vacate.observing.model.usage import CheckResult, Consumer, ItemUsage
from vacate.observing.parsers.paths import is_under

HASH_BYTES_PER_S = 1.2e9      # SHA-256 of holes and data, one core (the archive's floor)
SNAPSHOT_FS = frozenset({"zfs", "btrfs"})
CONTAINERS = frozenset({"docker-container", "lxc-container", "pve-container", "pve-vm"})


class PlanRefused(ValueError):
    """What the person asked cannot be planned (exit 2): the reason names it."""


# -- per item ----------------------------------------------------------------------------------
def _rel(target: str, path: str) -> str:
    return os.path.relpath(path, target)


def _pattern(target: str, p: str) -> str:
    """A ``--keep/--archive/--delete`` argument as a path relative to the target."""
    if p.startswith("/"):
        if not is_under(p, target) or p == target:
            raise PlanRefused(f"{p} is not below the volume {target}")
        p = _rel(target, p)
    p = os.path.normpath(p)
    if p == "." or p.startswith("../"):
        raise PlanRefused(f"{p!r} does not name something on the volume")
    return p


def _is_glob(p: str) -> bool:
    return any(ch in p for ch in "*?[")


def _ancestors(rel: str) -> list[str]:
    """``a/b/c`` -> ``[a/b/c, a/b, a]``."""
    out = [rel]
    while "/" in rel:
        rel = rel.rsplit("/", 1)[0]
        out.append(rel)
    return out


def override_for(rel: str, overrides: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The (action, pattern) that decides the item at ``rel``: of the patterns naming it or
    a directory above it, the deepest; at the same depth a literal one beats a glob; two
    that still tie with different actions are refused."""
    best: list[tuple[int, int, str, str]] = []
    for action, pat in overrides:
        for anc in _ancestors(rel):
            if anc == pat or (_is_glob(pat) and fnmatch.fnmatchcase(anc, pat)):
                best.append((anc.count("/"), 0 if _is_glob(pat) else 1, action, pat))
                break
    if not best:
        return None
    best.sort(reverse=True)
    top = best[0]
    rivals = {b[2] for b in best if b[:2] == top[:2]}
    if len(rivals) > 1:
        pats = ", ".join(sorted({b[3] for b in best if b[:2] == top[:2]}))
        raise PlanRefused(f"{rel}: {pats} ask for different actions at the same depth")
    return top[2], top[3]


def default_action(u: ItemUsage) -> tuple[str, str]:
    """(action, why) for an item nobody asked about: the why says why this action."""
    c = u.item.classification
    if c is not None and c.kind == "filesystem-artifact":
        return "keep", "filesystem artifact"
    if c is not None and c.recoverable == "re-downloadable" and c.source and not c.guess:
        return "delete", f"re-downloadable from {c.source}"
    if c is None or c.recoverable is None:
        return "archive", "not known to be obtainable again"
    if c.guess:
        return "archive", (f"only its name says it is {c.recoverable} (a guess): kept safe "
                           "in the archive")
    if c.recoverable == "regenerable":
        return "archive", ("regenerable, but regenerating may need what is deleted here and "
                           "GPU-days")
    if c.recoverable == "re-downloadable":
        return "archive", ("no one source to download it again is known for it as a whole "
                           "(only for some items inside it)")
    return "archive", "unique: nothing else holds it"


def known_source(c) -> str | None:
    """Where the item can be had again, when that is known rather than guessed."""
    return c.source if c is not None and c.source and not c.guess else None


def get_back(action: str, it: PlanItem, archive_to: str | None, target: str,
             source: str | None = None, snapshot: bool = False,
             known: str | None = None) -> str:
    """What it would take to have the item again. ``known``: where the item itself comes
    from, when not a guess; ``source``: where something inside it comes from, when the item
    itself names none; ``snapshot``: one is taken before the deletes. A guessed source is
    never offered as the way back."""
    if action == "keep":
        return "stays on the volume (it goes cold with it)"
    if action == "delete":
        if known:
            return f"download again: {known}"
        if source:
            return f"download again (what was recognised inside it): {source}"
        if it.recoverable == "regenerable":
            return "regenerate it from what made it (which may need a model and GPU time)"
        return "only the snapshot taken before the deletes has it" if snapshot else \
            "gone for good: nothing else holds it"
    dest = archive_location(archive_to, it) if archive_to else "DEST"
    return f"vacate restore {dest} --to DIR (or zstd -dc | tar -x, see its README)"


def plan_items(obs: Observation, usages: tuple[ItemUsage, ...], overrides: list[tuple[str, str]],
               archive_to: str | None, identities: dict[str, Identity],
               entries: dict[str, dict], snapshot: bool = False) -> tuple[PlanItem, ...]:
    target = obs.target.path
    pats = [(a, _pattern(target, p)) for a, p in overrides]
    used_pats = set()
    decided: dict[str, tuple[str, str]] = {}
    for u in usages:
        rel = _rel(target, u.item.path)
        got = override_for(rel, pats)
        if got is not None:
            used_pats.add(got[1])
            decided[u.item.path] = (got[0], f"asked: --{got[0]} {got[1]}")
        elif u.item.parent is None:
            decided[u.item.path] = default_action(u)
    for a, p in pats:
        if p not in used_pats and not any(
                _rel(target, u.item.path) == p or fnmatch.fnmatchcase(_rel(target, u.item.path), p)
                for u in usages):
            raise PlanRefused(f"--{a} {p}: matches no item of the volume")
    # a sub-item becomes an item of the plan only where its action differs from that of the
    # nearest plan item around it; that one then leaves it out
    included: dict[str, str] = {}                  # path -> action, ancestors first
    around: dict[str, str | None] = {}
    for u in sorted(usages, key=lambda u: u.item.path):
        it = u.item
        outer = next((p for p in reversed(included) if is_under(it.path, p)), None)
        if it.parent is not None:
            own = decided.get(it.path)
            if own is None or own[0] == included[outer]:
                continue      # goes with the plan item around it
        included[it.path] = decided[it.path][0]
        around[it.path] = outer
    _nothing_to_archive(usages, decided, included, around)
    out = []
    for u in usages:
        it, c = u.item, u.item.classification
        if it.path not in included:
            continue
        action, why = decided[it.path]
        pi = PlanItem(
            id=it.id, path=it.path, action=action, reason=why,
            kind=c.kind if c else ("directory" if it.is_dir else "file"),
            label=c.label if c else ("directory" if it.is_dir else "file"),
            recoverable=c.recoverable if c else None, source=c.source if c else None,
            apparent_bytes=it.stats.apparent_bytes, disk_bytes=it.stats.disk_bytes,
            files=it.stats.files, status=u.status, users=u.users,
            identity=identities.get(it.path),
            entries=entries.get(it.path) if action == "delete" else None)
        excl = tuple(p for p, o in around.items() if o == it.path)
        inner = next((known_source(u.item.classification) for u in usages
                      if known_source(u.item.classification)
                      and is_under(u.item.path, it.path)), None)
        snap = snapshot and obs.target.mount.fstype in SNAPSHOT_FS
        out.append(_with(pi, exclude=excl, get_back=get_back(action, pi, archive_to, target,
                                                             inner, snap, known_source(c))))
    return tuple(out)


def _nothing_to_archive(usages, decided: dict, included: dict, around: dict) -> None:
    """An item to archive that holds no file once the items inside it with another action
    are left out (``models/`` when its only model is deleted) is kept instead: an archive of
    nothing is a step spent for nothing, and its empty ``SHA256SUMS`` fails the stock
    ``sha256sum -c``."""
    files = {u.item.path: u.item.stats.files for u in usages}
    for path, action in included.items():
        if action != "archive":
            continue
        inner = [p for p, o in around.items() if o == path]
        if files[path] - sum(files[p] for p in inner) > 0:
            continue
        why = ("nothing is left in it to archive: " +
               ", ".join(f"{os.path.basename(p)} is to {included[p]}" for p in inner)
               if inner else "it holds no files: nothing to archive")
        decided[path] = ("keep", why)
        included[path] = "keep"


def _with(p: PlanItem, **kw) -> PlanItem:
    return replace(p, **kw)


# -- the teardown ------------------------------------------------------------------------------
class _Steps:
    def __init__(self):
        self.steps: list[Step] = []

    def add(self, kind: str, summary: str, *, action: Action | None = None, downtime=False,
            **kw) -> Step:
        n = len(self.steps) + 1
        s = Step(id=f"{n:02d}-{kind}", kind=kind, summary=summary, action=action,
                 downtime=downtime, **kw)
        self.steps.append(s)
        return s


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
        st.add("archive", f"archive {it.path} to {archive_to}", downtime=downtime,
               params={"item": it.path, "to": archive_to, "name": archive_name(it),
                       "exclude": list(it.exclude)},
               precondition={"identity": it.identity is not None},
               postcondition={"archive": where, "complete": True})
        st.add("verify", f"verify the archive of {it.path} read back from {archive_to}",
               downtime=downtime,
               params={"item": it.path, "archive": where, "against": it.path},
               postcondition={"mismatches": 0})


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
    own = x.kind == "edit-config" and not a.get("container")
    if own and c.type in LINE_EDITS and a.get("line_sha256"):
        st.add("edit-config", f"{c.type} {c.name}", action=x, downtime=True,
               params={"file": x.params.get("file"), "line": x.params.get("line"),
                       "line_sha256": a["line_sha256"]}, evidence=c.evidence)
        return
    if own and c.type == "lxc-container" and a.get("mount_entries"):
        lines = {f"{e['file']}:{e['line']}" for e in a["mount_entries"]}
        for e in a["mount_entries"]:
            at = f"{e['file']}:{e['line']}"
            st.add("edit-config", f"{c.type} {c.name}: lxc.mount.entry at {at}", action=x,
                   downtime=True, params={"file": e["file"], "line": e["line"],
                                          "line_sha256": e["line_sha256"]},
                   evidence=tuple(v for v in c.evidence if v.source == at))
        rest = tuple(v for v in c.evidence if v.source not in lines)
        if not rest:
            return
        x = replace(x, subject=rest[0].source, params={**x.params, **_file_line(rest[0].source)})
        st.add("manual", f"{c.type} {c.name}", action=x, downtime=True,
               params={"file": x.params.get("file"), "line": x.params.get("line"),
                       "line_sha256": None}, evidence=rest)
        return
    if own and c.type == "smb-share" and a.get("section_lines") and a.get("file"):
        first = a["section_lines"][0][0]
        st.add("edit-config", f"smb share [{c.name}] in {a['file']}", action=x, downtime=True,
               params={"file": a["file"], "line": first,
                       "line_sha256": a["section_lines"][0][1],
                       "lines": a["section_lines"]}, evidence=c.evidence)
        return
    keys = list(x.params.get("keys") or [])
    if own and c.type == "pve-container" and x.params.get("do") == "delete-disks" and keys \
            and all(PVE_MOUNT_POINT.fullmatch(k) for k in keys) and a.get("config"):
        # mpN only: deleting an unusedN key destroys the volume it names
        st.add("edit-config", f"pct set {a.get('vmid')} --delete {','.join(keys)}", action=x,
               downtime=True, params={"do": "delete-disks", "tool": "pct",
                                      "vmid": str(a.get("vmid")), "keys": keys,
                                      "config": a["config"]}, evidence=c.evidence)
        return
    st.add("manual", f"{c.type} {c.name}", action=x, downtime=True,
           params={"file": x.params.get("file"), "line": x.params.get("line"),
                   "line_sha256": a.get("line_sha256")}, evidence=c.evidence)


def teardown(obs: Observation, items: tuple[PlanItem, ...], *, archive_to: str | None,
             grace_s: float, snapshot: bool, mask_references: bool = False,
             result: CheckResult | None = None) -> tuple[Step, ...]:
    """The ordered steps (``result``: the check of ``obs``, when the caller has it)."""
    result = result or verdict.check(obs)
    by_id = {c.id: c for c in obs.consumers}
    ev = {c.id: c.evidence for c in obs.consumers}
    st = _Steps()
    to_archive = [i for i in items if i.action == "archive"]
    # 1. what nothing uses now is archived while the services still run
    if archive_to:
        _archive_steps(st, [i for i in to_archive if not _live_users(i, by_id)], archive_to,
                       False)
    blockers = {b.consumer: b for b in result.verdict.blockers}
    # 2. units: stop in the manager that runs them, then disable what starts them
    stopped_units: set[tuple[str, str]] = set()
    for b in blockers.values():
        for a in b.actions:
            key = (a.subject, a.where.label())
            if a.kind == "stop-unit" and key not in stopped_units:
                stopped_units.add(key)
                pids = [c.attrs["pid"] for c in obs.consumers if c.type == "process"
                        and c.attrs.get("unit") == a.subject
                        and verdict_place(c) == a.where.label()]
                st.add("stop-unit", f"stop {a.subject} ({a.where.label()})", action=a,
                       downtime=True, precondition=a.precondition,
                       postcondition={"active": False, "pids_gone": pids},
                       evidence=ev.get(a.consumer or "", ()))
    disabled: set[tuple[str, str]] = set()
    for b in blockers.values():
        for a in b.actions:
            if a.kind != "disable-unit":
                continue
            key = (a.subject, a.where.label())
            if a.params.get("now") and key not in stopped_units:
                stop = Action("stop-unit", a.subject, ("systemctl", "stop", a.subject),
                              a.where, precondition={"unit": a.subject}, consumer=a.consumer)
                stopped_units.add(key)
                st.add("stop-unit", f"stop {a.subject} ({a.where.label()})", action=stop,
                       downtime=True, postcondition={"active": False},
                       evidence=ev.get(a.consumer or "", ()))
            if key in disabled:
                continue
            disabled.add(key)
            dis = Action("disable-unit", a.subject, tuple(x for x in a.argv if x != "--now"),
                         a.where, precondition={"unit": a.subject}, consumer=a.consumer)
            st.add("disable-unit", f"disable {a.subject} ({a.where.label()})", action=dis,
                   downtime=True, postcondition={"enabled": False},
                   evidence=ev.get(a.consumer or "", ()))
    # a unit stopped for its processes is disabled too, whether or not its files name the
    # volume: an enabled server would come back at boot (disabling one that is not enabled
    # is nothing)
    for step in list(st.steps):
        if step.kind != "stop-unit" or step.action is None:
            continue
        a = step.action
        key = (a.subject, a.where.label())
        if key not in disabled:
            disabled.add(key)
            dis = Action("disable-unit", a.subject, ("systemctl", "disable", a.subject),
                         a.where, precondition={"unit": a.subject}, consumer=a.consumer)
            st.add("disable-unit", f"disable {a.subject} ({a.where.label()})", action=dis,
                   downtime=True, postcondition={"enabled": False}, evidence=step.evidence)
    # 3. the remaining holders
    inits = {ct.init_pid for ct in obs.containers}
    gpu_pids = []
    for c in obs.consumers:
        if c.type != "process":
            continue
        a = c.attrs
        if a.get("gpus"):
            gpu_pids.append(a["pid"])
        acts = blockers[c.id].actions if c.id in blockers else ()
        if any(x.kind == "stop-unit" for x in acts):
            continue
        pid = a.get("pid")
        for x in acts:
            if x.kind == "stop-container":
                st.add("stop-container", f"stop container {x.subject}", action=x,
                       downtime=True, postcondition={"running": False},
                       evidence=c.evidence)
            elif x.kind == "end-process":
                if pid == 1 or pid in inits or a.get("lxc_monitor"):
                    st.add("manual", f"{c.name} (pid {pid}) is the init of a namespace: stop "
                                     "its container or machine instead", downtime=True,
                           params={"consumer": c.id}, evidence=c.evidence)
                    continue
                st.add("end-process", f"end {c.name} (pid {pid}): TERM, wait {grace_s:g} s, "
                                      "KILL", action=x, downtime=True,
                       params={"grace_s": grace_s}, precondition=x.precondition,
                       postcondition={"gone": True}, evidence=c.evidence)
    # 4. GPUs: the driver's view, from the host
    if gpu_pids:
        st.add("release-gpu", f"confirm no GPU is held by pid {', '.join(map(str, gpu_pids))}",
               downtime=True, params={"pids": gpu_pids}, postcondition={"held": []})
    # 5. kernel users and what starts them again: containers first (their own mounts of it
    # go with them), swap, loop devices (their mounts, then the device), the other mounts
    # innermost first, the exports being served now
    users = [c for c in obs.consumers if c.id in blockers]
    for c in users:
        if c.type not in CONTAINERS:
            continue
        for x in blockers[c.id].actions:
            if x.kind == "stop-container":
                st.add("stop-container", f"stop {c.type} {x.subject}", action=x,
                       downtime=True, precondition=x.precondition, evidence=c.evidence)
            elif x.kind == "remove-container":      # docker: it must not come back by itself
                x = Action("stop-container", x.subject,
                           ("docker", "update", "--restart=no", x.subject),
                           params={"engine": "docker", "restart_policy": "no"},
                           consumer=x.consumer)
                st.add("stop-container", f"no restart for docker container {x.subject}",
                       action=x, downtime=True, evidence=c.evidence)
    mount_of = {}            # (mountpoint, place) -> the mount consumer's unmount
    for c in users:
        if c.type == "mount":
            for x in blockers[c.id].actions:
                mount_of[(x.subject, x.where.label())] = (x, c)
    unmounted: set = set()

    def unmount(x: Action, c: Consumer) -> None:
        key = (x.subject, x.where.label())
        if key in unmounted:
            return
        unmounted.add(key)
        x, c = mount_of.get(key, (x, c))
        st.add("unmount", f"unmount {x.subject} ({x.where.label()})", action=x, downtime=True,
               precondition=x.precondition, evidence=c.evidence)

    for c in users:
        if c.type == "swap":
            for x in blockers[c.id].actions:
                st.add("swapoff", f"swapoff {x.subject}", action=x, downtime=True,
                       precondition=x.precondition, evidence=c.evidence)
    for c in users:
        if c.type == "loop-device":
            for x in blockers[c.id].actions:
                if x.kind == "unmount":
                    unmount(x, c)
                else:
                    st.add("detach-loop", f"detach {x.subject}", action=x, downtime=True,
                           precondition=x.precondition, evidence=c.evidence)
    for x, c in sorted(mount_of.values(), key=lambda xc: -xc[0].subject.count("/")):
        unmount(x, c)
    for c in users:
        if c.type == "nfs-export" and c.live:
            for x in blockers[c.id].actions:
                st.add("unexport", f"stop exporting {x.subject}", action=x, downtime=True,
                       precondition=x.precondition, evidence=c.evidence)
    # 6. the rest of the archives, now that nothing uses them
    if archive_to:
        _archive_steps(st, [i for i in to_archive if _live_users(i, by_id)], archive_to, True)
    # 7-8. snapshot, then delete
    deletes = [i for i in items if i.action == "delete"]
    fstype = obs.target.mount.fstype
    if deletes and snapshot and fstype in SNAPSHOT_FS:
        st.add("snapshot", f"snapshot before deleting ({fstype})", downtime=True,
               params={"fstype": fstype, "dataset": obs.target.zfs_dataset,
                       "items": [i.path for i in deletes]},
               postcondition={"exists": True})
    for it in deletes:
        st.add("delete", f"delete {it.path} ({it.files} files)", downtime=True,
               params={"item": it.path, "exclude": list(it.exclude)},
               precondition={"identity": it.identity is not None},
               postcondition={"gone": True})
    if deletes:
        st.add("check", "compare the space freed with what was expected", downtime=True,
               params={"what": "freed"})
    # 9. configuration that would mount or use the volume again
    for c in obs.consumers:
        if c.id not in blockers or c.type not in ("fstab", "cron", "smb-share", "nfs-export",
                                                  "lxc-container", "pve-container", "pve-vm",
                                                  "symlink", "config-file"):
            continue
        if c.type == "nfs-export" and c.live:
            continue
        for x in blockers[c.id].actions:
            if x.kind in ("stop-container", "remove-container"):
                continue             # stopped with the kernel users
            _config_steps(st, c, x)
    # units that still name what goes away: masked only when asked (the report lists them)
    if mask_references:
        gone = [i.path for i in items if i.action in ("archive", "delete")]
        for c in obs.consumers:
            if c.type != "systemd-unit" or c.id in blockers or not any(
                    is_under(p, g) for p in c.paths for g in gone):
                continue
            place = container_place(c.attrs.get("container"), c.attrs.get("user"))
            x = Action("mask-unit", c.name, ("systemctl", "mask", c.name), place,
                       precondition={"unit": c.name}, consumer=c.id)
            st.add("mask-unit", f"mask {c.name} ({place.label()}): it names what goes away",
                   action=x, downtime=True, evidence=c.evidence)
    # 10. unmount, lock the mount point, look again
    t = obs.target
    st.add("unmount", f"unmount {t.mountpoint}", downtime=True,
           action=Action("unmount", t.mountpoint, ("umount", t.mountpoint),
                         precondition={"mount_id": t.mount.mount_id}),
           precondition={"mount_id": t.mount.mount_id, "dev": t.mount.dev},
           postcondition={"mounted": False})
    st.add("lock-dir", f"make the empty {t.mountpoint} immutable (chattr +i)", downtime=True,
           params={"path": t.mountpoint}, postcondition={"immutable": True})
    st.add("check", "look again by the recorded mount identity: nothing uses it, nothing "
                    "mounts it again", downtime=True,
           params={"what": "retired", "mount_dev": t.mount.dev, "source": t.mount.source})
    return tuple(st.steps)


def verdict_place(c: Consumer) -> str:
    from vacate.decide.actions import unit_place

    return unit_place(c).label()


def make_plan(obs: Observation, *, archive_to: str | None = None,
              overrides: list[tuple[str, str]] = (), grace_s: float = 10.0,
              snapshot: bool = True, identities: dict[str, Identity] | None = None,
              entries: dict[str, dict] | None = None, mask_references: bool = False,
              dest_free: int | None = None, created_at: float = 0.0) -> Plan:
    """The plan for the observed volume; :class:`PlanRefused` when what was asked cannot be
    planned. ``identities``: what each item to archive or delete is, by path (observed by
    the caller), ``entries`` each delete item's entries (``vacate.entries/1``);
    ``dest_free``: the free bytes at ``archive_to``."""
    identities = identities or {}
    result = verdict.check(obs)
    items = plan_items(obs, result.items, list(overrides), archive_to, identities,
                       entries or {}, snapshot)
    blocked = []
    to_archive = [i for i in items if i.action == "archive"]
    subs = {i.path: i for i in items}
    need = sum(i.disk_bytes - sum(subs[e].disk_bytes for e in i.exclude if e in subs)
               for i in to_archive)
    if to_archive and not archive_to:
        blocked.append("these items are to be archived and no destination was given "
                       "(--archive-to): " + ", ".join(i.path for i in to_archive))
    if archive_to and dest_free is not None and need > dest_free:
        blocked.append(f"{archive_to} has {dest_free} bytes free; archiving needs up to "
                       f"{need} (before compression)")
    if result.verdict.safe_to_unmount is None:
        blocked.append("could not tell what uses the volume: " +
                       "; ".join(p.message for p in result.verdict.unknowns))
    steps = teardown(obs, items, archive_to=archive_to, grace_s=grace_s, snapshot=snapshot,
                     mask_references=mask_references, result=result)
    deletes = [i for i in items if i.action == "delete"]
    snap = snapshot and obs.target.mount.fstype in SNAPSHOT_FS and bool(deletes)
    by_path = {i.path: i for i in items}
    hashed = sum(i.apparent_bytes - sum(by_path[e].apparent_bytes for e in i.exclude
                                        if e in by_path) for i in to_archive)
    return Plan(target_path=obs.target.path, mount_id=obs.target.mount.mount_id,
                mount_dev=obs.target.mount.dev, fstype=obs.target.mount.fstype,
                archive_to=archive_to, grace_s=grace_s, snapshot=snapshot,
                mask_references=mask_references, items=items,
                steps=steps, observation=obs, blocked=tuple(blocked),
                problems=tuple(p for p in result.warnings if p.blocks_verdict),
                expected_freed_bytes=0 if snap else sum(i.disk_bytes for i in deletes),
                archive_bytes=need, archive_estimate_s=hashed / HASH_BYTES_PER_S,
                created_at=created_at)


def rebuild(plan: Plan) -> Plan:
    """The plan made again from what it records (its observation, its items' actions as a
    person left them, the identities it took): what apply compares a plan file with, so
    that only the items' actions are a person's to edit."""
    target = plan.observation.target.path
    overrides = [(it.action, _rel(target, it.path)) for it in plan.items]
    return make_plan(plan.observation, archive_to=plan.archive_to, overrides=overrides,
                     grace_s=plan.grace_s, snapshot=plan.snapshot,
                     mask_references=plan.mask_references,
                     identities={it.path: it.identity for it in plan.items if it.identity},
                     entries={it.path: it.entries for it in plan.items if it.entries},
                     created_at=plan.created_at)


def edited_steps(plan: Plan) -> list[str]:
    """Where the plan's steps are not the ones its items make (a step edited by hand, an
    item's action changed without its steps): one line each; empty when they match."""
    from vacate.observing.model import codec

    try:
        again = rebuild(plan)
    except PlanRefused as e:
        return [str(e)]
    out = []
    have = [codec.encode(s) for s in plan.steps]
    want = [codec.encode(s) for s in again.steps]
    for i in range(max(len(have), len(want))):
        a = have[i] if i < len(have) else None
        b = want[i] if i < len(want) else None
        if a != b:
            sid = (a or b)["id"]
            if a is None or b is None:
                out.append(f"step {sid}: {'missing' if a is None else 'not one the items make'}")
            else:
                keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
                out.append(f"step {sid}: {', '.join(keys)} not as its items make it")
        if len(out) >= 10:
            break
    return out
