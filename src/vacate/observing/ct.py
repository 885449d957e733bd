"""``--ct CTID`` on a Proxmox host: a path as container CTID sees it (``/data``), looked at from
the host, which sees more than the container does — every process of the container and of
the host (the NVIDIA driver knows host pids only), the container's config
(``/etc/pve/lxc/CTID.conf``: ``mpN``, ``lxc.mount.entry``), the storage behind it
(``storage.cfg``), snapshots that still name it.

The container's path is mapped to the host's mount of the same files:
- a running container: through its init's mountinfo (``/proc/INIT/mountinfo``: the mount
  holding the path, its device and the path inside that filesystem), to the host mount of
  the same device whose root holds that path;
- a stopped one: through its config: the mount point (``rootfs``, ``mpN``, a raw
  ``lxc.mount.entry``) whose container path holds the path, its volume resolved through
  ``storage.cfg`` (a ZFS subvolume is a dataset the host mounts; a bind mount point is a host
  path). Its own unit files, fstab and crontabs are then read from its root filesystem as
  the host mounts it, and the observation says the container is stopped.

Then the host's volume is observed as any other, and the observation records the mapping
(:class:`CtView`). The host reads everything this needs; ``pct`` is asked only whether the
container runs (``pct status``), where it exists. Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import subprocess
from dataclasses import replace

from vacate.observing.errors import NotFound, UsageError, VacateError
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.observation import CtView
from vacate.observing.parsers.paths import rebase as _rebase


def _is_under(path: str, top: str) -> bool:
    return top == "/" or path == top or path.startswith(top.rstrip("/") + "/")


def check_ctid(ctid: str) -> str:
    if not ctid.isdigit() or len(ctid) > 9:
        raise UsageError(f"--ct {ctid!r}: a Proxmox container id is a number (100-999999999)")
    return str(int(ctid))


def config_path(host: Host, ctid: str) -> str:
    return host.etc_path("pve", "lxc", f"{ctid}.conf")


def read_config(host: Host, ctid: str) -> tuple[str, str]:
    """(the config's text, its sha256); NotFound naming what is missing."""
    path = config_path(host, ctid)
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 20)
    except FileNotFoundError:
        raise NotFound(f"CT {ctid}: no {host.spell(path)} here (is this its Proxmox host?)",
                       hint="run it on the Proxmox host, or reach it with --host") from None
    except OSError as e:
        raise VacateError(f"CT {ctid}: cannot read {host.spell(path)}: {e.strerror}") from None
    return raw.decode("utf-8", "surrogateescape"), hashlib.sha256(raw).hexdigest()


def find_init(host: Host, ctid: str) -> int | None:
    """Host pid of the container's init: the process in its cgroup (``/lxc/CTID/``,
    ``lxc.payload.CTID``) that is PID 1 of its pid namespace; None when none runs."""
    from vacate.observing.collectors import cgroups

    try:
        names = os.listdir(host.proc)
    except OSError:
        return None
    for name in sorted((n for n in names if n.isdigit()), key=int):
        try:
            with open(host.proc_path(name, "cgroup"), "rb") as f:
                info = cgroups.parse(f.read().decode("utf-8", "replace"))
            if info.ctid != int(ctid) or info.lxc_monitor:
                continue
            with open(host.proc_path(name, "status"), "rb") as f:
                for line in f.read().split(b"\n"):
                    if line.startswith(b"NSpid:") and line.split()[-1] == b"1":
                        return int(name)
        except (OSError, ValueError):
            continue
    return None


def pct_says_running(ctid: str) -> bool | None:
    """``pct status CTID``'s answer where ``pct`` exists (Proxmox's own view), else None."""
    pct = shutil.which("pct")
    if pct is None:
        return None
    try:
        r = subprocess.run([pct, "status", ctid], capture_output=True, text=True, timeout=20,
                           stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = r.stdout.split()
    if r.returncode != 0 or len(words) < 2 or words[0] != "status:":
        return None
    return words[1] == "running"


def through_mountinfo(host: Host, ctid: str, init: int, path: str) -> tuple[str, str]:
    """(host path, how) of ``path`` inside the running container whose init is ``init``."""
    from vacate.observing.collectors.mounts import mount_of, read_mounts

    try:
        inside, _ = read_mounts(host, init)
        outside, _ = read_mounts(host)
    except OSError as e:
        raise VacateError(f"CT {ctid}: cannot read the mounts of its init (pid {init}): {e}")
    m = mount_of(inside, path)
    fs_path = _rebase(path, m.mountpoint, m.root)
    best = None
    for h in outside:
        if (h.major, h.minor) == (m.major, m.minor) and not h.deleted and \
                _is_under(fs_path, h.root) and (best is None or len(h.root) > len(best.root)):
            best = h
    if best is None:
        raise NotFound(f"CT {ctid}: {path} is on {m.source} ({m.fstype}, device {m.dev}), "
                       "which this host does not mount itself",
                       hint=f"look inside the container: pct exec {ctid} -- ... or vacate "
                            "check --host with the container's address")
    how = (f"{path} is on {m.mountpoint} inside CT {ctid} ({m.source}, {m.fstype}, device "
           f"{m.dev}; mountinfo of its init, pid {init}), which the host mounts at "
           f"{best.mountpoint}")
    return _rebase(fs_path, best.root, best.mountpoint), how


def mount_points(host: Host, text: str) -> list[tuple[str, str | None, str]]:
    """(container path, host path or None, the config line) of each mount point of the
    current config: ``rootfs``, ``mpN`` (volumes resolved through storage.cfg, bind mount
    points as they are) and raw ``lxc.mount.entry`` lines."""
    from vacate.observing.parsers import pve_config, pve_storage

    conf, _ = pve_config.parse(text)
    storages = {}
    try:
        with open(host.etc_path("pve", "storage.cfg"), encoding="utf-8",
                  errors="surrogateescape") as f:
            storages, _ = pve_storage.parse(f.read(1 << 20))
    except OSError:
        pass
    out = []
    for ln in conf.current.lines:
        if ln.key == "rootfs" or (ln.key.startswith("mp") and ln.key[2:].isdigit()):
            vol = pve_config.parse_volume(ln.value)
            guest = "/" if ln.key == "rootfs" else vol.guest_path
            if not guest:
                continue
            where = vol.path
            if where is None:
                loc = pve_storage.resolve(storages, vol.volume)
                where = loc.path if loc is not None else None
            out.append((posixpath.normpath(guest), where, f"{ln.key}: {ln.value}"))
        elif ln.key == "lxc.mount.entry":
            fields = ln.value.split()
            if len(fields) >= 2 and fields[0].startswith("/"):
                out.append((posixpath.normpath("/" + fields[1].lstrip("/")), fields[0],
                            f"{ln.key}: {ln.value}"))
    return out


def through_config(host: Host, ctid: str, text: str, path: str) -> tuple[str, str]:
    """(host path, how) of ``path`` inside the stopped container, from its config."""
    best = None
    for guest, where, line in mount_points(host, text):
        if _is_under(path, guest) and (best is None or len(guest) > len(best[0])):
            best = (guest, where, line)
    if best is None or best[1] is None:
        raise NotFound(f"CT {ctid}: no mount point of its config holds {path}"
                       + (f" whose storage this host knows ({best[2]})" if best else ""))
    guest, where, line = best
    if not os.path.isdir(host.path(where)):
        raise NotFound(f"CT {ctid} is stopped and {where} ({line}) is not a directory on "
                       "this host: its volume is not mounted here",
                       hint=f"start the container (pct start {ctid}) or mount the volume")
    return _rebase(path, guest, where), f"{line} in {config_path(host, ctid)} (CT stopped)"


def stopped_sources(host: Host, ctid: str, text: str, target) -> tuple[tuple, tuple]:
    """The stopped container's own unit files, fstab and crontabs, read from its root
    filesystem where the host mounts it, as the volume is spelled inside it."""
    from vacate.observing.collectors.configured import in_stopped_container

    points = mount_points(host, text)
    root = next((w for g, w, _l in points if g == "/" and w), None)
    if root is None or not os.path.isdir(host.path(root)):
        return (), (Problem("container-unreadable",
                            f"CT {ctid} is stopped and its root filesystem is not mounted on "
                            "this host: the unit files, fstab and crontabs inside it were "
                            "not read", config_path(host, ctid), blocks_verdict=True),)
    prefixes = []
    for guest, where, _line in points:
        if where and guest != "/" and _is_under(where, target.path):
            prefixes.append((guest, where))
        elif where and guest != "/" and _is_under(target.path, where):
            prefixes.append((_rebase(target.path, where, guest), target.path))
    return in_stopped_container(host, target, ctid, host.path(root), tuple(prefixes))


def view_of(host: Host, ctid: str, path: str) -> tuple[CtView, str]:
    """How container ``ctid``'s ``path`` maps to the host (and the config's text)."""
    ctid = check_ctid(str(ctid))
    if not path.startswith("/"):
        raise UsageError(f"--ct {ctid}: {path!r}: name the path as the container spells it, "
                         "from its /")
    path = posixpath.normpath(path)
    text, digest = read_config(host, ctid)
    init = find_init(host, ctid)
    running = pct_says_running(ctid)
    if running is None:
        running = init is not None
    if running and init is not None:
        host_path, how = through_mountinfo(host, ctid, init, path)
    else:
        host_path, how = through_config(host, ctid, text, path)
        init = None
    return CtView(ctid, path, host_path, init is not None, init, how,
                  host.spell(config_path(host, ctid)), digest), text


def observe(host: Host, ctid: str, path: str, **kw):
    """The observation of ``path`` as container ``ctid`` sees it, from the host."""
    from vacate.observing.observe import observe as look

    view, text = view_of(host, ctid, path)
    ctid, init, host_path = view.ctid, view.init_pid, view.host_path
    obs = look(host_path, host=host, **kw)
    extra, problems = (), ()
    if init is None and obs.users and obs.configured:
        extra, problems = stopped_sources(host, ctid, text, obs.target)
        problems = (Problem("container-stopped",
                            f"CT {ctid} is stopped: observed from its config and, for the "
                            "unit files, fstab and crontabs inside it, its root filesystem",
                            config_path(host, ctid)),) + tuple(problems)
    seen = {c.id for c in obs.consumers}
    return replace(obs, ct=view, host=replace(obs.host, via=f"CT {ctid}"),
                   consumers=obs.consumers + tuple(c for c in extra if c.id not in seen),
                   problems=obs.problems + tuple(problems))
