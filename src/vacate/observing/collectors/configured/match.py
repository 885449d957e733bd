"""Does a path written somewhere (a unit file, a container config, a crontab) lie on the volume?

A :class:`VolumeView` says how paths on the volume are spelled in one place: on the host (the
target path itself, plus every other mount of the same filesystem, e.g. bind mounts) or inside a
container (from the container's own mountinfo). ``to_host`` maps a path spelled there to the
host path on the volume, or None. ``paths_in_text`` finds such paths inside free text
(``--model-path=/data/models/x``, ``PATH=/usr/bin:/data/bin``). Standard library only.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from vacate.observing.collectors.mounts import is_under as _under
from vacate.observing.compat import SLOTS
from vacate.observing.model.mount import Mount, Target

# Characters that end a path token inside free text.
_END = re.compile(r"""[\s"'`,;:=|<>()\[\]{}]""")


def _rebase(path: str, old: str, new: str) -> str:
    if path == old:
        return new
    rest = path[len(old):] if old != "/" else path
    return posixpath.normpath(new.rstrip("/") + "/" + rest.lstrip("/")) if new != "/" else \
        posixpath.normpath("/" + rest.lstrip("/"))


@dataclass(frozen=True, **SLOTS)
class VolumeView:
    """The volume as one place (the host, a container) spells it."""
    where: str                                   # "host", "lxc:129", "docker:web", ...
    prefixes: tuple[tuple[str, str], ...]        # (prefix as spelled there, host path)
    pid: int | None = None                       # a container's init pid (host pid namespace)
    # mount points (as spelled there) of other filesystems below the volume: what lies
    # strictly below one (/dev/null when the volume is /) is not on the volume
    beyond: tuple[str, ...] = ()

    @property
    def in_container(self) -> bool:
        return self.where != "host"

    def to_host(self, path: str) -> str | None:
        if not path or not path.startswith("/"):
            return None
        p = posixpath.normpath(path)
        if p.startswith("//"):
            p = "/" + p.lstrip("/")
        best: tuple[str, str] | None = None
        for pre, host in self.prefixes:
            if _under(p, pre) and (best is None or len(pre) > len(best[0])):
                best = (pre, host)
        if best is None:
            return None
        if any(p != b and _under(p, b) for b in self.beyond):
            return None
        return _rebase(p, best[0], best[1])

    def paths_in_text(self, text: str) -> list[tuple[str, str]]:
        """Every (spelling, host path) of a path on the volume that occurs in ``text``."""
        found: list[tuple[str, str]] = []
        seen: set[str] = set()
        for pre, _host in self.prefixes:
            start = 0
            while True:
                i = text.find(pre, start)
                if i < 0:
                    break
                start = i + 1
                if i > 0 and text[i - 1] not in " \t\"'=:,;([{<>|\n":
                    continue   # the prefix is the tail of a longer word (/mydata, the
                    # /null of /dev/null)
                m = _END.search(text, i + 1)
                tok = text[i:m.start() if m else len(text)]
                if pre != "/" and tok != pre and not tok.startswith(pre.rstrip("/") + "/"):
                    continue   # /data matched inside /database
                host = self.to_host(tok)
                if host is not None and tok not in seen:
                    seen.add(tok)
                    found.append((tok, host))
        return found


def fs_path(m: Mount, path: str) -> str | None:
    """The path inside the filesystem of a path below mount ``m``."""
    if not _under(path, m.mountpoint):
        return None
    return _rebase(path, m.mountpoint, m.root)


def _view_from_mounts(where: str, target: Target, mounts: tuple[Mount, ...],
                      own: tuple[tuple[str, str], ...] = ()) -> VolumeView:
    """Prefixes for every mount of the target's filesystem among ``mounts``, each mapped to the
    host path of the same file (via the mount's root field)."""
    t = target.mount
    tgt_fs = fs_path(t, target.path)   # the target's path inside the filesystem
    prefixes = list(own)
    for m in mounts:
        if (m.major, m.minor) != (t.major, t.minor) or m.deleted:
            continue
        # a file at fs path F shows at m.mountpoint + F - m.root; on the host at
        # target.path + F - tgt_fs. Map the overlap of the two subtrees.
        if tgt_fs is None:
            continue
        if _under(m.root, tgt_fs):
            host = _rebase(m.root, tgt_fs, target.path)
            prefixes.append((m.mountpoint, host))
        elif _under(tgt_fs, m.root):
            spelled = _rebase(tgt_fs, m.root, m.mountpoint)
            prefixes.append((spelled, target.path))
    # de-duplicate, keep order
    uniq = tuple(dict.fromkeys(prefixes))
    return VolumeView(where, uniq)


def host_view(target: Target, mounts: tuple[Mount, ...] = ()) -> VolumeView:
    """How the host spells the volume: the target path, and the same files through every other
    mount of its filesystem in the host's mountinfo (``mounts``; defaults to the target's own
    list of other mounts)."""
    mounts = mounts or (target.mount, *target.other_mounts)
    v = _view_from_mounts("host", target, mounts, own=((target.path, target.path),))
    t = target.mount
    beyond = tuple(m.mountpoint for m in target.nested_mounts
                   if (m.major, m.minor) != (t.major, t.minor))
    return VolumeView(v.where, v.prefixes, beyond=beyond)


def container_view(where: str, target: Target, container_mounts: tuple[Mount, ...],
                   pid: int | None = None) -> VolumeView:
    """How a container spells the volume, from the container's own mountinfo
    (``/proc/INIT/mountinfo``); ``pid`` is the container's init pid on the host."""
    v = _view_from_mounts(where, target, container_mounts)
    return VolumeView(v.where, v.prefixes, pid, beyond=_beyond(target, v, container_mounts))


def _beyond(target: Target, view: VolumeView, mounts: tuple[Mount, ...]) -> tuple[str, ...]:
    """Mount points (as ``view`` spells them) of other filesystems strictly below one of its
    prefixes: a container's /dev, /proc, /sys where its root is on the volume."""
    t = target.mount
    return tuple(m.mountpoint for m in mounts
                 if (m.major, m.minor) != (t.major, t.minor) and
                 any(m.mountpoint != pre and _under(m.mountpoint, pre)
                     for pre, _host in view.prefixes))


def lines_with_paths(view: VolumeView, text: str, comments: str = "#"
                     ) -> list[tuple[int, str, list[tuple[str, str]]]]:
    """(line number, line, [(spelling, host path)]) for each non-comment line of ``text`` that
    names a path on the volume."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s[0] in comments:
            continue
        found = view.paths_in_text(line)
        if found:
            out.append((n, line, found))
    return out
