"""The empty mount-point directory, once the volume is unmounted, made immutable (``chattr
+i``): a service that still writes to the old path then fails instead of filling the root
filesystem. Undone by ``chattr -i PATH``.

Only ever on an empty directory that is no mount point any more (an immutable directory keeps
what is in it). The flag is read with ``FS_IOC_GETFLAGS``, the ioctl ``lsattr`` uses; a
filesystem without it (FUSE, vfat, ...) cannot be locked, which counts as done, said.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys

from vacate.act.base import CommandFailed, Context, Outcome
from vacate.act.kind import Kind, params
from vacate.observing.collectors.mounts import read_mounts
from vacate.observing.model.plan import Step

KINDS = (Kind("lock-dir", after_earlier=True),)

FS_IOC_GETFLAGS = 0x80086601           # _IOR('f', 1, long)
FS_IMMUTABLE_FL = 0x00000010
# what the ioctl answers where the filesystem has no such flags
UNSUPPORTED = frozenset({errno.ENOTTY, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


def _path(step: Step) -> str:
    return params(step).path


def _flags(local: str) -> int | None:
    """The directory's inode flags, None where its filesystem has none; raises the
    ``OSError`` of a path that is not there or not a directory (never followed)."""
    fd = os.open(local, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        buf = fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8))
    except OSError as e:
        if e.errno in UNSUPPORTED:
            return None
        raise
    finally:
        os.close(fd)
    return int.from_bytes(buf[:4], sys.byteorder)


def _is_mount_point(step: Step, ctx: Context) -> bool:
    """Whether something is mounted at the path (our mount namespace's mountinfo); raises
    the ``OSError`` of an unreadable table."""
    path = _path(step)
    return any(m.mountpoint == path for m in read_mounts(ctx.host)[0])


def _unsupported_note(path: str) -> str:
    return f"the filesystem of {path} does not support chattr +i; left as it is"


def done(step: Step, ctx: Context) -> bool:
    """No mount point any more, and immutable (or on a filesystem without the flag); or,
    where the plan frees the volume (``--free-volume``), gone with it (``zfs destroy``
    removes its dataset's mount point)."""
    local = ctx.host.path(_path(step))
    try:
        if _is_mount_point(step, ctx):
            return False
        flags = _flags(local)
    except FileNotFoundError:
        return _went_with_dataset(ctx)
    except OSError:
        return False
    return flags is None or bool(flags & FS_IMMUTABLE_FL)


def _went_with_dataset(ctx: Context) -> bool:
    """Whether the plan freed its dataset since (``--free-volume``), the mount point gone
    with it: nothing is left to lock."""
    from vacate.act.freeing import freed_by_plan

    return freed_by_plan(ctx) is not None


def ready(step: Step, ctx: Context) -> str | None:
    """None when the path is a directory (not a symlink), no mount point, and empty."""
    path = _path(step)
    local = ctx.host.path(path)
    try:
        st = os.lstat(local)
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    try:
        if _is_mount_point(step, ctx):
            return f"{path} is still a mount point"
        names = sorted(os.listdir(local))
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    if names:
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        return f"{path} is not empty ({len(names)} entries: {shown}): it is not locked"
    return None


def skipped(step: Step, ctx: Context) -> Outcome:
    path = _path(step)
    if not os.path.lexists(ctx.host.path(path)):
        return Outcome("skipped", f"{path} went with the dataset the plan freed")
    if _flags(ctx.host.path(path)) is None:
        return Outcome("skipped", _unsupported_note(path))
    return Outcome("skipped", f"{path} is immutable already")


def run(step: Step, ctx: Context) -> Outcome:
    """``chattr +i PATH``; ``skipped`` where it is immutable already or its filesystem has no
    such flag (the detail says which). Something written into it meanwhile undoes the lock."""
    path = _path(step)
    local = ctx.host.path(path)
    try:
        ctx.run(["chattr", "+i", local])
    except CommandFailed as e:
        try:
            if _flags(local) is None:
                return Outcome("skipped", _unsupported_note(path))
        except OSError:
            pass
        return Outcome("failed", str(e))
    if os.listdir(local):
        ctx.run(["chattr", "-i", local], check=False)
        return Outcome("failed", f"something was written into {path} meanwhile: not locked")
    if not done(step, ctx):
        return Outcome("failed", f"chattr +i returned, and {path} is not immutable")
    return Outcome("ok", f"{path} is immutable (undo: chattr -i {path})",
                   {"undo": ["chattr", "-i", path]})
