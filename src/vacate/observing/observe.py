"""Observing: everything that reads the machine about one volume, returned as one
:class:`Observation`.

Runs the inventory (the walk and the recognisers, or a plain listing of the top level with
``scan_tree=False``), the live collectors (processes, kernel users) and the configured-users
collector. Nothing here decides; ``decide/`` takes the observation from here (or from a file
made here earlier, or on another host). Prints nothing.
"""

from __future__ import annotations

import os
import time

from vacate import __version__
from vacate.observing import beat
from vacate.observing.collectors import kernel, mounts, procs
from vacate.observing.collectors.machine import machine_id
from vacate.observing.collectors.special import special_file
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.inventory import Item, ScanResult, Stats
from vacate.observing.model.mount import Target
from vacate.observing.model.observation import HostFacts, Observation


def list_top(target: Target) -> ScanResult:
    """The top-level entries with their own ``lstat`` only (``--no-scan``): no walk."""
    t0 = time.monotonic()
    items = []
    warnings = []
    try:
        with os.scandir(target.path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as e:
        entries = []
        warnings.append(Problem("unreadable-dir", f"{target.path}: {e.strerror}", target.path))
    nested = {m.mountpoint for m in target.nested_mounts}
    for e in entries:
        if e.path in nested:
            continue        # a mount below: not the volume's (and a dead one would hang stat)
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        is_dir = e.is_dir(follow_symlinks=False)
        stats = Stats(st.st_size, st.st_blocks * 512, 0 if is_dir else 1, 1 if is_dir else 0,
                      st.st_mtime, st.st_atime)
        items.append(Item("item:" + e.name, e.path, None, is_dir, stats,
                          None if is_dir else special_file(e.path)))
    return ScanResult(target, Stats(), tuple(items), (), (), tuple(warnings),
                      time.monotonic() - t0)


def host_facts(host: Host) -> HostFacts:
    """Who is looking, and when."""
    def read(path: str) -> str:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read(256).strip()
        except OSError:
            return ""

    return HostFacts(hostname=read(host.proc_path("sys", "kernel", "hostname")),
                     kernel=read(host.proc_path("sys", "kernel", "osrelease")),
                     boot_id=read(host.proc_path("sys", "kernel", "random", "boot_id")),
                     observed_at=time.time(), vacate_version=__version__,
                     machine_id=machine_id(host))


def unique(consumers) -> tuple:
    """One consumer per id, the first seen (a kernel mount may be found twice, a config
    twice)."""
    return tuple({c.id: c for c in consumers}.values())


def observe(path: str, *, host: Host | None = None, scan_tree: bool = True,
            users: bool = True, configured: bool = True, nvml=None, early=None,
            **scan_args) -> Observation:
    """Look at the volume holding ``path``. ``users=False``: the inventory only (what a scan
    is); ``configured=False``: live users only. ``early``: a
    :class:`vacate.observing.collectors.procs_probe.Early` the CLI started (or None). ``scan_args``
    go to :func:`vacate.observing.scan.scan`."""
    host = host or Host.local()
    t0 = time.monotonic()
    facts = host_facts(host)
    try:
        target = mounts.resolve_target(path, host)
    except BaseException:
        if early is not None:
            early.close()
        raise
    consumers: tuple = ()
    problems: tuple = ()
    containers: tuple = ()
    if users:
        beat.doing("reading /proc")
        live = procs.collect(host, target, nvml=nvml, early=early)
        beat.doing("reading the kernel's users")
        kcons, kprob = kernel.collect(host, target, live.namespaces)
        ccons, cprob = (), ()
        if configured:
            from vacate.observing.collectors.configured import collect

            beat.doing("reading configuration")
            ccons, cprob = collect(host, target, containers=live.containers)
        consumers = unique(live.consumers + kcons + tuple(ccons))
        problems = live.problems + kprob + tuple(cprob)
        containers = live.containers
    if scan_tree:
        from vacate.observing.scan import scan

        beat.doing(f"walking {path}")
        inv = scan(path, host=host, **scan_args)
    else:
        inv = list_top(target)
    return Observation(target=target, inventory=inv, scanned=scan_tree, users=users,
                       configured=configured and users, consumers=consumers,
                       problems=problems, containers=containers, host=facts,
                       elapsed_s=time.monotonic() - t0)
