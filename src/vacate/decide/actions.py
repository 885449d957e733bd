"""The next actions for a consumer, as :class:`Action` values: a pure function of what was
observed of it (its type and attributes), so a saved observation gives the same actions.

Where a unit's manager is reached (the host's, a user's, a container's) is decided in
:func:`unit_place` and :func:`container_place`, and how it is entered in
:meth:`vacate.observing.model.action.Where.wrap`; nothing here builds a sentence
(``model/sentence.py`` renders them).
"""

from __future__ import annotations

from vacate.observing.model.action import HOST, Action, Where
from vacate.observing.model.conditions import (
    Backing,
    DisableNow,
    Engine,
    MountPin,
    Process,
    Running,
    Todo,
    Unit,
    UnitProcess,
    UnitState,
)
from vacate.observing.model.usage import Consumer

DEFAULT_LXCPATH = "/var/lib/lxc"


def container_place(ct: dict | None, user: str | None = None) -> Where:
    """Where a command runs inside the container ``ct`` (a consumer's ``container`` attr:
    ``{"type", "name", "ctid"?, "init_pid"?, "docker_name"?}``)."""
    if not ct:
        return Where(user=user)
    kind, name = ct.get("type"), ct.get("name")
    if kind == "nspawn":
        return Where("machine", name=name, user=user)
    if kind == "pidns" and ct.get("init_pid") is not None:
        # a private pid namespace no runtime names: entered through its PID 1, its manager
        return Where("pid-namespace", pid=ct["init_pid"], user=user)
    if ct.get("ctid") is not None:
        return Where("pct", name=str(ct["ctid"]), user=user)
    if kind == "pve":
        return Where("pct", name=name, user=user)
    if kind == "lxc":
        return Where("lxc", name=name, user=user)
    if kind == "docker":
        return Where("docker", name=ct.get("docker_name") or str(name)[:12], user=user)
    if ct.get("init_pid") is not None:
        return Where("pid-namespace", pid=ct["init_pid"], user=user)
    return Where(user=user)


def unit_place(c: Consumer) -> Where:
    """The manager that runs a process's unit: a container's (a private pid namespace,
    ``pidns``, through its PID 1); for a process in a pid namespace of its own whose PID 1
    was not found, the manager seen from inside it, through the process; else the host's. A
    unit of a user's own manager (``user@UID.service``) goes to that manager."""
    a = c.attrs
    user = None
    if a.user_manager is not None:
        user = a.user if a.uid == a.user_manager and a.user \
            else str(a.user_manager)
    ct = a.container
    if not ct and a.pid_namespace and a.pid is not None:
        return Where("pid-namespace", pid=a.pid, user=user)
    return container_place(ct, user)


def _at(c: Consumer) -> str:
    """Where a configured consumer is written down (``file:line``), or its name."""
    return c.evidence[0].source if c.evidence else c.name


def file_line(at: str) -> dict:
    """``file:line`` as the fields of a :class:`Todo` (a file alone without a line)."""
    path, sep, line = at.rpartition(":")
    if sep and line.isdigit():
        return {"file": path, "line": int(line)}
    return {"file": at}


def _edit(c: Consumer, do: str, **params) -> Action:
    at = _at(c)
    return Action("edit-config", at, params=Todo(do, **file_line(at), **params),
                  consumer=c.id)


def process_actions(c: Consumer, by_id: dict[str, Consumer]) -> tuple[Action, ...]:
    a = c.attrs
    ct = a.container
    unit = a.unit
    pid = a.pid
    pre = Process(pid, a.start_time)
    if a.lxc_monitor and ct:
        if ct.get("ctid") is not None:
            return (Action("stop-container", str(ct["ctid"]), ("pct", "stop", str(ct["ctid"])),
                           precondition=pre, params=Engine("pct"), consumer=c.id),)
        return (Action("stop-container", ct["name"], ("lxc-stop", "-n", ct["name"]),
                       precondition=pre, params=Engine("lxc"), consumer=c.id),)
    if ct and ct.get("type") == "docker":
        name = ct.get("docker_name") or ct["name"][:12]
        return (Action("stop-container", name, ("docker", "stop", name), precondition=pre,
                       params=Engine("docker"), consumer=c.id),)
    if unit and unit.endswith(".service"):
        place = unit_place(c)
        out = [Action("stop-unit", unit, ("systemctl", "stop", unit), place,
                      precondition=UnitProcess(unit, pre.pid, pre.start_time), consumer=c.id)]
        where = f"{ct['type']}:{ct['name']}" if ct else None
        for cid in (f"systemd-unit:{unit}", f"systemd-unit:{where}:{unit}"):
            u = by_id.get(cid)
            if u is not None and u.attrs.enabled is not False:
                out.append(Action("disable-unit", unit, ("systemctl", "disable", unit), place,
                                  precondition=Unit(unit), consumer=cid))
                break
        return tuple(out)
    return (Action("end-process", f"pid {pid}", ("kill", "-TERM", str(pid)), precondition=pre,
                   consumer=c.id),)


def _unit_actions(c: Consumer) -> tuple[Action, ...]:
    a = c.attrs
    now = a.active is True
    argv = ("systemctl", "disable", "--now", c.name) if now else ("systemctl", "disable", c.name)
    ct = a.container
    if ct:
        place = container_place(ct)
    elif a.scope == "user":
        if a.user:
            place = Where(user=a.user)
        else:          # a unit for every user's manager (/etc/systemd/user)
            place = HOST
            argv = ("systemctl", "--global", "disable", c.name)
    else:
        place = HOST
    return (Action("disable-unit", c.name, argv, place,
                   precondition=UnitState(c.name, a.active, a.enabled),
                   params=DisableNow(now), consumer=c.id),)


def _lxc_actions(c: Consumer) -> tuple[Action, ...]:
    a = c.attrs
    lxcpath = a.lxcpath or DEFAULT_LXCPATH
    p = () if lxcpath == DEFAULT_LXCPATH else ("-P", lxcpath)
    out = []
    if a.running is not False:
        out.append(Action("stop-container", c.name, ("lxc-stop", *p, "-n", c.name),
                          precondition=Running(a.running),
                          params=Engine("lxc"), consumer=c.id))
    rel = a.relations or []
    if "rootfs" in rel or "container-dir" in rel:
        out.append(Action("manual", c.name, ("lxc-destroy", *p, "-n", c.name),
                          params=Todo("move-or-destroy"), consumer=c.id))
    else:
        out.append(_edit(c, "change-entry", autostart=bool(a.autostart)))
    return tuple(out)


def _pve_actions(c: Consumer) -> tuple[Action, ...]:
    from vacate.observing.parsers import pve_config

    a = c.attrs
    tool = "pct" if c.type == "pve-container" else "qm"
    vmid = str(a.vmid)
    keys, pending = list(a.keys or []), list(a.pending_keys or [])
    if not keys and pending:
        return (Action("edit-config", vmid, (tool, "set", vmid, "--revert", ",".join(pending)),
                       params=Todo("revert-pending"), consumer=c.id),)
    if not keys:
        snaps = list(a.snapshots or [])
        return tuple(Action("manual", f"{vmid}@{s}", (tool, "delsnapshot", vmid, s),
                            params=Todo("delete-snapshot", last=i == len(snaps) - 1),
                            consumer=c.id) for i, s in enumerate(snaps))
    out = []
    movable = [k for k in keys if pve_config.is_disk_key(k)]
    if tool == "pct" and movable and "rootfs" not in keys and movable == keys:
        # a container's mount points go without stopping it: the deletion is pending while
        # it runs (its own mount of the volume is unmounted inside it), and a restart, when
        # a person chooses, applies it
        out.append(Action("edit-config", vmid, (tool, "set", vmid, "--delete", ",".join(movable)),
                          params=Todo("delete-disks", keys=tuple(movable)), consumer=c.id))
        if a.running is not False:
            out.append(Action("manual", vmid, (tool, "reboot", vmid),
                              params=Todo("restart-container", keys=tuple(movable)),
                              consumer=c.id))
        return tuple(out)
    if a.running is not False:
        out.append(Action("stop-container", vmid, (tool, "shutdown", vmid),
                          precondition=Running(a.running),
                          params=Engine(tool), consumer=c.id))
    if "rootfs" in keys:
        out.append(Action("manual", vmid, (tool, "move-volume", vmid, "rootfs", "OTHER-STORAGE"),
                          params=Todo("move-root-disk"), consumer=c.id))
        return tuple(out)
    movable = [k for k in keys if pve_config.is_disk_key(k)]
    if movable:
        out.append(Action("edit-config", vmid, (tool, "set", vmid, "--delete", ",".join(movable)),
                          params=Todo("delete-disks", keys=tuple(movable)), consumer=c.id))
        return tuple(out)
    out.append(_edit(c, "change-entry"))
    return tuple(out)


def _docker_actions(c: Consumer) -> tuple[Action, ...]:
    out = []
    if c.attrs.running:
        out.append(Action("stop-container", c.name, ("docker", "stop", c.name),
                          precondition=Running(True), params=Engine("docker"),
                          consumer=c.id))
    out.append(Action("remove-container", c.name, ("docker", "rm", c.name),
                      params=Engine("docker", instead="recreate it without the volume"),
                      consumer=c.id))
    return tuple(out)


def _loop_actions(c: Consumer) -> tuple[Action, ...]:
    dev = c.attrs.device or c.name
    out = [Action("unmount", mp, ("umount", mp), consumer=c.id)
           for mp in reversed(c.attrs.mounted_at or [])]
    out.append(Action("detach-loop", dev, ("losetup", "-d", dev),
                      precondition=Backing(c.attrs.backing_file),
                      consumer=c.id))
    return tuple(out)


def _mount_actions(c: Consumer) -> tuple[Action, ...]:
    a = c.attrs
    mp = a.mountpoint or c.name
    place = HOST if (a.namespace or "host") == "host" or a.pid is None \
        else Where("mount-namespace", pid=a.pid)
    return (Action("unmount", mp, ("umount", mp), place,
                   precondition=MountPin(a.mount_id), consumer=c.id),)


def actions_for(c: Consumer, by_id: dict[str, Consumer]) -> tuple[Action, ...]:
    """What to do so that ``c`` no longer uses the volume, in order."""
    a = c.attrs
    t = c.type
    if t == "process":
        return process_actions(c, by_id)
    if t == "swap":
        path = a.swap_path or c.name
        return (Action("swapoff", path, ("swapoff", path), consumer=c.id),)
    if t == "loop-device":
        return _loop_actions(c)
    if t == "mount":
        return _mount_actions(c)
    if t == "nfs-export" and c.live:
        spec = f"{a.client}:{a.export}"
        return (Action("unexport", spec, ("exportfs", "-u", spec), consumer=c.id),)
    if t == "systemd-unit":
        return _unit_actions(c)
    if t == "fstab":
        return (_edit(c, "comment-out", then="systemctl daemon-reload"),)
    if t == "cron":
        return (_edit(c, "change-job"),)
    if t == "nfs-export":
        return (_edit(c, "remove-export", then="exportfs -ra"),)
    if t == "smb-share":
        return (_edit(c, "remove-share", then="smbcontrol all reload-config"),)
    if t == "lxc-container":
        return _lxc_actions(c)
    if t in ("pve-container", "pve-vm"):
        return _pve_actions(c)
    if t == "docker-container":
        return _docker_actions(c)
    if t == "symlink":
        return (Action("manual", c.name, ("rm", c.name), params=Todo("remove-link"),
                       consumer=c.id),)
    if t == "config-file" and a.storage:
        st = str(a.storage)
        return (Action("manual", st, ("pvesm", "remove", st),
                       params=Todo("remove-storage", storage=st), consumer=c.id),)
    return (_edit(c, "change-config"),)
