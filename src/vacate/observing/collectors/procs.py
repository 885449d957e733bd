"""Live users of a volume: one O(processes) pass over ``/proc``. Standard library only.

For every process: the ``root``, ``cwd`` and ``exe`` links, every fd link, and the memory maps
(which also show mapping-only users: a file mapped and then closed, shared libraries, the text
of an executable, and maps of deleted files). Nothing walks the volume.

Two stages: :mod:`vacate.observing.collectors.procs_probe` first looks at every process cheaply (a few
syscalls, a prefix test, a bytes test of the maps; split across a forked child when there are
many processes, or forked off by the CLI before its imports) and names the candidates; only
those get the careful read below. The volume being the root filesystem makes every process a
candidate, so that first look is skipped then.

How a file is matched to the volume, by filesystem identity (valid in every mount namespace):

* maps: the ``major:minor`` column (hex) is the superblock's device, the one mountinfo shows
  (also for files in btrfs subvolumes, whose ``st_dev`` differs);
* processes in *our* mount namespace: the link text is a path in our namespace; the mount that
  holds it (longest mountpoint in our mountinfo) is on the volume when its ``major:minor`` is
  the volume's. No extra syscall per fd;
* processes in *another* mount namespace (containers, ``unshare -m``), and deleted files
  (whose path cannot be looked up; memfd and SYSV shm links look like deleted paths too):
  the link's mount, by its ``mnt_id`` (``/proc/PID/fdinfo/N``, or the link opened ``O_PATH``
  and ``/proc/self/fdinfo/M``), looked up in that process's own mountinfo (read once per
  namespace). Their container-relative paths are translated to the host's path with the
  mount's root field.

Nothing here asks the filesystem a link points into: ``readlink`` of a ``/proc`` link, an
``O_PATH`` open of it and ``fdinfo`` are answered by the kernel from its own records, while a
``stat`` through the link asks that filesystem and blocks for as long as a stopped FUSE daemon
or an unreachable hard-mounted NFS server does not answer (``lsof`` hangs there). Measured on
FUSE (``tests/observing/collectors/test_check_hang.py``); on NFS the ``O_PATH`` open (other namespaces' root, cwd
and exe; map_files) may still revalidate the file, which no test here can show (this kernel
has no NFS client). A dead ``sshfs`` elsewhere on the host cannot hold up the check of
another volume.

A holder in a pid namespace of its own that no cgroup names as a container (systemd as PID 1
of ``unshare``d namespaces, an unregistered nspawn) gets that namespace's PID 1 as its
container (type ``pidns``), so its own unit files, fstab and crontabs are read through
``/proc/INIT/root`` and its manager is entered through that PID 1.

Errors: a process that vanishes while being read is skipped silently. Only holders pay for
their identity (pid, start time from ``/proc/PID/stat``), read after their links; one link is
then read again, so a pid reused in between is not blamed for the old process's files. ``EACCES`` on a process is a
:class:`Problem` with ``blocks_verdict=True`` (we could not see what it holds), with one
exception: the host's PID 1. On these hosts ``/proc/1/{fd,ns,...}`` may be unreadable even to
root (the init belongs to an outer runtime); an init does not hold files on data volumes, and
everything it manages that does (mount and swap units, services) is seen separately as mounts,
swaps and its child processes, so that case is a warning that does not block the verdict.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from vacate.observing.collectors import cgroups, procs_probe
from vacate.observing.collectors.mounts import is_under, mount_of
from vacate.observing.collectors.procs_probe import EXITED, PF_KTHREAD, stat_fields
from vacate.observing.collectors.procs_probe import read_all as _read
from vacate.observing.compat import SLOTS
from vacate.observing.errors import NotFound
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Mount, Target
from vacate.observing.model.usage import Consumer, ContainerRoot, Evidence
from vacate.observing.parsers import mountinfo

_DELETED = " (deleted)"
_ACCESS_ORDER = ("fd", "mmap", "cwd", "root", "exe")


@dataclass(frozen=True, **SLOTS)
class ProcScan:
    """What the pass over ``/proc`` found."""

    consumers: tuple[Consumer, ...]
    problems: tuple[Problem, ...]
    namespaces: tuple[tuple[str, int], ...]      # (mnt namespace, first pid seen in it)
    containers: tuple[ContainerRoot, ...]        # containers whose processes were seen
    processes: int                               # processes read


@dataclass(**SLOTS)
class _Hit:
    """One way a process uses the volume, as the full read saw it."""
    access: str
    path: str          # host path
    source: str
    detail: str
    deleted: bool
    writing: bool = False


def _gpu_index(text: str) -> int | None:
    """N of ``/dev/nvidiaN`` (an NVIDIA GPU), else None."""
    n = text[11:]
    return int(n) if text.startswith("/dev/nvidia") and n.isascii() and n.isdigit() else None


def fs_to_target(target: Target, fs: str) -> str | None:
    """Host path (in the target's mount) of a path inside the filesystem."""
    root = target.mount.root
    if root == "/":
        return target.mount.mountpoint.rstrip("/") + fs if fs != "/" else target.mount.mountpoint
    if fs == root or fs.startswith(root.rstrip("/") + "/"):
        rest = fs[len(root):]
        return target.mount.mountpoint.rstrip("/") + rest if rest else target.mount.mountpoint
    return None


def _rebase(path: str, m: Mount) -> str:
    """Path inside the filesystem of ``path`` seen below mount ``m``."""
    rest = path[len(m.mountpoint):] if m.mountpoint != "/" else path
    root = m.root.rstrip("/")
    return (root + "/" + rest.lstrip("/")) if rest.strip("/") else (m.root or "/")


def _split_deleted(text: str) -> tuple[str, bool]:
    if text.endswith(_DELETED):
        return text[: -len(_DELETED)], True
    return text, False


class PathMatcher:
    """Is a path, spelled in the namespace whose mountinfo is ``mounts``, on the target's
    filesystem? The mount holding it (longest mountpoint) must have the volume's
    ``major:minor``; a prefix test against the volume's own mountpoints rules out almost every
    path first, without walking the mount list."""

    __slots__ = ("exact", "mounts", "prefixes", "target")

    def __init__(self, mounts: tuple[Mount, ...], target: Target):
        self.mounts = mounts
        self.target = target
        vol = (target.mount.major, target.mount.minor)
        mine = [m.mountpoint for m in mounts if (m.major, m.minor) == vol]
        self.exact = frozenset(mine)
        self.prefixes = tuple(mp.rstrip("/") + "/" for mp in mine)

    def __call__(self, text: str) -> tuple[str, bool] | None:
        """(host path, deleted), the path spelled through the target's mount where it can be."""
        if not text.startswith("/"):
            return None
        path, deleted = _split_deleted(text)
        if path not in self.exact and not path.startswith(self.prefixes):
            return None
        target = self.target
        try:
            m = mount_of(self.mounts, path)
        except NotFound:
            return None
        if (m.major, m.minor) != (target.mount.major, target.mount.minor):
            return None
        if m.mount_id != target.mount.mount_id:
            path = fs_to_target(target, _rebase(path, m)) or path
        return path, deleted


def on_volume(mounts: tuple[Mount, ...], target: Target, text: str) -> tuple[str, bool] | None:
    """(host path, deleted) when ``text``, a path in the namespace whose mountinfo is
    ``mounts``, lies on the target's filesystem."""
    return PathMatcher(mounts, target)(text)


def _mnt_id_from_fdinfo(text: bytes) -> int | None:
    for line in text.split(b"\n"):
        if line.startswith(b"mnt_id:"):
            return int(line.split()[1])
    return None


class _Gone(Exception):
    """The process vanished while we read it."""


@dataclass(**SLOTS)
class _Pass:
    """What one pass over /proc shares: the target, its devices, the mounts seen."""
    host: Host
    target: Target
    vol_dev: tuple[int, int]
    map_devs: tuple[bytes, ...]
    host_mounts: tuple[Mount, ...]
    self_ns: str | None
    ns_mounts: dict[str, dict[int, Mount]] = field(default_factory=dict)
    ns_first: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    consumers: list[Consumer] = field(default_factory=list)
    containers: list[ContainerRoot] = field(default_factory=list)
    passwd: dict[int, str] | None = None
    matcher: PathMatcher | None = None
    docker_dirs: list[str] | None = None
    count: int = 0
    self_pid_ns: str | None = None
    pidns_inits: dict[str, int | None] = field(default_factory=dict)

    def pid_namespace(self, pid: int) -> str | None:
        """The pid namespace of ``pid`` when it is not ours (its systemd units belong to
        the manager of that namespace, not ours); None when it is ours or unknown."""
        if not self.host.live:
            return None
        try:
            if self.self_pid_ns is None:
                self.self_pid_ns = os.readlink(self.host.proc_path("self", "ns", "pid"))
            ns = os.readlink(self.host.proc_path(pid, "ns", "pid"))
        except OSError:
            return None
        return ns if ns != self.self_pid_ns else None

    def pidns_container(self, pid: int, ns: str) -> dict | None:
        """The ``container`` of a holder in the pid namespace ``ns`` (not ours) that no cgroup
        names: that namespace's PID 1 (``{"type": "pidns", "name": "INIT", "init_pid": INIT}``),
        whose unit files, fstab and crontabs are then read through ``/proc/INIT/root`` and whose
        manager is entered through it. Found once per namespace; None (and a problem) when no
        PID 1 of it can be found."""
        if ns not in self.pidns_inits:
            init = self.namespace_init(pid, ns)
            self.pidns_inits[ns] = init
            if init is None:
                self.problems.append(Problem(
                    "pidns-init-unknown",
                    f"/proc/{pid}: no PID 1 of its pid namespace {ns} was found: the unit "
                    "files, fstab and crontabs seen inside it could not be read",
                    self.host.proc_path(pid), blocks_verdict=True))
            else:
                self.containers.append(ContainerRoot("pidns", str(init), init))
        init = self.pidns_inits[ns]
        return None if init is None else {"type": "pidns", "name": str(init), "init_pid": init}

    def namespace_init(self, pid: int, ns: str) -> int | None:
        """Host pid of PID 1 of the pid namespace ``ns`` that ``pid`` is in: the process of
        ``ns`` whose last ``NSpid`` field is 1. Looked for up ``pid``'s ancestors first (every
        process forked inside descends from it), then among every process (one entered with
        ``setns`` has its parent outside)."""
        def init_or_parent(p: int) -> tuple[bool, int | None]:
            try:
                if os.readlink(self.host.proc_path(p, "ns", "pid")) != ns:
                    return False, None
                status = _read(self.host.proc_path(p, "status"))
            except OSError:
                return False, None
            ppid = None
            for line in status.split(b"\n"):
                if line.startswith(b"NSpid:") and line.split()[-1] == b"1":
                    return True, None
                if line.startswith(b"PPid:"):
                    ppid = int(line.split()[1])
            return False, ppid

        seen: set[int] = set()
        p: int | None = pid
        while p is not None and p > 0 and p not in seen:
            seen.add(p)
            found, parent = init_or_parent(p)
            if found:
                return p
            p = parent
        try:
            names = os.listdir(self.host.proc)
        except OSError:
            return None
        for n in names:
            if n.isdigit() and int(n) not in seen and init_or_parent(int(n))[0]:
                return int(n)
        return None

    # -- identity ------------------------------------------------------------------------
    def mounts_of_ns(self, pid: int, ns: str) -> dict[int, Mount]:
        got = self.ns_mounts.get(ns)
        if got is None:
            text = _read(self.host.proc_path(pid, "mountinfo")).decode("utf-8", "surrogateescape")
            ms, _bad = mountinfo.parse(text)
            got = {m.mount_id: m for m in ms}
            self.ns_mounts[ns] = got
        return got

    def same_ns_path(self, text: str) -> tuple[str, bool] | None:
        """(host path, deleted) when a link text of a process in our namespace is on the
        volume."""
        if self.matcher is None:
            self.matcher = PathMatcher(self.host_mounts, self.target)
        return self.matcher(text)

    def mnt_id(self, pid: int, link: str, fd: str | None, strict: bool = False) -> int | None:
        """The mount id of an fd (its fdinfo) or of a link (opened ``O_PATH``; the open follows
        the magic link without asking the file's filesystem). None when it is gone;
        ``strict``: other errors are raised (the caller reports them), else None too."""
        try:
            if fd is not None:
                return _mnt_id_from_fdinfo(_read(self.host.proc_path(pid, "fdinfo", fd)))
            h = os.open(link, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError:
            if strict:
                raise
            return None
        try:
            return _mnt_id_from_fdinfo(_read(f"/proc/self/fdinfo/{h}"))
        except OSError:
            return None
        finally:
            os.close(h)

    def other_ns_path(self, pid: int, ns: str, link: str, text: str,
                      fd: str | None) -> tuple[str, bool] | None:
        """(host path, deleted) for a link of a process in another mount namespace, or of a
        deleted file: decided by the link's mount, never by a ``stat`` through the link."""
        if not text.startswith("/"):
            return None
        mid = self.mnt_id(pid, link, fd, strict=True)
        m = self.mounts_of_ns(pid, ns).get(mid) if mid is not None else None
        if m is None or (m.major, m.minor) != self.vol_dev:
            return None
        path, deleted = _split_deleted(text)
        return self.translate(path, m), deleted

    def translate(self, path: str, m: Mount) -> str:
        """A path as a process sees it below mount ``m`` (of the volume) -> the host path."""
        host = fs_to_target(self.target, _rebase(path, m))
        return host if host is not None else f"{self.target.mount.source}:{_rebase(path, m)}"

    def map_mount(self, pid: int, ns: str, rng: str, path: str) -> Mount | None:
        """The mount a mapping lies on: via map_files' mnt_id, else the longest mountpoint of
        the volume in the process's mountinfo."""
        mounts = self.mounts_of_ns(pid, ns)
        mid = self.mnt_id(pid, self.host.proc_path(pid, "map_files", rng), None)
        if mid is not None and mid in mounts:
            return mounts[mid]
        best = None
        for m in mounts.values():
            if ((m.major, m.minor) == self.vol_dev and is_under(path, m.mountpoint)
                    and (best is None or len(m.mountpoint) >= len(best.mountpoint))):
                best = m
        return best

    # -- one process ---------------------------------------------------------------------
    def read_pid(self, pid: int) -> None:
        base = f"{self.host.proc}/{pid}"
        try:
            hits, gpus = self.read_links(pid, base)
        except (_Gone, FileNotFoundError, ProcessLookupError):
            return          # it exited while we read it
        except PermissionError as e:
            self.denied(pid, e)
            return
        except OSError as e:
            if _exited(base):
                return      # it exited while we read it (what a dying one says varies)
            self.problems.append(Problem(
                "unreadable-process", f"/proc/{pid}: {e.strerror or e}: what this process "
                "holds could not be read", base, blocks_verdict=True))
            return
        self.count += 1
        if not hits:
            return
        # Only holders pay for their identity: /proc/PID/stat, parsed from the last ")"
        # (names hold spaces and parentheses), read after the links; one link is read again
        # so a pid reused in between is not blamed for the old process's files.
        try:
            stat = _read(base + "/stat")
        except OSError:
            return
        fields = stat_fields(stat)
        if len(fields) < 20 or int(fields[6]) & PF_KTHREAD or fields[0] in EXITED:
            return
        first = next((h for h in hits if h.access != "mmap"), None)
        if first is not None:
            try:
                if os.readlink(first.source) != first.detail:
                    return
            except OSError:
                return
        start = int(fields[19])
        comm = stat[stat.find(b"(") + 1:stat.rfind(b")")].decode("utf-8", "surrogateescape")
        self.consumers.append(self.consumer(pid, start, comm, fields, hits, gpus))

    def denied(self, pid: int, e: OSError) -> None:
        if pid == 1:
            self.problems.append(Problem(
                "pid1-unreadable",
                f"PID 1 (this machine's init) cannot be read ({e.strerror}, even as root: "
                "the kernel or the container runtime hides it). The verdict does not wait "
                "on it: what init starts was looked at as its own processes, and mounts, swap "
                "and units were read directly; only files init itself holds open are not "
                "seen. To look at those too, run vacate where PID 1 can be read (on the host, "
                "not inside a container).",
                self.host.proc_path(1)))
        else:
            self.problems.append(Problem(
                "permission-denied",
                f"/proc/{pid}: {e.strerror}: what this process holds could not be read",
                self.host.proc_path(pid), blocks_verdict=True))

    def read_links(self, pid: int, base: str) -> tuple[list[_Hit], list[str]]:
        hits: list[_Hit] = []
        gpus: list[str] = []
        ns = self.self_ns
        if self.host.live:
            try:
                ns = os.readlink(base + "/ns/mnt")
            except FileNotFoundError:
                raise _Gone from None
            if ns not in self.ns_first:
                self.ns_first[ns] = pid
                if ns != self.self_ns:
                    self.note_container(pid)
        same = ns == self.self_ns

        def check(link: str, text: str, fd: str | None) -> tuple[str, bool] | None:
            # A deleted file (also memfd:, SYSV shm) has no path to look up: ask the kernel.
            if same and not (self.host.live and text.endswith(_DELETED)):
                return self.same_ns_path(text)
            return self.other_ns_path(pid, ns or "", link, text, fd)

        for kind in ("root", "cwd", "exe"):
            link = f"{base}/{kind}"
            try:
                text = os.readlink(link)
            except FileNotFoundError:
                continue      # kernel-less exe of a zombie, or gone
            got = check(link, text, None)
            if got:
                hits.append(_Hit(kind, got[0], link, text, got[1]))
        fddir = base + "/fd"
        try:
            fds = os.listdir(fddir)
        except FileNotFoundError:
            raise _Gone from None
        for fd in fds:
            link = f"{fddir}/{fd}"
            try:
                text = os.readlink(link)
            except FileNotFoundError:
                continue      # closed meanwhile
            if text[:1] != "/":
                continue      # socket:, pipe:, anon_inode:
            if text.startswith("/dev/nvidia") and _gpu_index(text) is not None:
                gpus.append(text)
            got = check(link, text, fd)
            if got:
                hits.append(_Hit("fd", got[0], link, text, got[1], self.fd_writing(pid, fd)))
        self.read_maps(pid, base, ns, same, hits)
        return hits, gpus

    def fd_writing(self, pid: int, fd: str) -> bool:
        try:
            info = _read(self.host.proc_path(pid, "fdinfo", fd))
        except OSError:
            return False
        for line in info.split(b"\n"):
            if line.startswith(b"flags:"):
                return bool(int(line.split()[1], 8) & 0o3)
        return False

    def read_maps(self, pid: int, base: str, ns: str | None, same: bool,
                  hits: list[_Hit]) -> None:
        try:
            data = _read(base + "/maps")
        except FileNotFoundError:
            raise _Gone from None
        if not any(d in data for d in self.map_devs):
            return
        seen: set[str] = set()
        for line in data.split(b"\n"):
            parts = line.split(None, 5)
            if len(parts) < 6 or b" " + parts[3] + b" " not in self.map_devs:
                continue
            text = parts[5].decode("utf-8", "surrogateescape")
            if text in seen or not text.startswith("/"):
                continue
            seen.add(text)
            path, deleted = _split_deleted(text)
            rng = parts[0].decode()
            if same and self.host.live:
                got = self.same_ns_path(text)
                host = got[0] if got else path
            elif same:
                host = path
            else:
                m = self.map_mount(pid, ns or "", rng, path)
                host = self.translate(path, m) if m is not None else path
            detail = "shared library" if ".so" in os.path.basename(path) else "mapped file"
            hits.append(_Hit("mmap", host, os.path.join(base, "maps"),
                             f"{detail}: {line.decode('utf-8', 'surrogateescape')}", deleted))

    # -- describing a holder -------------------------------------------------------------
    def note_container(self, pid: int) -> None:
        try:
            info = cgroups.parse(_read(self.host.proc_path(pid, "cgroup")).decode())
        except OSError:
            return
        if info.container_type is None or info.lxc_monitor:
            return
        ctype = info.container_type
        if ctype == "lxc" and info.ctid is not None and os.path.exists(
                self.host.etc_path("pve", "lxc", f"{info.ctid}.conf")):
            ctype = "pve"
        self.containers.append(ContainerRoot(ctype, info.container_name or "", pid))

    def docker_roots(self) -> list[str]:
        """Docker data roots (:func:`vacate.observing.collectors.configured.docker.data_roots`; read
        only when a docker holder is found)."""
        if self.docker_dirs is None:
            from vacate.observing.collectors.configured.docker import data_roots

            # a name is a courtesy: what could not be read is the configured source's problem
            self.docker_dirs = data_roots(self.host)
        return self.docker_dirs

    def docker_name(self, cid: str) -> str | None:
        """A docker container's name, from ``DATA_ROOT/containers/ID/config.v2.json``."""
        import json

        for root in self.docker_roots():
            try:
                doc = json.loads(_read(self.host.path(f"{root}/containers/{cid}/config.v2.json")))
            except (OSError, ValueError):
                continue
            name = doc.get("Name") if isinstance(doc, dict) else None
            if isinstance(name, str) and name.strip("/"):
                return name.strip("/")
        return None

    def user_of(self, uid: int | None) -> str | None:
        if uid is None:
            return None
        if self.passwd is None:
            from vacate.observing.fsio import (
                read_bounded,  # holders only: off the start of every check
            )
            from vacate.observing.parsers import passwd

            try:
                data, _more = read_bounded(self.host.etc_path("passwd"), 16 << 20)
                text = data.decode("utf-8", "surrogateescape")
            except OSError:
                text = ""     # a name is a courtesy: the uid is what the verdict uses
            self.passwd = passwd.names(passwd.parse(text))
        return self.passwd.get(uid)

    def consumer(self, pid: int, start: int, comm: str, fields: list[bytes],
                 hits: list[_Hit], gpus: list[str]) -> Consumer:
        import shlex  # holders only: kept off the start of every check

        from vacate.observing.parsers.redact import redact_text

        base = self.host.proc_path(pid)
        try:
            argv = _read(os.path.join(base, "cmdline")).rstrip(b"\0").split(b"\0")
            cmdline = redact_text(shlex.join(a.decode("utf-8", "surrogateescape")
                                             for a in argv if a))
        except OSError:
            cmdline = ""
        uid = ns_pid = None
        try:
            for line in _read(os.path.join(base, "status")).split(b"\n"):
                if line.startswith(b"Uid:"):
                    uid = int(line.split()[1])
                elif line.startswith(b"NSpid:"):
                    nested = line.split()[1:]
                    # the pid its own namespace gives it (a container's ps and nvidia-smi
                    # inside it show this one; the driver and the host show ``pid``)
                    ns_pid = int(nested[-1]) if len(nested) > 1 else None
                    break
        except (OSError, ValueError):
            pass
        try:
            cg = cgroups.parse(_read(os.path.join(base, "cgroup")).decode("utf-8", "replace"))
        except OSError:
            cg = cgroups.parse("")
        container = cg.container_json()
        if container and container["type"] == "docker":
            container["docker_name"] = self.docker_name(container["name"])
        pid_ns = self.pid_namespace(pid)
        if container is None and pid_ns is not None:
            container = self.pidns_container(pid, pid_ns)
        access = sorted({h.access for h in hits}, key=_ACCESS_ORDER.index)
        paths = tuple(dict.fromkeys(h.path for h in hits))
        deleted = sorted({h.path for h in hits if h.deleted})
        evidence = tuple(Evidence(h.access, h.path, h.source, h.detail, h.deleted) for h in hits)
        attrs = {
            "pid": pid,
            "start_time": start,
            "ppid": int(fields[1]),
            "cmdline": cmdline,       # shell-quoted, secrets redacted
            "user": self.user_of(uid),
            "uid": uid,
            "access": access,
            "writing": any(h.writing for h in hits),
            "deleted_paths": deleted,
            "unit": cg.unit,
            "user_manager": cg.user_manager,
            "container": container,
            "lxc_monitor": cg.lxc_monitor,
            "cgroup": cg.path,
            "pid_namespace": pid_ns,
            "ns_pid": ns_pid,
            "gpus": [{"device": g, "index": _gpu_index(g)}
                     for g in sorted(set(gpus))],
        }
        return Consumer(id=f"process:{pid}:{start}", type="process", name=comm, live=True,
                        paths=paths, evidence=evidence, attrs=attrs)


def host_mounts(host: Host, target: Target) -> tuple[Mount, ...]:
    try:
        text = _read(host.proc_path("self", "mountinfo")).decode("utf-8", "surrogateescape")
        ms, _bad = mountinfo.parse(text)
        if ms:
            return ms
    except OSError:
        pass
    return (target.mount, *target.other_mounts, *target.nested_mounts)


def collect(host: Host, target: Target, *, pids: Iterable[int] | None = None,
            nvml=None, skip_self: bool = True,
            early: procs_probe.Early | None = None) -> ProcScan:
    """One pass over ``host``'s processes (or only ``pids``): every process that uses the
    volume of ``target``, as a ``process`` consumer. ``nvml``: an object with pynvml's
    functions (tests pass a fake); by default ``pynvml`` when importable and GPUs are held.
    ``early``: a first look the CLI forked off before its imports (used when it looked for
    this same volume; always reaped)."""
    t = target.mount
    vol_dev = (t.major, t.minor)
    map_devs = (f" {t.major:02x}:{t.minor:02x} ".encode(),)
    self_ns = None
    if host.live:
        try:
            self_ns = os.readlink(host.proc_path("self", "ns", "mnt"))
        except OSError:
            self_ns = None
    p = _Pass(host, target, vol_dev, map_devs, host_mounts(host, target), self_ns)
    matcher = p.matcher = PathMatcher(p.host_mounts, target)
    # The cheap first look (every process; maybe started early, by the CLI), then the full
    # read (candidates only).
    got = None
    if early is not None and pids is None and host.live:
        got = early.finish(matcher.exact, map_devs, self_ns)
    if got is not None:
        first = got[1]
    else:
        if early is not None:
            early.close()
        me = os.getpid() if (skip_self and host.live) else -1
        try:
            if pids is None:
                pids = [int(n) for n in os.listdir(host.proc) if n.isdigit()]
            pids = sorted(pid for pid in pids if pid != me)
            if "/" in matcher.exact:
                # the root filesystem: every process is a candidate, a first look is waste
                first = procs_probe.Probe()
                first.candidates = pids
            else:
                first = procs_probe.probe_split(host.proc, pids, tuple(matcher.exact),
                                                map_devs, self_ns, host.live)
        except OSError as e:
            return ProcScan((), (Problem("unreadable-proc", f"{host.proc}: {e.strerror}",
                                         host.proc, blocks_verdict=True),), (), (), 0)
    p.ns_first.update(first.namespaces)
    for ns, pid in first.namespaces.items():
        if ns != self_ns:
            p.note_container(pid)
    for pid in first.candidates:
        p.read_pid(pid)
    if first.count:
        p.count = first.count         # the first look counted every process it read
    consumers = tuple(p.consumers)
    if any(c.attrs.gpus for c in consumers):
        from vacate.observing.collectors import procs_gpu
        consumers = procs_gpu.annotate(consumers, nvml)
    return ProcScan(consumers, tuple(p.problems), tuple(p.ns_first.items()),
                    tuple(p.containers), p.count)


def _exited(base: str) -> bool:
    """Whether the process at ``base`` (/proc/PID) has exited: gone, or a zombie (state Z or
    X in its stat, after the last ")": the name may hold any character)."""
    try:
        stat = _read(base + "/stat")
    except OSError:
        return not os.path.exists(base)
    fields = stat_fields(stat)
    return bool(fields) and fields[0] in EXITED
