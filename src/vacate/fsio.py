"""File access every layer shares: opening without touching atimes, and reading a file that
something else named (a config, an archive's manifest) without blocking and within a bound.

Standard library only: collectors use it, and they run on any host's ``python3``.
"""

from __future__ import annotations

import errno
import os
import stat

from vacate.model.common import Problem

_NOATIME = getattr(os, "O_NOATIME", 0)
# what reading a named file opens with: never blocks on a FIFO or a device, never takes a tty
NAMED = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotRegular(OSError):
    """A path named as a file is something else (a FIFO, a device, a socket, a directory):
    it is not read, since reading it could block or never end."""

    def __init__(self, path: str, what: str):
        super().__init__(f"{path}: {what}, not a regular file")
        self.path = path
        self.what = what
        self.strerror = f"{what}, not a regular file"


def open_noatime(path: str, flags: int, *, dir_fd: int | None = None) -> int:
    """Open without touching the access time: vacate reports atimes as evidence of use, so
    looking must not make a file look used. ``O_NOATIME`` needs ownership or CAP_FOWNER;
    without it, open normally."""
    if _NOATIME:
        try:
            return os.open(path, flags | _NOATIME, dir_fd=dir_fd)
        except PermissionError:
            pass
    return os.open(path, flags, dir_fd=dir_fd)


def file_kind(mode: int) -> str:
    """What a mode's file type is, in words (``regular file``, ``FIFO``, ...)."""
    for test, name in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISLNK, "symlink"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "file of unknown type"


def read_bounded(path: str, limit: int, *, follow: bool = True,
                 dir_fd: int | None = None) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of the regular file ``path`` and whether it holds more.

    Opened with ``O_NONBLOCK`` and checked with ``fstat`` before a byte is read: a FIFO, a
    device or a socket raises :class:`NotRegular` (so a config line naming ``/dev/zero`` or a
    FIFO can neither exhaust memory nor hang). ``follow=False`` refuses a symlink
    (``O_NOFOLLOW``: ``ELOOP``). Other errors are the ``OSError`` of the call that failed."""
    flags = NAMED | (0 if follow else os.O_NOFOLLOW)
    fd = open_noatime(path, flags, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(path, file_kind(st.st_mode))
        chunks = []
        left = limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[:limit], len(data) > limit


def write_atomic(path: str, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old file or the whole new
    one: a temporary file in the same directory, fsync, rename over ``path``, fsync the
    directory. The temporary file is removed when writing fails."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# a file named but not there: nothing to read, so nothing it could say
MISSING = frozenset({errno.ENOENT, errno.ENOTDIR})


def read_problem(e: OSError, shown: str, *, code: str = "unreadable",
                 path: str | None = None) -> Problem | None:
    """What an error reading the file ``shown`` (as the host spells it) means, the same for
    every collector (as psutil translates every /proc error in one place): missing
    (``ENOENT``, ``ENOTDIR``) is nothing, None; anything else (``EACCES``, ``EIO``, ``ELOOP``,
    a FIFO or a device where a file was named) is a Problem that makes the verdict "could not
    tell", since what the file would have said is unknown. ``path``: the Problem's path when
    it is not ``shown`` (a link as a config spells it, ``shown`` saying where it leads)."""
    if isinstance(e, NotRegular):
        return Problem(code, f"could not read {shown}: {e.what}, not a regular file (not "
                       "read: reading it could block or never end)", path or shown,
                       blocks_verdict=True)
    if e.errno in MISSING:
        return None
    return Problem(code, f"could not read {shown}: {e.strerror or e}", path or shown,
                   blocks_verdict=True)


def cut_problem(shown: str, limit: int, path: str | None = None) -> Problem:
    """A file read only up to ``limit`` bytes: what follows was not looked at."""
    return Problem("file-cut", f"{shown} is larger than {limit} bytes: only the first "
                   f"{limit} were read, what follows was not looked at", path or shown,
                   blocks_verdict=True)


def mount_id(fd: int) -> int:
    """The id of the mount that the open file ``fd`` lies on (``mnt_id`` in
    ``/proc/self/fdinfo/FD``, the first field of mountinfo). Two directories on one mount
    have the same id; a mount point below, a bind of the same filesystem included, has
    another one, even where ``st_dev`` is the same. Raises OSError when /proc cannot tell."""
    info = os.open(f"/proc/self/fdinfo/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        text = os.read(info, 4096)
    finally:
        os.close(info)
    at = text.find(b"\nmnt_id:")
    if at < 0:
        raise OSError(f"/proc/self/fdinfo/{fd}: no mnt_id")
    return int(text[at + 8:text.index(b"\n", at + 1)])
