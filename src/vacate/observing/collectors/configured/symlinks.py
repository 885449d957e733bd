"""Symlinks elsewhere that point into the volume: a bounded search (depth and entry limits,
symlinks never followed, never descending into the volume, network filesystems or automount
points) of ``/etc``, ``/opt``, ``/srv``, ``/usr/local``, ``/root`` and home directories for
links whose target resolves into the volume, relative targets and chains of links included.
Standard library only.
"""

from __future__ import annotations

import os
import posixpath
import stat

from vacate.observing.collectors.configured.cfgfiles import list_dir, read_text
from vacate.observing.collectors.configured.match import VolumeView
from vacate.observing.collectors.configured.resolve import Resolver
from vacate.observing.collectors.guarded import may_hang
from vacate.observing.collectors.mounts import read_mounts
from vacate.observing.fsio import read_problem
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer, Evidence
from vacate.observing.parsers import passwd
from vacate.observing.parsers.redact import shown_text

ROOTS = ("/etc", "/opt", "/srv", "/usr/local", "/root")
MAX_DEPTH = 8          # directory levels below each root
MAX_ENTRIES = 200_000  # directory entries looked at, all roots together
# never walked: network filesystems (slow, may hang), every FUSE filesystem (a stopped daemon
# hangs whatever touches it, even a stat of its mountpoint) and automount points (a walk
# mounts them). Tested against their mountpoints before anything there is stat'ed.
SKIP_FSTYPES = frozenset({"autofs", "proc", "sysfs"})     # and whatever guarded.may_hang says

# directories that only tools write, never links a person made: not walked
SKIP_NAMES = frozenset({"__pycache__", ".git"})


def skipped_mountpoints(host: Host) -> frozenset[str]:
    """Mount points (host spelling) of filesystems the search never enters."""
    try:
        mounts, _bad = read_mounts(host)
    except OSError:
        return frozenset()
    return frozenset(m.mountpoint for m in mounts
                     if m.fstype in SKIP_FSTYPES or may_hang(m.fstype))


def home_dirs(host: Host, problems: list[Problem]) -> list[str]:
    """Home directories of users: ``/home/*`` and those in ``/etc/passwd`` of real users."""
    text, p = read_text(host, host.etc_path("passwd"))
    if p:
        problems.append(p)
    homes = [posixpath.normpath(u.home) for u in passwd.parse(text or "")
             if (u.uid >= 1000 or u.home.startswith("/home/")) and u.home.startswith("/")
             and u.home != "/" and u.uid != passwd.NOBODY]
    names, p = list_dir(host, host.path("/home"))
    if p:
        problems.append(p)
    homes += ["/home/" + os.path.basename(n) for n in names]
    return list(dict.fromkeys(homes))


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    consumers: list[Consumer] = []
    problems: list[Problem] = []
    vol_devs = {target.st_dev, os.makedev(target.mount.major, target.mount.minor)}
    budget = MAX_ENTRIES
    truncated: list[str] = []
    seen_dirs: set[tuple[int, int]] = set()
    skip = skipped_mountpoints(host)
    links = Resolver(host, view)
    for root in list(dict.fromkeys((*ROOTS, *home_dirs(host, problems)))):
        if view.to_host(root) is not None or root in skip:
            continue        # the root itself is on the volume (or a FUSE/network mount)
        try:
            st = os.lstat(host.path(root))
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):    # /opt -> /data/opt: the root itself is the link
            c = _link(links, root, host.path(root))
            if c is not None:
                consumers.append(c)
            continue
        if st.st_dev in vol_devs:
            continue
        stack = [(root, 0)]
        while stack:
            d, depth = stack.pop()
            try:
                it = os.scandir(host.path(d))
            except OSError as e:      # gone, or not a directory: nothing; else unknown
                p = read_problem(e, d, code="unreadable-dir")
                if p:
                    problems.append(p)
                continue
            with it:
                entries = list(it)
            budget -= len(entries)
            if budget < 0:
                truncated.append(d)
                break
            prefix = d.rstrip("/") + "/"
            found, subdirs = _kinds(entries)
            for entry in found:
                c = _link(links, prefix + entry.name, entry.path)
                if c is not None:
                    consumers.append(c)
            if depth >= MAX_DEPTH:
                continue
            for entry in subdirs:
                spelled = prefix + entry.name
                if entry.name in SKIP_NAMES or spelled in skip:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                key = (st.st_dev, st.st_ino)
                if st.st_dev in vol_devs or key in seen_dirs or \
                        links.by_name(spelled) is not None:
                    continue
                seen_dirs.add(key)
                stack.append((spelled, depth + 1))
        if budget < 0:
            break
    if truncated:
        problems.append(Problem(
            "search-truncated", f"symlink search stopped after {MAX_ENTRIES} entries "
            f"(at {truncated[0]}); links further on were not looked at", truncated[0]))
    return tuple(consumers), tuple(problems)


def _kinds(entries: list[os.DirEntry]) -> tuple[list[os.DirEntry], list[os.DirEntry]]:
    """(the links, the directories) among ``entries``, by the type readdir gave (an entry
    whose type needs an lstat that fails is neither)."""
    found, subdirs = [], []
    for e in entries:
        try:
            if e.is_symlink():
                found.append(e)
            elif e.is_dir(follow_symlinks=False):
                subdirs.append(e)
        except OSError:
            pass
    return found, subdirs


def _link(links: Resolver, spelled: str, local: str) -> Consumer | None:
    try:
        raw = os.readlink(local)
    except OSError:
        return None
    start = raw if raw.startswith("/") else posixpath.join(posixpath.dirname(spelled), raw)
    resolved, on = links.resolve(start)
    if on is None:
        return None
    exists = os.path.lexists(on)
    return Consumer(
        f"symlink:{spelled}", "symlink", spelled, False, (on,),
        (Evidence("symlink", on, spelled, shown_text(f"{spelled} -> {raw}")),),
        {"target": raw, "resolved": resolved, "dangling": not exists})
