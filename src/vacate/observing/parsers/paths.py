"""Path text as the kernel writes it: prefix tests, octal unescaping, and following a path's
symlinks a component at a time with the lookups left to the caller. No imports beyond the
standard library, and ``re`` only when there is something to unescape: the first look over
/proc (:mod:`vacate.observing.collectors.procs_probe`) uses these before the rest of vacate is imported."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:       # (collections.abc is not imported at start-up: see above)
    from collections.abc import Callable

MAX_HOPS = 40          # links followed while resolving one path (as the kernel's ELOOP)


def is_under(path: str, top: str) -> bool:
    """``path`` is ``top`` or inside it (purely by name)."""
    if top == "/":
        return path.startswith("/")
    return path == top or path.startswith(top.rstrip("/") + "/")


def rebase(path: str, old: str, new: str) -> str:
    """``path``, which lies under ``old``, as it lies under ``new`` (the same place spelled
    from another root: a container's and the host's)."""
    import posixpath

    rest = path[len(old):].lstrip("/") if old != "/" else path.lstrip("/")
    return posixpath.normpath(posixpath.join(new, rest)) if rest else new


def unescape(field: str) -> str:
    """Undo the kernel's octal escapes (``\\040`` -> space). Bytes above 0x7f stay as they are
    in the surrogate-escaped string, so the result round-trips through ``os.fsencode``."""
    if "\\" not in field:
        return field
    import re

    raw = field.encode("utf-8", "surrogateescape")
    raw = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8) & 0xFF]), raw)
    return raw.decode("utf-8", "surrogateescape")


def escape(path: str) -> str:
    """``path`` as fstab, ``lxc.mount.entry`` and the kernel's mount tables write a field:
    space, tab, newline and backslash as octal escapes (``\\040``); what :func:`unescape`
    undoes."""
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in path)


def follow_links(path: str, what: Callable[[str], str | bool | None],
                 stop: Callable[[str], bool] | None = None,
                 max_hops: int = MAX_HOPS) -> tuple[str, str, list[str]]:
    """Resolve the absolute ``path`` a component at a time, following symlinks as the kernel
    does, where ``os.path.realpath`` will not do: ``what(p)`` tells what the path ``p`` is
    (False: not a link; None: not there, or unreadable; "": a link that cannot be read; else
    the link's text; it may also raise) and ``stop(p)``, asked of each path before ``what``,
    ends the walk there (a mount that may hang; the volume reached by name).

    Returns ``(how, at, rest)``: ``rest`` the components not walked yet, in order, and
    ``how`` one of "resolved" (``at`` the resolved path), "stopped", "missing",
    "unreadable-link" and "too-many-links" (``at`` the path where the walk ended)."""
    todo = [p for p in reversed(path.split("/")) if p]    # popped: the next one last
    cur = "/"
    hops = 0
    while todo:
        name = todo.pop()
        if name == ".":
            continue
        if name == "..":
            cur = cur.rpartition("/")[0] or "/"
            continue
        nxt = cur + name if cur == "/" else cur + "/" + name
        if stop is not None and stop(nxt):
            return "stopped", nxt, todo[::-1]
        kind = what(nxt)
        if kind is None:
            return "missing", nxt, todo[::-1]
        if kind is False:
            cur = nxt
            continue
        hops += 1
        if kind == "":
            return "unreadable-link", nxt, todo[::-1]
        if hops > max_hops:
            return "too-many-links", nxt, todo[::-1]
        todo.extend(p for p in reversed(kind.split("/")) if p)
        if kind.startswith("/"):
            cur = "/"
    return "resolved", cur, []
