"""Where a path written in a config really leads: symlinks followed inside the host's root
(``/var/lib/docker -> /data/docker``), stopping as soon as the path reaches the volume, so
nothing on the volume is ever read. Standard library only.
"""

from __future__ import annotations

import os
import posixpath
import stat

from vacate.observing.collectors.configured.match import VolumeView
from vacate.observing.host import Host
from vacate.observing.parsers.paths import MAX_HOPS, follow_links


class Resolver:
    """:func:`resolve` for many paths in a row (the symlink search resolves every link it
    meets): what each path component is (not a link, a link and its text, missing) is read
    once, and a component is looked up on the volume only when its name could lie there."""

    __slots__ = ("_kind", "_near", "host", "view")

    def __init__(self, host: Host, view: VolumeView):
        self.host, self.view = host, view
        self._kind: dict[str, str | bool | None] = {}
        # a normalised path can be on the volume only if it is, or is below, a prefix
        self._near = tuple((pre, pre.rstrip("/") + "/") for pre, _h in view.prefixes)

    def by_name(self, path: str) -> str | None:
        """``view.to_host`` of a normalised path, answered without work for most paths."""
        for pre, below in self._near:
            if path == pre or path.startswith(below):
                return self.view.to_host(path)
        return None

    def _what(self, path: str) -> str | bool | None:
        """False: not a link; None: missing (or unreadable); "": a link that cannot be read;
        else the link's text."""
        try:
            return self._kind[path]
        except KeyError:
            pass
        local = self.host.path(path)
        try:
            st = os.lstat(local)
        except OSError:
            got: str | bool | None = None
        else:
            got = False
            if stat.S_ISLNK(st.st_mode):
                try:
                    got = os.readlink(local)
                except OSError:
                    got = ""
        self._kind[path] = got
        return got

    def resolve(self, path: str) -> tuple[str, str | None]:
        """Resolve ``path`` (host spelling) by following links inside the host; stops as
        soon as it reaches the volume. Returns (resolved path, host path on the volume or
        None)."""
        to_host = self.view.to_host
        how, at, rest = follow_links(path, self._what, lambda p: self.by_name(p) is not None,
                                     MAX_HOPS)
        if how == "stopped":                    # on the volume by name: what is left, as is
            full = posixpath.join(at, *rest) if rest else at
            return full, to_host(full)
        if how == "missing":                    # dangling: judged by name
            full = posixpath.normpath(posixpath.join(at, *rest)) if rest else at
            return full, to_host(full)
        if how != "resolved":                   # a loop, or a link that cannot be read
            return at, None
        return at, to_host(at)


def resolve(host: Host, view: VolumeView, path: str) -> tuple[str, str | None]:
    """Resolve ``path`` (host spelling) by following links inside ``host``; stops as soon as
    it reaches the volume. Returns (resolved path, host path on the volume or None)."""
    return Resolver(host, view).resolve(path)


def on_volume(host: Host, view: VolumeView, path: str | None) -> str | None:
    """The host path on the volume that ``path`` (as ``host`` spells it) leads to, or None:
    by name first, else through the symlinks on the way."""
    if not path or not path.startswith("/"):
        return None
    h = view.to_host(path)
    if h is not None:
        return h
    return resolve(host, view, path)[1]
