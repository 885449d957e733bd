"""Files inside a container, reached from its root as the container's own processes reach
them: ``openat2`` with ``RESOLVE_IN_ROOT`` on a descriptor of the container's root (its
init's ``/proc/INIT/root``, opened once), so that an absolute symlink inside resolves
against the container's ``/`` and ``..`` stops at it. A path is never walked through
``/proc/PID/root``, where such a link resolves against the host's ``/``.

Where ``openat2`` is not there (Linux before 5.6, an architecture whose number is not known
here, a seccomp filter that refuses it), the path is walked one component at a time with
``O_NOFOLLOW``, and a symlink or ``..`` on the way is refused (``ELOOP``): nothing is
followed the host's way. Standard library only (ctypes for the system call, as
:mod:`vacate.archive.beneath`).
"""

from __future__ import annotations

import errno
import os
import stat

from vacate.archive import beneath

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_IN_ROOT = 0x10
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_in_root = beneath.openat2_with(_DIR, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
MAX_LINKS = 40


def _loop(path: str) -> OSError:
    return OSError(errno.ELOOP, "a symbolic link (or ..) on the way, and this kernel cannot "
                                "resolve it inside the container's root", path)


def open_dir(root: int, path: str) -> int:
    """A new descriptor of the directory ``path`` (as the container spells it) of the
    container whose root is open as ``root``."""
    global _in_root
    rel = path.lstrip("/").encode("utf-8", "surrogateescape") or b"."
    if _in_root is not None:
        try:
            return _in_root(root, rel)
        except OSError as e:
            if e.errno not in (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG):
                raise
            _in_root = None          # not this kernel (or a filter refuses it): walk instead
    comps = [c for c in rel.split(b"/") if c not in (b"", b".")]
    if b".." in comps:
        raise _loop(path)
    if not comps:
        return os.dup(root)
    try:
        return beneath.walk_beneath(root, b"/".join(comps))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _loop(path) from None
        raise


class Root:
    """A container's root filesystem held open (``top``: its init's ``/proc/INIT/root``,
    the root of its mount namespace), and its files by the container's own paths."""

    def __init__(self, top: str):
        self.fd = os.open(top, _DIR)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def parent(self, path: str) -> tuple[int, str, str]:
        """(a new descriptor of the directory that holds the file ``path`` names, the file's
        name there, its path as the container spells it): symbolic links followed inside
        the root, the last one's too, so the file found is the one the container would open;
        the name is not a link."""
        for _ in range(MAX_LINKS):
            head, _, name = path.rstrip("/").rpartition("/")
            if name in ("", ".", ".."):
                raise OSError(errno.EINVAL, "not a file's path", path)
            d = open_dir(self.fd, head or "/")
            try:
                st = os.stat(name, dir_fd=d, follow_symlinks=False)
            except FileNotFoundError:
                return d, name, path
            except BaseException:
                os.close(d)
                raise
            if not stat.S_ISLNK(st.st_mode):
                return d, name, path
            target = os.readlink(name, dir_fd=d)
            os.close(d)
            path = target if target.startswith("/") else f"{head}/{target}"
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
