"""The teardown's phases for the items migrated (``--migrate P=DEST``), pure, like the rest of
:mod:`vacate.decide.teardown`: each item copied and read back while the services still run;
each running unit whose every path on the volume is migrated stopped, copied again, read
back, repointed by a drop-in and started from the new place; the rest copied again once
nothing uses them; then what else names only migrated paths repointed (lines of config
files, symlinks, Proxmox mount points; a docker bind is a manual step).
"""

from __future__ import annotations

import re

from vacate.decide.actions import container_place
from vacate.observing.model.action import Action
from vacate.observing.model.conditions import (
    CopyOf,
    MountPointSet,
    Names,
    PointsTo,
    ReadBack,
    Shows,
    Todo,
    UnitActive,
)
from vacate.observing.model.plan import PlanItem
from vacate.observing.model.steps import (
    Copy,
    Manual,
    RepointConfig,
    RepointLink,
    RepointMountPoint,
    RepointUnit,
    StartUnit,
    StopUnit,
    VerifyCopy,
)
from vacate.observing.model.usage import Consumer
from vacate.observing.parsers.paths import escape, is_under, rebase

IN_CT = frozenset({"config-file", "cron"})     # rewritten inside the --ct container
FSTAB_FORMAT = frozenset({"fstab", "lxc-container"})   # its paths written with octal escapes
_SHELL_WORD = re.compile(r"[\w@%+=:,./-]+")      # a path a shell command takes as it is
TYPE_CHECKING = False
if TYPE_CHECKING:
    from vacate.decide.teardown import Teardown


def verdict_place(c: Consumer) -> str:
    from vacate.decide.actions import unit_place

    return unit_place(c).label()


def _copy_steps(t: Teardown, it: PlanItem, final: bool) -> None:
    what = "copy again what changed in" if final else "copy"
    t.st.add(Copy(it.path, it.migrate_to, final), f"{what} {it.path} to {it.migrate_to}", downtime=final,
             postcondition=CopyOf(it.path))
    t.st.add(VerifyCopy(it.path, it.migrate_to), f"read {it.migrate_to} back from the disk against {it.path}",
             downtime=final, postcondition=ReadBack(0))


def migrate_live(t: Teardown) -> None:
    """1. Each item to migrate copied and read back while the services still run."""
    for it in t.items:
        if it.action == "migrate":
            _copy_steps(t, it, False)


def _unit_refs(t: Teardown, a: Action) -> list[str]:
    """The paths on the volume the unit of the stop action ``a`` uses or names."""
    out = []
    for c in t.obs.consumers:
        if c.type == "process" and c.attrs.unit == a.subject and \
                verdict_place(c) == a.where.label() or c.type == "systemd-unit" and c.name == a.subject and \
                container_place(c.attrs.container, c.attrs.user).label() == \
                a.where.label():
            out += c.paths
    return out


def _env_files_kept(t: Teardown, a: Action) -> list[str]:
    """The environment files the unit of the stop action ``a`` reads that name the volume
    and that vacate cannot rewrite (inside a container other than ``--ct``'s, or a line it
    cannot check): the unit would start from the old path."""
    return [c.name for c in t.obs.consumers if c.type == "config-file"
            and any(u.rsplit(":", 1)[-1] == a.subject for u in c.attrs.used_by or ())
            and container_place(c.attrs.container, c.attrs.user).label() ==
            a.where.label()
            and (c.attrs.container and _in_ct(t, c) is None
                 or not c.attrs.line_sha256s)]


def _in_ct(t: Teardown, c: Consumer) -> str | None:
    """The CTID of the ``--ct`` container when the consumer ``c`` lies inside it (its files
    are then spelled as the container spells them), else None."""
    ct, view = c.attrs.container or {}, t.obs.ct
    ctid = ct.get("ctid") or (ct.get("name") if ct.get("type") == "pve" else None)
    return view.ctid if view is not None and ctid is not None and \
        str(ctid) == view.ctid else None


def _user_manager_answered(t: Teardown, a: Action) -> bool:
    """The user's manager that runs the unit of the stop action ``a`` answered for that unit
    when the volume was looked at (its state came from ``systemctl --user``): vacate reaches
    it to repoint the unit."""
    return any(c.type == "systemd-unit" and c.name == a.subject and
               c.attrs.scope == "user" and c.attrs.state_from == "systemctl" and
               container_place(c.attrs.container, c.attrs.user) == a.where
               for c in t.obs.consumers)


def migrate_units(t: Teardown) -> None:
    """2. Each running unit whose every path on the volume lies in items migrated: stop,
    copy again what changed, read it back, repoint, start from the new place; it is not
    disabled. A unit of a user's own manager is repointed there when that manager answered
    for it. A unit that also names what is not migrated, or an ancestor of a migrated item,
    or whose user's manager did not answer, is stopped and disabled with the rest, and a
    person is told why."""
    moving = [i for i in t.items if i.action == "migrate"]
    if not moving:
        return
    seen = set()
    for b in t.blockers.values():
        for a in b.actions:
            key = (a.subject, a.where.label())
            if a.kind != "stop-unit" or key in seen:
                continue
            seen.add(key)
            refs = _unit_refs(t, a)
            used = [i for i in moving if any(is_under(r, i.path) for r in refs)]
            if not used:
                continue
            rest = [r for r in refs if not any(is_under(r, i.path) for i in used)]
            rest += _env_files_kept(t, a)
            if a.where.user is not None and not _user_manager_answered(t, a):
                t.st.add(Manual(consumer=a.consumer), f"{a.subject} runs in {a.where.user}'s own manager "
                                   f"({a.where.label()}), which did not answer when the "
                                   "volume was looked at (not running, or not reachable): "
                                   "it is not repointed or started; repoint it by hand to "
                                   f"{', '.join(i.migrate_to for i in used)} (systemctl "
                                   "--user edit, in that user's session)", downtime=True,)
                continue
            if _own_root(t, a.where):
                t.st.add(Manual(consumer=a.consumer), f"{a.subject} runs in {a.where.label()}, which has a root "
                                   "of its own: how it spells "
                                   f"{', '.join(i.migrate_to for i in used)} is not known "
                                   "here, so it is not repointed or started; repoint it by "
                                   "hand (or plan from its host with --ct for a Proxmox "
                                   "container)", downtime=True,)
                continue
            if rest:
                t.st.add(Manual(consumer=a.consumer), f"{a.subject} also names {', '.join(sorted(set(rest))[:3])}"
                                   " (not migrated, a directory above what is, or an "
                                   "environment file vacate cannot rewrite there): it is not "
                                   "repointed or started; repoint it by hand",
                         downtime=True,)
                continue
            t.stopped_units.add(key)
            t.disabled.add(key)
            pids = [c.attrs.pid for c in t.obs.consumers if c.type == "process"
                    and c.attrs.unit == a.subject
                    and verdict_place(c) == a.where.label()]
            at = a.where.manager_words()
            stop = t.st.add(StopUnit(), f"stop {a.subject} ({at})", action=a,
                            downtime=True, precondition=a.precondition,
                            postcondition=UnitActive(False, tuple(pids)),
                            evidence=t.ev.get(a.consumer or "", ()))
            for it in used:
                if it.path not in t.moved:
                    t.moved.add(it.path)
                    _copy_steps(t, it, True)
            repoint_config(t)        # an EnvironmentFile naming it, before the unit starts
            moves, away = _moves_for(t, a.where, used)
            into = tuple(n for _o, n in moves)
            t.st.add(RepointUnit(a.subject, stop.id, moves), f"repoint {a.subject} ({at}) to {', '.join(into)} by a "
                                     "drop-in",
                     downtime=True, postcondition=Shows(into))
            t.st.add(StartUnit(a.subject, stop.id, into, away), f"start {a.subject} ({at}) from {', '.join(into)}",
                     downtime=True,
                     postcondition=UnitActive(True, holds_under=into))


def _own_root(t: Teardown, where) -> bool:
    """Whether the manager at ``where`` runs in a container with a root of its own (LXC,
    docker, a machine, a Proxmox container other than the ``--ct`` one), where the host's
    spelling of DEST means nothing; a namespace entered by pid shares the host's paths."""
    if where.kind not in ("pct", "lxc", "docker", "machine"):
        return False
    ct = t.obs.ct
    return not (ct is not None and where.kind == "pct" and str(where.name) == ct.ctid)


def _moves_for(t: Teardown, where, used: list[PlanItem]) -> tuple[tuple, str]:
    """Each ``(old, new)`` path of the items ``used`` and the volume's mount point, as the
    manager at ``where`` spells them: the container's own paths for a unit of the ``--ct``
    container (its processes and its unit files name those), the host's elsewhere."""
    ct = t.obs.ct
    inside = ct is not None and where.kind == "pct" and str(where.name) == ct.ctid
    return _spelled(t, inside, used)


def _spelled(t: Teardown, inside: bool, used: list[PlanItem]) -> tuple[tuple, str]:
    ct = t.obs.ct
    if inside and ct is not None and all(i.migrate_inside for i in used):
        return tuple((rebase(i.path, ct.host_path, ct.path), i.migrate_inside)
                     for i in used), ct.path
    return tuple((i.path, i.migrate_to) for i in used), t.obs.target.mountpoint


def migrate_rest(t: Teardown) -> None:
    """6. Items migrated that no repointed unit used: copied again once nothing uses
    them, and read back; then what names them repointed."""
    for it in t.items:
        if it.action == "migrate" and it.path not in t.moved:
            t.moved.add(it.path)
            _copy_steps(t, it, True)
    repoint_config(t)


def _new_path(path: str, moves) -> str | None:
    for old, new in moves:
        if is_under(path, old):
            return new + path[len(old.rstrip("/")):]
    return None


def _repoint_one(t: Teardown, c: Consumer, moves, ct: str | None = None) -> bool:
    """The steps that repoint one consumer naming only migrated paths (``ct``: a file
    inside that container, rewritten there, ``moves`` as it spells them); False when vacate
    has no way to (it is then disarmed like any other)."""
    a = c.attrs
    lines = None
    if ct is not None and c.type not in IN_CT:
        return False
    if c.type == "cron" and any(_SHELL_WORD.fullmatch(n) is None for _o, n in moves):
        t.st.add(Manual(consumer=c.id), f"{a.file}: a cron job names "
                           f"{', '.join(o for o, _n in moves)}, and in its shell command "
                           f"{', '.join(repr(n) for _o, n in moves)} would need quoting: "
                           "vacate does not rewrite the command; repoint it by hand",
                 downtime=True, evidence=c.evidence)
        return True
    if c.type in ("fstab", "cron") and a.line_sha256 and a.line:
        lines = [(a.file, [[a.line, a.line_sha256]])]
    elif c.type == "config-file" and a.line_sha256s and a.file:
        lines = [(a.file, [list(x) for x in a.line_sha256s])]
    elif c.type == "lxc-container" and a.mount_entries:
        lines = [(e["file"], [[e["line"], e["line_sha256"]]]) for e in a.mount_entries]
    if lines is not None:
        spelled = tuple((escape(o), escape(n)) for o, n in moves) \
            if c.type in FSTAB_FORMAT else tuple(moves)     # as the line spells them
        for file, targets in lines:
            first = targets[0][0]
            x = Action("edit-config", f"{file}:{first}", consumer=c.id,
                       params=Todo(file=file, line=first))
            t.st.add(RepointConfig(file, first, targets[0][1],
                                                 lines=targets if len(targets) > 1 else None,
                                                 moves=spelled, ct=ct), f"repoint {c.type} {c.name} ({file}) to "
                                       f"{', '.join(n for _o, n in moves)}", action=x,
                     downtime=True,
                     postcondition=Names(tuple(n for _o, n in moves)), evidence=c.evidence)
        return True
    if c.type == "symlink" and a.target:
        raw = a.target
        to = _new_path(raw, moves) if raw.startswith("/") else None
        to = to or _new_path(a.resolved or "", moves)
        if to is None:
            return False
        t.st.add(RepointLink(c.name, raw, to), f"point {c.name} to {to}", downtime=True,
                 postcondition=PointsTo(to), evidence=c.evidence)
        return True
    if c.type == "pve-container" and a.binds and a.config:
        news = {k: _new_path(v.split(",", 1)[0], moves) for k, v in a.binds.items()}
        if None in news.values() or not set(a.keys or ()) <= set(news) or \
                a.pending_keys:
            return False                  # it also uses the volume another way
        for key, value in sorted(a.binds.items()):
            new_value = ",".join([news[key], *value.split(",")[1:]])
            t.st.add(RepointMountPoint(str(a.vmid), a.config, key,
                                                       value, new_value,
                                                       bool(a.running)), f"pct set {a.vmid} --{key} {new_value}" +
                     (", then start it again" if a.running else ""), downtime=True,
                     postcondition=MountPointSet(key, new_value), evidence=c.evidence)
        return True
    if c.type == "docker-container" and a.binds:
        for source, dest, mode in a.binds:
            new = _new_path(source, moves)
            if new is None:
                continue
            ro = ",readonly" if mode == "ro" else ""
            t.st.add(Manual(consumer=c.id), f"docker container {c.name} binds {source} at {dest}: recreate "
                               f"it (vacate does not) with --mount type=bind,source={new},"
                               f"target={dest}{ro} in place of that bind: docker stop "
                               f"{c.name} && docker rm {c.name}, then docker run as it was "
                               f"made (docker inspect {c.name} shows how)", downtime=True,
                     evidence=c.evidence)
        return True
    return False


def repoint_config(t: Teardown) -> None:
    """What names only items migrated and copied for the last time by now, repointed:
    lines of fstab, crontabs, environment files and LXC configs rewritten (the line as it
    was kept behind a dated marker, a backup beside the file), symlinks pointed at the new
    place, a Proxmox container's bind mount points set by ``pct set`` (the container started
    again when it ran); a docker container's bind is a person's to recreate (a manual
    step). Inside the ``--ct`` container, its environment files and crontabs are rewritten
    there, with the paths as it spells them."""
    moving = [i for i in t.items if i.action == "migrate" and i.path in t.moved]
    for c in t.obs.consumers:
        ct = _in_ct(t, c)
        if c.id in t.repointed or not c.paths or c.attrs.container and ct is None:
            continue
        if not all(any(is_under(p, i.path) for i in moving) for p in c.paths):
            continue
        used = [i for i in moving if any(is_under(p, i.path) for p in c.paths)]
        moves = _spelled(t, True, used)[0] if ct is not None else \
            tuple((i.path, i.migrate_to) for i in used)
        if _repoint_one(t, c, moves, ct):
            t.repointed.add(c.id)
