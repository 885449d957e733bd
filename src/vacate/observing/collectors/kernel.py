"""Kernel users of a volume: swap files, loop devices backed by files on it, mounts nested
under it or of it elsewhere (bind mounts, other mount namespaces), and NFS exports the kernel
is serving now (``/var/lib/nfs/etab``; ``/etc/exports`` itself is read by the configured-users
collector, under ids ``nfs-export:/etc/exports...``; ours are ``nfs-export:etab:PATH:CLIENT``).
Standard library only.
"""

from __future__ import annotations

import dataclasses
import errno
import glob
import os
import struct
from collections.abc import Iterable

from vacate.observing.collectors import guarded
from vacate.observing.collectors.procs import fs_to_target, host_mounts, on_volume
from vacate.observing.fsio import read_bounded, read_problem
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Mount, Target
from vacate.observing.model.usage import Consumer, Evidence
from vacate.observing.parsers import mountinfo
from vacate.observing.parsers.redact import shown_text

LOOP_GET_STATUS64 = 0x4C05
_LOOP_INFO64 = struct.Struct("=QQQQQIIII64s64s32sQQ")


MAX_BYTES = 64 << 20      # the kernel's tables (mountinfo of thousands of mounts included)


def _read_text(path: str) -> str:
    """A kernel table, whole; raises the ``OSError`` of the read (:class:`NotRegular` for what
    is not a regular file, ``EFBIG`` for a table over the bound: not all of it was seen)."""
    data, more = read_bounded(path, MAX_BYTES)
    if more:
        raise OSError(errno.EFBIG, f"larger than {MAX_BYTES} bytes, not read whole", path)
    return data.decode("utf-8", "surrogateescape")


def _table(path: str, problems: list[Problem] | None) -> str | None:
    """A kernel table, or None: missing is nothing (no swap, no NFS server); unreadable is a
    problem that makes the verdict "could not tell" (what it lists is unknown)."""
    try:
        return _read_text(path)
    except OSError as e:
        p = read_problem(e, path)
        if p and problems is not None:
            problems.append(p)
        return None


def swaps(host: Host, target: Target, mounts: tuple[Mount, ...],
          problems: list[Problem] | None = None) -> list[Consumer]:
    """Active swap files on the volume (``/proc/swaps``)."""
    text = _table(host.proc_path("swaps"), problems)
    if text is None:
        return []
    out = []
    for line in text.splitlines()[1:]:
        parts = line.rsplit(None, 4)
        if len(parts) < 5 or parts[1] != "file":
            continue
        raw = mountinfo.unescape(parts[0])
        got = on_volume(mounts, target, raw)
        if not got:
            continue
        path, deleted = got
        out.append(Consumer(
            id=f"swap:{path}", type="swap", name=path, live=True, paths=(path,),
            evidence=(Evidence("swaps", path, host.proc_path("swaps"), shown_text(line.strip()),
                               deleted),),
            attrs={"size_kb": int(parts[2]), "used_kb": int(parts[3]),
                   "swap_path": raw}))
    return out


def _loop_status(dev: str) -> tuple[int, int] | None:
    """(st_dev, inode) of a loop device's backing file, from LOOP_GET_STATUS64."""
    import fcntl  # only where a loop device's path does not tell: off check's start

    try:
        fd = os.open(dev, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        buf = fcntl.ioctl(fd, LOOP_GET_STATUS64, bytes(_LOOP_INFO64.size))
        vals = _LOOP_INFO64.unpack(buf)
        return vals[0], vals[1]
    except OSError:
        return None
    finally:
        os.close(fd)


def _statuses(devs: list[str], guard: bool) -> dict[str, object]:
    """dev -> (st_dev, inode) of its backing file, None, or ``guarded.NO_ANSWER``. The ioctl
    asks the backing file's filesystem for its attributes (and waits as long as a stopped FUSE
    daemon does not answer); with ``guard`` it runs in a helper with a deadline."""
    if not guard:
        return {d: _loop_status(d) for d in devs}
    import fcntl  # noqa: F401  (imported before the fork: a child must not import)

    return dict(zip(devs, guarded.each(_loop_status, devs)))


def loops(host: Host, target: Target, mounts: tuple[Mount, ...], guard: bool = False
          ) -> tuple[list[Consumer], list[Problem]]:
    """Loop devices whose backing file lies on the volume. ``guard``: a filesystem that may
    not answer (FUSE, NFS) is mounted somewhere; the devices set up in another mount
    namespace are then asked with a deadline, and one whose backing file's filesystem does not
    answer is a warning (it blocks the verdict only when the volume itself is such a
    filesystem: one that answered cannot be the one that does not)."""
    vol_devs = {os.makedev(target.mount.major, target.mount.minor)}
    if host.live:
        vol_devs.add(target.st_dev)
    rows = []
    problems: list[Problem] = []
    for bf in sorted(glob.glob(host.sys_path("block", "loop*", "loop", "backing_file"))):
        name = bf.split(os.sep)[-3]
        text = _table(bf, problems)     # missing: the device was detached meanwhile
        if text is None:
            continue
        text = text.rstrip("\n")
        got = on_volume(mounts, target, text)
        if got or host.live:
            rows.append((f"/dev/{name}", bf, text, got))
    # set up from another mount namespace: the path is theirs; the backing file's st_dev
    # (LOOP_GET_STATUS64) still tells whether it lies on the volume
    idents = _statuses([dev for dev, _, _, got in rows if not got], guard and bool(rows))
    out: list[Consumer] = []
    for dev, bf, text, got in rows:
        if not got:
            ident = idents.get(dev)
            if ident == guarded.NO_ANSWER:
                problems.append(Problem(
                    "unanswered-loop", f"{dev}: the filesystem of its backing file ({text}) "
                    "does not answer; whether it lies on the volume was not asked", dev,
                    blocks_verdict=guarded.may_hang(target.mount.fstype)))
                continue
            if ident is None or ident[0] not in vol_devs:
                continue
            deleted = text.endswith(" (deleted)")
            got = (text[:-len(" (deleted)")] if deleted else text, deleted)
        path, deleted = got
        users = [m.mountpoint for m in mounts if m.source == dev]
        out.append(Consumer(
            id=f"loop-device:{dev}", type="loop-device", name=dev, live=True, paths=(path,),
            evidence=(Evidence("loop", path, bf, shown_text(text), deleted),),
            attrs={"device": dev, "backing_file": path, "mounted_at": users}))
    return out, problems


def _mount_consumer(m: Mount, target: Target, where: str, source: str,
                    extra: dict | None = None) -> Consumer:
    host = fs_to_target(target, m.root) or target.path
    attrs = {"mount_id": m.mount_id, "mountpoint": m.mountpoint, "root": m.root,
             "fstype": m.fstype, "source": m.source, "namespace": where}
    attrs.update(extra or {})
    return Consumer(
        id=f"mount:{m.mount_id}", type="mount", name=m.mountpoint, live=True, paths=(host,),
        evidence=(Evidence("mountinfo", host, source, shown_text(
            f"{m.mount_id} {m.dev} {m.root} {m.mountpoint} {m.fstype} {m.source}")),),
        attrs=attrs)


def mounts_of_volume(host: Host, target: Target,
                     namespaces: Iterable[tuple[str, int]] = (),
                     self_ns: str | None = None, may_hang: set[str] | None = None
                     ) -> tuple[list[Consumer], list[Problem]]:
    """Mounts nested under the target, other mounts of its filesystem in our namespace, and
    mounts of it in every other mount namespace (one pid read per namespace). ``may_hang``:
    the types of the filesystems that may not answer seen in those namespaces are added."""
    out: list[Consumer] = []
    problems: list[Problem] = []
    src = host.proc_path("self", "mountinfo")
    for m in target.nested_mounts:
        c = _mount_consumer(m, target, "host", src, {"nested": True})
        out.append(Consumer(c.id, c.type, c.name, c.live, (m.mountpoint,), c.evidence, c.attrs))
    for m in target.other_mounts:
        out.append(_mount_consumer(m, target, "host", src))
    seen = {c.attrs.mount_id for c in out} | {target.mount.mount_id}
    vol = (target.mount.major, target.mount.minor)
    for ns, pid in namespaces:
        if ns == self_ns:
            continue
        path = host.proc_path(pid, "mountinfo")
        try:
            ms, _bad = mountinfo.parse(_read_text(path))
        except ProcessLookupError:
            continue                # the process ended meanwhile
        except OSError as e:
            p = read_problem(e, path, code="unreadable-mountinfo")
            if p:                   # the host's own init may be unreadable even to root
                problems.append(dataclasses.replace(p, blocks_verdict=pid != 1))
            continue
        for m in ms:
            if may_hang is not None and guarded.may_hang(m.fstype):
                may_hang.add(m.fstype)
            if (m.major, m.minor) != vol or m.mount_id in seen:
                continue
            seen.add(m.mount_id)
            out.append(_mount_consumer(m, target, ns, path, {"pid": pid}))
    return out, problems


def nfs_active(host: Host, target: Target, mounts: tuple[Mount, ...],
               problems: list[Problem] | None = None) -> list[Consumer]:
    """Exports the NFS server is serving now (``/var/lib/nfs/etab``)."""
    etab = host.path("/var/lib/nfs/etab")
    text = _table(etab, problems)
    if text is None:
        return []
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        raw, _, rest = line.partition("\t")
        if not rest:
            raw, _, rest = line.partition(" ")
        path = mountinfo.unescape(raw)
        got = on_volume(mounts, target, path)
        if not got and not (not host.live and path.startswith(target.path)):
            continue
        client = rest.split("(", 1)[0].strip() or "*"
        hp = got[0] if got else path
        out.append(Consumer(
            id=f"nfs-export:etab:{path}:{client}", type="nfs-export", name=f"{client}:{path}",
            live=True, paths=(hp,),
            evidence=(Evidence("etab", hp, f"{etab}:{n}", shown_text(line.strip())),),
            attrs={"client": client, "export": path, "active": True}))
    return out


def collect(host: Host, target: Target, namespaces: Iterable[tuple[str, int]] = (),
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    """Every kernel user of the volume."""
    mounts = host_mounts(host, target)
    self_ns = None
    if host.live:
        try:
            self_ns = os.readlink(host.proc_path("self", "ns", "mnt"))
        except OSError:
            pass
    hang = {m.fstype for m in mounts if guarded.may_hang(m.fstype)}
    ms, problems = mounts_of_volume(host, target, namespaces, self_ns, hang)
    lo, lprob = loops(host, target, mounts, guard=bool(hang) and host.live)
    tables: list[Problem] = []
    out = swaps(host, target, mounts, tables) + lo + ms + nfs_active(host, target, mounts,
                                                                      tables)
    return tuple(out), (*problems, *lprob, *tables)
