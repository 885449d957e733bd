"""Where a path written in a config really leads: symlinks followed inside the host's root
(``/var/lib/docker -> /data/docker``), stopping as soon as the path reaches the volume, so
nothing on the volume is ever read. Standard library only.
"""

from __future__ import annotations

import os
import posixpath
import stat

from vacate.collectors.configured.match import VolumeView
from vacate.host import Host

MAX_HOPS = 40          # links followed while resolving one path (as the kernel's ELOOP)


def resolve(host: Host, view: VolumeView, path: str) -> tuple[str, str | None]:
    """Resolve ``path`` (host spelling) by following links inside ``host``; stops as soon as
    it reaches the volume. Returns (resolved path, host path on the volume or None)."""
    parts = [p for p in path.split("/") if p]
    cur = "/"
    hops = 0
    while parts:
        comp = parts.pop(0)
        if comp == ".":
            continue
        if comp == "..":
            cur = posixpath.dirname(cur)
            continue
        nxt = posixpath.join(cur, comp)
        on = view.to_host(nxt)
        if on is not None:
            rest = posixpath.join(nxt, *parts) if parts else nxt
            return rest, view.to_host(rest)
        try:
            st = os.lstat(host.path(nxt))
        except OSError:
            rest = posixpath.normpath(posixpath.join(nxt, *parts)) if parts else nxt
            return rest, view.to_host(rest)   # dangling: judged by name
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > MAX_HOPS:
                return nxt, None
            try:
                dest = os.readlink(host.path(nxt))
            except OSError:
                return nxt, None
            parts = [p for p in dest.split("/") if p] + parts
            if dest.startswith("/"):
                cur = "/"
            continue
        cur = nxt
    return cur, view.to_host(cur)


def on_volume(host: Host, view: VolumeView, path: str | None) -> str | None:
    """The host path on the volume that ``path`` (as ``host`` spells it) leads to, or None:
    by name first, else through the symlinks on the way."""
    if not path or not path.startswith("/"):
        return None
    h = view.to_host(path)
    if h is not None:
        return h
    return resolve(host, view, path)[1]
