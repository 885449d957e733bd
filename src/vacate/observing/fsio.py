"""File access every layer shares: opening without touching atimes, and reading a file that
something else named (a config, an archive's manifest) without blocking and within a bound;
opening what a walk listed only if it is still that inode, and the fd-relative walk built on
it; writing a file crash-safe (temp -> fsync -> rename -> fsync the directory).

Standard library only: collectors use it, and they run on any host's ``python3``.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

from vacate.observing.model.common import Problem

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


def existing_parent(path: str) -> str:
    """``path`` made absolute, or the nearest directory above it that exists: where a file
    that is not there yet would be made (its filesystem, its permissions)."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        p = os.path.dirname(p)
    return p


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

# -- opening what a walk listed, and walking fd-relative ---------------------------------------

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Replaced(OSError):
    """The name now holds another inode than the one listed (``fstat`` of the opened fd
    disagrees with the listing's ``lstat``): it was replaced in between."""

    def __init__(self, path):
        super().__init__(f"{os.fsdecode(path)}: replaced while it was being read")
        self.strerror = "replaced while it was being read"
        self.filename = path


def open_checked(path, flags: int, st: os.stat_result | None = None, *,
                 dir_fd: int | None = None) -> int:
    """``open_noatime`` with ``O_NOFOLLOW``; with ``st`` (the ``lstat`` the walk saw), the
    opened fd must be that same inode (device and inode number), or :class:`Replaced` is
    raised (and the fd closed): nothing is read from a file swapped in after it was listed."""
    fd = open_noatime(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    if st is not None:
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            raise Replaced(path)
    return fd


def walk(root: bytes, *, enter, skip=None, error) -> Iterator[tuple[bytes, os.stat_result]]:
    """``(path, lstat)`` of ``root`` and of everything below it, never following a symlink:
    each directory's entries in name order, then each of its subdirectories the same way.

    Directories are opened relative to their parent's fd (one fd per level, no limit on the
    length of a path) and checked with ``fstat`` to be the inode listed; entries are
    ``lstat``'ed relative to it. ``skip(path)``: names left out before anything stats them
    (mountpoints); ``enter(path, st)``: whether to walk a subdirectory (it is yielded either
    way); ``error(path, err)``: what could not be listed, stat'ed or opened (the walk goes
    on; a :class:`Replaced` directory is not walked)."""
    try:
        st = os.lstat(root)
    except OSError as e:
        error(root, e)
        return
    yield root, st
    if not stat.S_ISDIR(st.st_mode):
        return
    try:
        fd = open_checked(root, DIR_FLAGS, st)
    except OSError as e:
        error(root, e)
        return
    levels: list[tuple[int, Iterator[tuple[bytes, bytes, os.stat_result]]]] = []
    path = root
    try:
        while True:
            try:
                subs = yield from _listing(fd, path, enter, skip, error)
            except BaseException:
                os.close(fd)
                raise
            levels.append((fd, iter(subs)))
            fd = -1
            while levels and fd < 0:
                pfd, todo = levels[-1]
                nxt = next(todo, None)
                if nxt is None:
                    os.close(pfd)
                    levels.pop()
                    continue
                name, path, dst = nxt
                try:
                    fd = open_checked(name, DIR_FLAGS, dst, dir_fd=pfd)
                except OSError as e:
                    error(path, e)
            if fd < 0:
                return
    finally:
        for pfd, _ in levels:
            os.close(pfd)


def _listing(fd: int, path: bytes, enter, skip, error):
    """Yield the entries of the open directory ``fd`` in name order; return its
    subdirectories to walk as (name, path, lstat)."""
    try:
        names = sorted(os.fsencode(n) for n in os.listdir(fd))
    except OSError as e:
        error(path, e)
        return []
    subs = []
    for name in names:
        p = path + b"/" + name
        if skip is not None and skip(p):
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError as e:
            error(p, e)
            continue
        yield p, st
        if stat.S_ISDIR(st.st_mode) and enter(p, st):
            subs.append((name, p, st))
    return subs


# -- writing a file so that a crash leaves the old one or the new one, never half of it -----

TMP_PREFIX = ".tmp-"


def temp_path(final: str) -> str:
    """The temp name ``final`` is written under, in its own directory (a rename within one
    filesystem is atomic); ``TMP_PREFIX`` marks it for cleanup after a crash."""
    d, base = os.path.split(final)
    return os.path.join(d, f"{TMP_PREFIX}{os.getpid()}-{base}")


def fsync_dir(path: str) -> None:
    fd = os.open(path or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_durable(path: str, mode: int = 0o777) -> None:
    """``os.makedirs(path, mode, exist_ok=True)`` whose new directories survive a crash: a
    directory's name is on the disk once its parent is fsynced, so each one made here is
    followed by an fsync of its parent (a file later committed inside it would otherwise
    lose its path with it)."""
    missing = []
    p = os.path.abspath(path)
    while not os.path.isdir(p):
        missing.append(p)
        p = os.path.dirname(p)
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            if not os.path.isdir(d):
                raise
        fsync_dir(os.path.dirname(d))


def commit_temp(fd: int, tmp: str, final: str, dir_fd: int | None = None) -> None:
    """Make the written temp file ``tmp`` (open as ``fd``, closed here) the file ``final``:
    fsync -> close -> rename -> fsync the directory. On failure ``tmp`` is removed.
    ``dir_fd``: both names are in that directory (held open)."""
    try:
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        remove_quietly(tmp, dir_fd)
        raise
    if dir_fd is None:
        fsync_dir(os.path.dirname(final))
    else:
        os.fsync(dir_fd)


def remove_quietly(path: str, dir_fd: int | None = None) -> None:
    """Remove ``path`` if it is there (cleanup: a failure here must not hide the first)."""
    try:
        os.unlink(path, dir_fd=dir_fd)
    except OSError:
        pass


def write_atomic(final: str, data, mode: int = 0o644, *,
                 like: os.stat_result | None = None, dir_fd: int | None = None) -> None:
    """Write ``data`` as the file ``final``, crash-safe (temp -> fsync -> rename -> fsync
    dir); nothing is left behind when it fails (a full disk, an interrupt). ``like``: the
    file it replaces or copies, whose permission bits, owner and group the new one gets
    before it takes the name. ``dir_fd``: ``final`` is a name in that directory (held
    open), and no symlink is followed at the temp name."""
    tmp = temp_path(final)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC |
                 (os.O_NOFOLLOW if dir_fd is not None else 0),
                 mode if like is None else 0o600, dir_fd=dir_fd)
    try:
        if like is not None:
            os.fchown(fd, like.st_uid, like.st_gid)
            os.fchmod(fd, stat.S_IMODE(like.st_mode))
        mv = memoryview(data)
        while mv:
            mv = mv[os.write(fd, mv):]
    except BaseException:
        os.close(fd)
        remove_quietly(tmp, dir_fd)
        raise
    commit_temp(fd, tmp, final, dir_fd)
