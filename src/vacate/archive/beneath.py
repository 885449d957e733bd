"""Directories under a root, opened by file descriptor and never through a symlink.

Restore creates everything under ``--to`` through a descriptor of its parent directory, and
each such descriptor is resolved beneath ``--to``'s own: in one call with ``openat2`` and
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` where the kernel has it (Linux 5.6), otherwise one
component at a time with ``O_NOFOLLOW``. Either way what is on disk decides, not what an
archive says its links point at: a symlink on the way (one that was there, or one a crafted
archive would have made) is an error (``ELOOP``), a file on the way is ``ENOTDIR``, and
nothing is ever created or written through a link. Paths given here are relative and hold no
``.``, ``..`` or empty components (the manifest is checked for that first).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat as S
from collections import OrderedDict

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
# openat2 has one number on the architectures that share the generic syscall table since
# Linux 5.1; elsewhere (alpha, mips, ia64) the component walk is used
_SYS_OPENAT2 = 437 if platform.machine() in (
    "x86_64", "aarch64", "arm64", "i386", "i686", "armv7l", "armv8l", "riscv64", "ppc64le",
    "ppc64", "s390x", "loongarch64") else None


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


def openat2_with(flags: int, resolve: int):
    """``openat2(dirfd, path)`` with these open ``flags`` and ``resolve`` flags, as a
    function of ``(dirfd, path: bytes) -> fd`` raising OSError; None where this Python cannot
    make the system call (its number is not known here, or there is no libc)."""
    if _SYS_OPENAT2 is None:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        f = libc.syscall
    except (OSError, AttributeError):
        return None
    f.restype = ctypes.c_long
    how = _OpenHow(flags, 0, resolve)

    def openat2(dirfd: int, path: bytes) -> int:
        fd = f(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dirfd), ctypes.c_char_p(path),
               ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), os.fsdecode(path))
        return fd

    return openat2


_openat2 = openat2_with(_DIR, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS)


def open_beneath(root_fd: int, rel: bytes) -> int:
    """A new descriptor of the directory ``rel`` under ``root_fd``, no symlink followed."""
    global _openat2
    if _openat2 is not None:
        try:
            return _openat2(root_fd, rel)
        except OSError as e:
            if e.errno == errno.ENAMETOOLONG:
                return walk_beneath(root_fd, rel)      # deeper than PATH_MAX: step by step
            if e.errno not in (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG):
                raise
            _openat2 = None          # not this kernel (or a filter refuses it): walk instead
    return walk_beneath(root_fd, rel)


def walk_beneath(root_fd: int, rel: bytes, create: bool = False) -> int:
    """``open_beneath`` one component at a time; ``create`` makes missing directories (mode
    0700: restore gives them their modes last)."""
    fd = root_fd
    try:
        for comp in rel.split(b"/"):
            if create:
                try:
                    os.mkdir(comp, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                nfd = os.open(comp, _DIR, dir_fd=fd)
            except NotADirectoryError:           # O_NOFOLLOW on a symlink: say which
                if S.S_ISLNK(os.stat(comp, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP),
                                  os.fsdecode(rel)) from None
                raise
            if fd != root_fd:
                os.close(fd)
            fd = nfd
    except BaseException:
        if fd != root_fd:
            os.close(fd)
        raise
    return fd


class Tree:
    """``--to`` held open, and the directories under it by descriptor (the most recently
    used ones kept open). Directories are never renamed or removed while it is in use, so a
    kept descriptor stays what its path names."""

    KEEP = 64

    def __init__(self, root: str):
        self.root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.kept: OrderedDict[bytes, int] = OrderedDict()

    def close(self) -> None:
        for fd in self.kept.values():
            os.close(fd)
        self.kept.clear()
        os.close(self.root_fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def dir(self, rel: bytes, create: bool = False) -> int:
        """The descriptor of directory ``rel`` (``b""``: the root); it stays open for at least
        the next ``KEEP - 1`` calls. FileNotFoundError when it is not there (``create``: made, with its parents); ELOOP or
        ENOTDIR when a symlink or a non-directory is on the way."""
        if not rel:
            return self.root_fd
        fd = self.kept.get(rel)
        if fd is not None:
            self.kept.move_to_end(rel)
            return fd
        try:
            fd = open_beneath(self.root_fd, rel)
        except FileNotFoundError:
            if not create:
                raise
            fd = walk_beneath(self.root_fd, rel, create=True)
        self.kept[rel] = fd
        if len(self.kept) > self.KEEP:
            os.close(self.kept.popitem(last=False)[1])
        return fd

    def parent(self, rel: bytes, create: bool = False) -> tuple[int, bytes]:
        """(descriptor of the directory holding ``rel``, its last component)."""
        head, _, name = rel.rpartition(b"/")
        return self.dir(head, create), name
