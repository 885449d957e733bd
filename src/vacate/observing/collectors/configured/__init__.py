"""Configured users: everything written down somewhere that uses the volume.

``collect`` runs every configured source on the host, then the in-container sources (unit
files, fstab, crontabs) inside each running container seen from the host, read through
``/proc/INIT/root`` with the container's own view of the volume; what a container shares with
the host (the very same file, a root filesystem in common) is reported once, as the host's.
Each source is a module of this package with ``collect(host, target, view) -> (consumers,
problems)``; one that fails becomes a Problem that blocks the verdict (unknown is never safe).
Standard library only.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Tuple

from vacate.observing.collectors.configured.match import VolumeView, container_view, host_view
from vacate.observing.collectors.mounts import read_mounts
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer, ContainerRoot

# Sources read on the host, in report order.
HOST_SOURCES = ("systemd", "fstab", "cron", "envfiles", "lxc", "pve", "docker", "exports", "smb",
                "symlinks")
# Sources read again inside each container, through its root.
CONTAINER_SOURCES = ("systemd", "fstab", "cron")

Result = Tuple[Tuple[Consumer, ...], Tuple[Problem, ...]]    # (typing: a run-time alias on 3.8)


def run_source(name: str, host: Host, target: Target, view: VolumeView) -> Result:
    """One source; whatever it raises becomes a Problem that blocks the verdict."""
    try:
        mod = importlib.import_module(f"{__name__}.{name}")
        consumers, problems = mod.collect(host, target, view)
        return tuple(consumers), tuple(problems)
    except Exception as e:  # noqa: BLE001 - a failing source must not hide the others
        where = "" if view.where == "host" else f" in {view.where}"
        return (), (Problem("source-failed",
                            f"configured source {name!r}{where} failed: "
                            f"{type(e).__name__}: {e}", blocks_verdict=True),)


def in_container(c: Consumer, ct: ContainerRoot) -> Consumer:
    """A consumer found inside a container: its id names the container (``TYPE:NAME``) and its
    ``container`` attr is the same object process consumers carry (``{"type", "name", ...}``)."""
    kind, _, rest = c.id.partition(":")
    return dataclasses.replace(
        c, id=f"{kind}:{ct.type}:{ct.name}:{rest}",
        attrs=c.attrs.updated(container={"type": ct.type, "name": ct.name,
                                         "init_pid": ct.init_pid}))


def container_host(host: Host, ct: ContainerRoot) -> Host:
    """The container's trees as seen from the host, through its init's root."""
    return Host.under(host.proc_path(ct.init_pid, "root"), live=False,
                      proc=host.proc_path(ct.init_pid, "root", "proc"))


def _evidence_file(source: str) -> str | None:
    """The file an evidence's ``source`` names (``PATH:LINE`` or ``PATH``), or None."""
    path, sep, line = source.rpartition(":")
    if not (sep and line.isdigit()):
        path = source
    return path if path.startswith("/") else None


def _same_file(host: Host, chost: Host, path: str) -> bool:
    """``path`` inside the container (its links resolved inside its root) is the very file
    the host has at ``path``: a container that shares the host's root filesystem."""
    from vacate.observing.collectors.configured.systemd import local

    try:
        mine, theirs = os.stat(host.path(path)), os.stat(local(chost, path))
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def _host_copy(host: Host, chost: Host, c: Consumer, on_host: dict[str, Consumer]) -> bool:
    """``c``, found inside a container, is what the host sources already report: the host has
    a consumer of the same id, and every file ``c``'s evidence names is the host's very file
    at that path (a unit also in the same state: another manager may run the same file)."""
    h = on_host.get(c.id)
    files = {_evidence_file(e.source) for e in c.evidence}
    if h is None or not files or None in files:
        return False
    if c.type == "systemd-unit" and (c.attrs.enabled, c.attrs.active) != (
            h.attrs.enabled, h.attrs.active):
        return False
    return all(_same_file(host, chost, f) for f in files)


def _container(host: Host, target: Target, ct: ContainerRoot,
               on_host: dict[str, Consumer] | None = None) -> Result:
    """The container sources inside ``ct``; ``on_host``: the host's consumers by id, so that a
    file the container shares with the host is reported once, as the host's."""
    where = f"{ct.type}:{ct.name}"
    try:
        cmounts, _bad = read_mounts(host, ct.init_pid)
    except OSError as e:
        return (), (Problem("container-unreadable",
                            f"cannot read the mounts of {where} (pid {ct.init_pid}): {e}",
                            path=host.proc_path(ct.init_pid, "mountinfo"), blocks_verdict=True),)
    view = container_view(where, target, cmounts, pid=ct.init_pid)
    chost = container_host(host, ct)
    consumers: list[Consumer] = []
    problems: list[Problem] = []
    for name in CONTAINER_SOURCES:
        cs, ps = run_source(name, chost, target, view)
        consumers.extend(in_container(c, ct) for c in cs
                         if not _host_copy(host, chost, c, on_host or {}))
        problems.extend(ps)
    return tuple(consumers), tuple(problems)


def in_stopped_container(host: Host, target: Target, name: str, root: str,
                         prefixes: tuple[tuple[str, str], ...]) -> Result:
    """The container sources of a stopped Proxmox container, read from its root filesystem
    at ``root`` (a path here), the volume spelled inside it as ``prefixes`` (container
    path, host path) say."""
    ct = ContainerRoot("pve", name, 0)
    view = VolumeView(f"pve:{name}", prefixes)
    chost = Host.under(root, live=False)
    consumers: list[Consumer] = []
    problems: list[Problem] = []
    for source in CONTAINER_SOURCES:
        cs, ps = run_source(source, chost, target, view)
        consumers.extend(in_container(c, ct) for c in cs)
        problems.extend(ps)
    return tuple(consumers), tuple(problems)


def collect(host: Host, target: Target, *,
            containers: tuple[ContainerRoot, ...] = ()) -> Result:
    """Every configured user of the volume, on the host and inside each running container."""
    mounts: tuple = ()
    problems: list[Problem] = []
    try:
        mounts, _bad = read_mounts(host)
    except OSError as e:
        problems.append(Problem("mountinfo-unreadable", f"cannot read mountinfo: {e}"))
    view = host_view(target, tuple(mounts))
    consumers: list[Consumer] = []
    for name in HOST_SOURCES:
        cs, ps = run_source(name, host, target, view)
        consumers.extend(cs)
        problems.extend(ps)
    on_host = {c.id: c for c in consumers}
    for ct in containers:
        cs, ps = _container(host, target, ct, on_host)
        consumers.extend(cs)
        problems.extend(ps)
    seen: set[str] = set()
    unique = []
    for c in consumers:
        if c.id not in seen:
            seen.add(c.id)
            unique.append(c)
    # a file two sources read (an EnvironmentFile= in /etc/default) is one problem
    return tuple(unique), tuple(dict.fromkeys(problems))
