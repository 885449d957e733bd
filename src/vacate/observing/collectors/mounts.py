"""Which mount holds a path, and everything else the kernel says about that filesystem."""

from __future__ import annotations

import os
from dataclasses import replace

from vacate.observing.collectors import guarded
from vacate.observing.errors import NotFound, Unanswered, VacateError
from vacate.observing.host import Host
from vacate.observing.model.mount import Mount, Target
from vacate.observing.parsers import mountinfo
from vacate.observing.parsers.mountinfo import is_under  # (its callers import it from here too)


def read_mounts(host: Host, pid: str | int = "self") -> tuple[tuple[Mount, ...], tuple[str, ...]]:
    """Mounts as seen by ``pid`` (default: this process). Raises OSError if unreadable."""
    with open(host.proc_path(pid, "mountinfo"), "rb") as f:
        text = f.read().decode("utf-8", "surrogateescape")
    return mountinfo.parse(text)


def mount_of(mounts: tuple[Mount, ...], path: str) -> Mount:
    """The mount that ``path`` lies on: the longest mountpoint prefix, the last one mounted on
    top when several share a mountpoint (mountinfo lists them in mount order)."""
    best: Mount | None = None
    for m in mounts:
        if is_under(path, m.mountpoint) and (best is None
                                             or len(m.mountpoint) >= len(best.mountpoint)):
            best = m
    if best is None:
        raise NotFound(f"no mount holds {path!r}")
    return best


def atime_policy(m: Mount) -> tuple[bool, str]:
    """Whether access times on this mount can be trusted, and why."""
    opts = set(m.options)
    sup = set(m.super_options)
    if "noatime" in opts or "atime=off" in sup:
        return False, "noatime: access times are never updated on this mount"
    if "strictatime" in opts:
        return True, "strictatime: every access updates atime"
    if "relatime" in opts:
        return True, ("relatime: atime is updated when older than mtime or than 24 h, "
                      "so it is good to about a day")
    return True, "atime updated on access (no noatime/relatime option seen)"


def zfs_dataset(m: Mount) -> str | None:
    if m.is_zfs:
        return m.source
    return None


def _look(real: str) -> tuple[str, int, tuple[int, int, int] | None]:
    """(``real``, st_dev, (blocks, free, avail) in bytes or None): the calls that reach the
    target's filesystem."""
    st = os.lstat(real)
    try:
        sv = os.statvfs(real)
        space = (sv.f_blocks * sv.f_frsize, sv.f_bfree * sv.f_frsize, sv.f_bavail * sv.f_frsize)
    except OSError:
        space = None
    return real, st.st_dev, space


def _resolve_look(path: str) -> tuple[str, int, tuple[int, int, int] | None]:
    return _look(os.path.realpath(path))


def resolve_target(path: str, host: Host | None = None) -> Target:
    """Resolve a path the user named to the volume under audit. A path on a filesystem that
    may not answer (FUSE, NFS, CIFS: :mod:`vacate.observing.collectors.guarded`) is looked at in a
    helper process with a deadline; no answer is an error with exit status 3 (could not
    tell)."""
    host = host or Host.local()
    try:
        mounts, _bad = read_mounts(host)
    except OSError as e:
        raise VacateError(f"cannot read mountinfo: {e}",
                          hint="is /proc mounted?") from None
    abspath = os.path.abspath(path)
    risky = tuple(m.mountpoint for m in mounts if guarded.may_hang(m.fstype))
    try:
        try:
            real, st_dev, space = _look(guarded.realpath(abspath, risky))
        except guarded.Risky as r:
            where = r.mountpoint
            real, st_dev, space = guarded.run(_resolve_look, abspath)
    except FileNotFoundError:
        raise NotFound(f"{path}: no such file or directory") from None
    except guarded.NoAnswer:
        m = mount_of(mounts, where)
        # what mountinfo tells of it without a look (no space, st_dev as mounted)
        raise Unanswered(
            f"{path}: the filesystem at {where} ({m.fstype} {m.source}) does not answer: "
            f"no reply in {guarded.DEADLINE_S:g} s; what uses it could not be told",
            hint="is its FUSE daemon or its server alive? (umount -l detaches it)",
            target=_target(abspath, m, mounts, os.makedev(m.major, m.minor), None)) from None
    except OSError as e:        # (a helper's ENOENT arrives as FileNotFoundError, above)
        raise VacateError(f"{path}: cannot stat: {e.strerror}") from None
    abspath = real
    m = mount_of(mounts, abspath)
    return replace(_target(abspath, m, mounts, st_dev, space), loop=loop_backing(host, m))


def loop_backing(host: Host, m: Mount):
    """The loop device ``m`` is on, with its backing file, or None (not a loop device, or
    its sysfs entry unreadable)."""
    from vacate.observing.model.mount import LoopBacking

    if not m.source.startswith("/dev/loop"):
        return None
    base = host.sys_path("dev", "block", f"{m.major}:{m.minor}", "loop")
    try:
        with open(os.path.join(base, "backing_file"), encoding="utf-8",
                  errors="surrogateescape") as f:
            backing = f.read(8192).rstrip("\n")
        with open(os.path.join(base, "autoclear")) as f:
            autoclear = f.read(8).strip() == "1"
    except OSError:
        return None
    return LoopBacking(m.source, backing, autoclear)


def _target(abspath: str, m: Mount, mounts: tuple[Mount, ...], st_dev: int,
            space: tuple[int, int, int] | None) -> Target:
    """The Target for ``abspath`` on mount ``m``: its nested mounts and binds from mountinfo,
    its space from statvfs (``space``: total, free, available; None: not known)."""
    nested = tuple(x for x in mounts
                   if x.mount_id != m.mount_id and is_under(x.mountpoint, abspath)
                   and x.mountpoint != abspath)
    nested_ids = {x.mount_id for x in nested}
    others = tuple(x for x in mounts
                   if x.mount_id != m.mount_id and x.mount_id not in nested_ids
                   and (x.major, x.minor) == (m.major, m.minor))
    size = used = avail = None
    if space is not None:
        size, used, avail = space[0], space[0] - space[1], space[2]
    reliable, note = atime_policy(m)
    return Target(
        path=abspath,
        mount=m,
        st_dev=st_dev,
        size_bytes=size,
        used_bytes=used,
        avail_bytes=avail,
        atime_reliable=reliable,
        atime_note=note,
        zfs_dataset=zfs_dataset(m),
        nested_mounts=nested,
        other_mounts=others,
    )
