"""LXC containers whose config uses the volume: ``lxc.rootfs.path`` on it (dir, overlay, loop
image, btrfs, ZFS dataset), ``lxc.mount.entry`` and ``lxc.mount.fstab`` entries binding or
mounting it (a relative mount point lies under the rootfs), other keys naming paths on it
(hooks, log files), through ``lxc.include`` chains. Configs: ``LXCPATH/*/config`` (LXCPATH from
``/etc/lxc/lxc.conf``, default ``/var/lib/lxc``) and ``/etc/lxc/default.conf``. Running state
from ``lxc-info`` where LXC is installed, else from the container's cgroup.
Standard library only.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import subprocess
from dataclasses import dataclass, field

from vacate.observing.collectors.configured.blockdev import VolumeDevice
from vacate.observing.collectors.configured.cfgfiles import (
    line_evidence,
    line_sha256,
    list_dir,
    read_text,
    spelled,
)
from vacate.observing.collectors.configured.fstab import entry_uses
from vacate.observing.collectors.configured.match import VolumeView
from vacate.observing.collectors.configured.resolve import on_volume
from vacate.observing.compat import SLOTS
from vacate.observing.fsio import read_bounded, read_problem
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer, Evidence
from vacate.observing.parsers import fstab as fstab_parser
from vacate.observing.parsers import lxc_config

DEFAULT_LXCPATH = "/var/lib/lxc"
MAX_INCLUDE_DEPTH = 8
# keys whose values are not host paths (container paths, settings) or are handled on their own
_SKIP_GENERIC = ("lxc.rootfs.path", "lxc.mount.entry", "lxc.mount.fstab", "lxc.include",
                 "lxc.idmap", "lxc.cgroup", "lxc.net", "lxc.uts.name", "lxc.arch", "lxc.cap",
                 "lxc.apparmor", "lxc.seccomp", "lxc.tty", "lxc.environment", "lxc.signal",
                 "lxc.prlimit", "lxc.sysctl", "lxc.start", "lxc.group", "lxc.mount.auto",
                 "lxc.init", "lxc.execute", "lxc.rootfs.mount", "lxc.rootfs.options")


@dataclass
class Finding:
    """What one container config says about the volume (built up while reading)."""

    relations: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    autostart: bool = False      # lxc.start.auto = 1: started with the host
    # the lxc.mount.entry lines that use it: {"file", "line", "line_sha256"} (what an edit
    # that comments one out checks the file against)
    mount_entries: list[dict] = field(default_factory=list)

    def add(self, relation: str, path: str | None, ev: Evidence) -> None:
        self.relations.append(relation)
        if path:
            self.paths.append(path)
        self.evidence.append(ev)

    def __bool__(self) -> bool:
        return bool(self.evidence)


@dataclass(frozen=True, **SLOTS)
class Scope:
    """What every line is judged against."""

    host: Host
    view: VolumeView
    dev: VolumeDevice
    volume_path: str


def rootfs_uses(scope: Scope, value: str) -> list[tuple[str, str]]:
    """How an ``lxc.rootfs.path`` value uses the volume: (host path, note)."""
    rf = lxc_config.parse_rootfs(value)
    out: list[tuple[str, str]] = []
    for p in rf.paths:
        h = on_volume(scope.host, scope.view, p)
        if h is not None:
            out.append((h, f"{rf.backend} rootfs on the volume"))
        elif scope.dev.matches(scope.host, p):
            out.append((scope.volume_path, f"{rf.backend} rootfs is the volume's device"))
    ds = scope.dev.zfs_dataset
    if rf.dataset and ds and (rf.dataset == ds or rf.dataset.startswith(ds + "/")):
        out.append((scope.volume_path, f"rootfs is the ZFS dataset {rf.dataset}"))
    return out


def fstab_line_uses(scope: Scope, found: Finding, entry: fstab_parser.FstabEntry, source: str,
                    line: int, raw: str, rootfs: str | None) -> None:
    rootfs_on_volume = on_volume(scope.host, scope.view, rootfs) is not None
    for rel, path, note in entry_uses(entry, scope.host, scope.view, scope.dev,
                                      scope.volume_path, target_rel=rootfs):
        if rel == "mountpoint-on-volume" and rootfs_on_volume and \
                not entry.target.startswith("/"):
            continue   # every mount point of a rootfs on the volume is: the rootfs says it
        found.add(rel, path, line_evidence("config-line", path, source, line, raw, note))


def mount_entry_uses(scope: Scope, found: Finding, problems: list[Problem], where: str,
                     line: int, value: str, raw: str, rootfs: str | None) -> None:
    """One ``lxc.mount.entry`` value (fstab format)."""
    try:
        entry = fstab_parser.parse_line(value, line)
    except ValueError as e:
        problems.append(Problem("malformed-config", str(e), f"{where}:{line}"))
        return
    if entry is not None:
        before = len(found.evidence)
        fstab_line_uses(scope, found, entry, where, line, raw, rootfs)
        if len(found.evidence) > before:
            found.mount_entries.append({"file": where, "line": line,
                                        "line_sha256": line_sha256(raw)})


def read_config(scope: Scope, local: str, found: Finding, problems: list[Problem],
                rootfs: str | None, depth: int = 0, seen: set[str] | None = None) -> str | None:
    """Read one config file (and what it includes) into ``found``; returns the rootfs path
    it sets (the last ``lxc.rootfs.path`` wins, as in LXC)."""
    seen = seen if seen is not None else set()
    if local in seen or depth > MAX_INCLUDE_DEPTH:
        return rootfs
    seen.add(local)
    host = scope.host
    text, prob = read_text(host, local)
    if prob:
        problems.append(prob)
    if text is None:
        return rootfs
    where = spelled(host, local)
    lines, probs = lxc_config.parse(text, where)
    problems.extend(probs)
    # the rootfs first: relative mount points in this file lie under it
    for ln in lines:
        if ln.key == "lxc.rootfs.path" and ln.value:
            rf_paths = lxc_config.parse_rootfs(ln.value).paths
            rootfs = rf_paths[-1] if rf_paths else rootfs
            for path, note in rootfs_uses(scope, ln.value):
                found.add("rootfs", path, line_evidence("config-line", path, where, ln.line,
                                                        ln.raw, note))
    for ln in lines:
        if ln.key == "lxc.start.auto":
            found.autostart = ln.value.strip() == "1"
        elif ln.key == "lxc.include":
            inc = host.path(ln.value)
            if os.path.isdir(inc):
                files, p = list_dir(host, inc, ".conf")
                if p:
                    problems.append(p)
            else:
                files = [inc]
            for f in files:
                rootfs = read_config(scope, f, found, problems, rootfs, depth + 1, seen)
            h = on_volume(host, scope.view, ln.value)
            if h is not None:
                found.add("include", h, line_evidence("config-line", h, where, ln.line, ln.raw,
                                                      "includes a file on the volume"))
        elif ln.key == "lxc.mount.entry":
            mount_entry_uses(scope, found, problems, where, ln.line, ln.value, ln.raw, rootfs)
        elif ln.key == "lxc.mount.fstab":
            fpath = ln.value if ln.value.startswith("/") else \
                posixpath.join(posixpath.dirname(where), ln.value)
            h = on_volume(host, scope.view, fpath)
            if h is not None:
                found.add("mount-fstab", h, line_evidence("config-line", h, where, ln.line,
                                                          ln.raw, "mount fstab on the volume"))
            ftext, p = read_text(host, host.path(fpath))
            if p:
                problems.append(p)
            if ftext:
                entries, probs = fstab_parser.parse(ftext, fpath)
                problems.extend(probs)
                for e in entries:
                    fstab_line_uses(scope, found, e, fpath, e.line, e.raw, rootfs)
        elif not ln.key.startswith(_SKIP_GENERIC):
            for tok, h in scope.view.paths_in_text(ln.value):
                found.add("config-path", h, line_evidence(
                    "config-line", h, where, ln.line, ln.raw, f"{ln.key} names {tok}"))
    return rootfs


def lxcpaths(host: Host, problems: list[Problem]) -> list[str]:
    """LXC's container directories: ``lxc.lxcpath`` from ``/etc/lxc/lxc.conf``, or the default."""
    text, p = read_text(host, host.etc_path("lxc", "lxc.conf"))
    if p:
        problems.append(p)
    paths = []
    if text:
        lines, _ = lxc_config.parse(text)
        paths = [ln.value for ln in lines if ln.key == "lxc.lxcpath" and ln.value]
    return paths or [DEFAULT_LXCPATH]


def _cgroup_running(host: Host, name: str) -> bool | None:
    """Whether a cgroup of the container holds processes (LXC 4+: ``lxc.payload.NAME``,
    older and Proxmox: ``lxc/NAME``), in the unified or any v1 hierarchy; None (unknown)
    when a cgroup that exists could not be read and none that could holds processes."""
    base = host.sys_path("fs", "cgroup")
    candidates = [os.path.join(base, "lxc.payload." + name), os.path.join(base, "lxc", name)]
    try:
        for h in os.listdir(base):
            candidates += [os.path.join(base, h, "lxc.payload." + name),
                           os.path.join(base, h, "lxc", name)]
    except OSError:
        return None
    unread = False
    for c in candidates:
        try:
            data, _more = read_bounded(os.path.join(c, "cgroup.procs"), 1 << 16)
        except OSError as e:
            unread = unread or read_problem(e, c) is not None
            continue
        if data.strip():
            return True
    return None if unread else False


def running_state(host: Host, name: str, lxcpath: str) -> tuple[bool | None, int | None, str]:
    """(running, init pid, how it was learnt)."""
    exe = shutil.which("lxc-info") if host.root == "/" else None
    if exe:
        try:
            r = subprocess.run([exe, "-P", lxcpath, "-n", name, "-s", "-p"], capture_output=True,
                               text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            r = None
        if r is not None and r.returncode == 0:
            state = pid = None
            for line in r.stdout.splitlines():
                k, _, v = line.partition(":")
                if k.strip() == "State":
                    state = v.strip()
                elif k.strip() == "PID" and v.strip().isdigit():
                    pid = int(v.strip())
            if state:
                return state == "RUNNING", pid, f"lxc-info: {state}"
    running = _cgroup_running(host, name)
    return running, None, "cgroup" if running is not None else "unknown"


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    scope = Scope(host, view, VolumeDevice.of(target), target.path)
    consumers: list[Consumer] = []
    problems: list[Problem] = []
    for lxcpath in lxcpaths(host, problems):
        dirs, p = list_dir(host, host.path(lxcpath))
        if p:
            problems.append(p)
        for d in dirs:
            cfg = os.path.join(d, "config")
            if not os.path.lexists(cfg) or os.path.isdir(cfg):
                continue      # not a container (a config that is not a file is a problem)
            name = os.path.basename(d)
            found = Finding()
            read_config(scope, cfg, found, problems, rootfs=posixpath.join(lxcpath, name,
                                                                           "rootfs"))
            h = on_volume(host, view, posixpath.join(lxcpath, name))
            if h is not None:
                found.add("container-dir", h, Evidence("config-line", h, spelled(host, cfg),
                                                       "the container's directory is on it"))
            if not found:
                continue
            running, pid, how = running_state(host, name, lxcpath)
            attrs = {"config": spelled(host, cfg), "lxcpath": lxcpath, "running": running,
                     "state_from": how, "autostart": found.autostart,
                     "relations": list(dict.fromkeys(found.relations)),
                     "mount_entries": found.mount_entries}
            if pid:
                attrs["pid"] = pid
            consumers.append(Consumer(f"lxc-container:{name}", "lxc-container", name, False,
                                      tuple(dict.fromkeys(found.paths)), tuple(found.evidence),
                                      attrs))
    # defaults copied into every new container
    default = host.etc_path("lxc", "default.conf")
    found = Finding()
    read_config(scope, default, found, problems, rootfs=None)
    if found:
        where = spelled(host, default)
        consumers.append(Consumer(f"config-file:{where}", "config-file", where, False,
                                  tuple(dict.fromkeys(found.paths)), tuple(found.evidence),
                                  {"relations": list(dict.fromkeys(found.relations)),
                                   "note": "LXC defaults: new containers would use the volume"}))
    return tuple(consumers), tuple(problems)
