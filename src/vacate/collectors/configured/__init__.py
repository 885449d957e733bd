"""Configured users: everything written down somewhere that uses the volume.

``collect`` runs every configured source on the host, then the in-container sources (unit
files, fstab, crontabs) inside each running container seen from the host, read through
``/proc/INIT/root`` with the container's own view of the volume. Each source is a module of this
package with ``collect(host, target, view) -> (consumers, problems)``; one that fails becomes a
Problem that blocks the verdict (unknown is never safe). Standard library only.
"""

from __future__ import annotations

import dataclasses
import importlib

from vacate.collectors.configured.match import VolumeView, container_view, host_view
from vacate.collectors.mounts import read_mounts
from vacate.host import Host
from vacate.model.common import Problem
from vacate.model.mount import Target
from vacate.model.usage import Consumer, ContainerRoot

# Sources read on the host, in report order.
HOST_SOURCES = ("systemd", "fstab", "cron", "envfiles", "lxc", "pve", "docker", "exports", "smb",
                "symlinks")
# Sources read again inside each container, through its root.
CONTAINER_SOURCES = ("systemd", "fstab", "cron")

Result = tuple[tuple[Consumer, ...], tuple[Problem, ...]]


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
        attrs={**c.attrs, "container": {"type": ct.type, "name": ct.name,
                                        "init_pid": ct.init_pid}})


def container_host(host: Host, ct: ContainerRoot) -> Host:
    """The container's trees as seen from the host, through its init's root."""
    return Host.under(host.proc_path(ct.init_pid, "root"), live=False,
                      proc=host.proc_path(ct.init_pid, "root", "proc"))


def _container(host: Host, target: Target, ct: ContainerRoot) -> Result:
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
    for ct in containers:
        cs, ps = _container(host, target, ct)
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
