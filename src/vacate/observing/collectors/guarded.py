"""Calls that may block on a filesystem that does not answer, bounded. Standard library only.

A ``stat``, ``statvfs`` or ``realpath`` asks the filesystem it reaches. On a FUSE filesystem
whose daemon is stopped or hung (a dead ``sshfs``), or a hard-mounted NFS or CIFS share whose
server is gone, it blocks in the kernel, often in a sleep no signal ends, and a thread stuck
there would keep this process from exiting. So such calls run in a forked child with a
deadline: the child reports through a pipe; when it does not answer in time it is sent
``SIGKILL`` and left behind (never waited for), and the caller gets :class:`NoAnswer`. The
child holds nothing of ours that anyone waits on: its stdin, stdout and stderr are
``/dev/null`` and every other fd but its pipe is closed.

This is the one fork vacate makes while other threads may run (everywhere else
:func:`~vacate.observing.collectors.forking.can_fork` says no then), and on purpose: a call
stuck in the kernel can only be left behind in a process of its own, and a helper process
started earlier could not make the call on the caller's behalf without the caller waiting on
it just the same. It is safe because the child never takes a lock another thread could hold:
it only makes system calls and marshals plain values, everything it uses is imported before
the fork (an import would take the import lock), and it leaves with ``os._exit``. The
DeprecationWarning CPython 3.12+ gives for a fork under threads is silenced here, for this
reason, and nowhere else.

Only paths that lie on such a filesystem pay for the fork: :func:`realpath` resolves a path
here, component by component, and stops with :class:`Risky` before it would touch one
(mountpoints are compared by name, as mountinfo spells them).
"""

from __future__ import annotations

import os
import stat
import time
import warnings

from vacate.observing.compat import exit_code
from vacate.observing.parsers.paths import follow_links, is_under

# Filesystems whose answers come from a daemon or a server (fuse, fuseblk, fuse.sshfs, ...).
_REMOTE = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "glusterfs", "afs",
                     "lustre", "coda", "ncpfs", "orangefs", "gfs2", "ocfs2", "virtiofs"})
DEADLINE_S = 4.0


class NoAnswer(OSError):
    """The filesystem did not answer within the deadline."""


class Risky(Exception):
    """Resolving the path would touch a filesystem that may not answer (``mountpoint``)."""

    def __init__(self, mountpoint: str):
        super().__init__(mountpoint)
        self.mountpoint = mountpoint


def may_hang(fstype: str) -> bool:
    """A filesystem type whose calls may block on a daemon or a server."""
    if fstype.startswith("fuse"):
        return fstype != "fusectl"
    return fstype.split(".", 1)[0] in _REMOTE


def _risky_for(path: str, risky: tuple[str, ...]) -> str | None:
    best = None
    for mp in risky:
        if is_under(path, mp) and (best is None or len(mp) > len(best)):
            best = mp
    return best


def realpath(path: str, risky: tuple[str, ...]) -> str:
    """``os.path.realpath`` of an absolute path, raising :class:`Risky` instead of touching a
    path on one of the ``risky`` mountpoints (a mountpoint itself counts: looking it up enters
    the filesystem mounted there). A missing component ends the resolution, as realpath does."""
    if not risky:
        return os.path.realpath(path)
    how, at, rest = follow_links(path, _link_text, lambda p: _risky_for(p, risky) is not None)
    if how == "stopped":
        raise Risky(_risky_for(at, risky))
    if how == "resolved":
        return at
    return os.path.normpath("/".join([at, *rest]))      # missing, or a loop


def _link_text(path: str) -> str | bool | None:
    """What :func:`follow_links` asks: False (not a link), None (not there), or the link's
    text (a link that cannot be read raises, as ``os.readlink`` does)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return os.readlink(path) if stat.S_ISLNK(st.st_mode) else False


def _fork(body) -> tuple[int, int]:
    """Fork a child that runs ``body(w)`` (``w``: the pipe it reports through) with nothing
    else of ours open, then leaves: (its pid, the read end)."""
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)    # (the module doc says why)
        child = os.fork()
    if child == 0:                                    # the child: answer, leave
        code = 1
        try:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, w)
            os.closerange(w + 1, 1 << 16)
            body(w)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return child, r


def run(fn, *args, deadline: float = DEADLINE_S):
    """``fn(*args)`` in a forked child; its value must be marshal-able. Raises what ``fn``
    raised as OSError (errno and message kept), or :class:`NoAnswer` after ``deadline``
    seconds."""
    import marshal

    def body(w: int) -> None:
        try:
            out = (0, fn(*args))
        except OSError as e:
            out = (1, (e.errno or 0, e.strerror or str(e)))
        write_all(w, marshal.dumps(out))

    data = read_report(*_fork(body), deadline)
    if data is None:
        raise OSError(0, "the helper process failed")
    try:
        kind, value = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        raise OSError(0, "the helper process failed") from None
    if kind:
        raise OSError(*value)
    return value


NO_ANSWER = "no answer"


def each(fn, items: list, deadline: float = DEADLINE_S) -> list:
    """``[fn(item) for item in items]`` in a forked child that reports each value as it has it
    (values marshal-able; an OSError gives None), with ``deadline`` seconds for each. An item
    not answered in time gives :data:`NO_ANSWER`; the child is left and a fresh one takes the
    items after it. One fork when everything answers."""
    import marshal

    def body(w: int) -> None:
        for item in items[len(out):]:
            try:
                v = fn(item)
            except OSError:
                v = None
            rec = marshal.dumps(v)
            write_all(w, len(rec).to_bytes(4, "little") + rec)

    out: list = []
    while len(out) < len(items):
        child, r = _fork(body)
        buf = b""
        try:
            while True:
                data = _read_within(child, r, deadline)
                if data is None:
                    break
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "little"):
                    n = int.from_bytes(buf[:4], "little")
                    out.append(marshal.loads(buf[4:4 + n]))
                    buf = buf[4 + n:]
        except NoAnswer:
            out.append(NO_ANSWER)
            continue
        except BaseException:
            _abandon(child)
            raise
        finally:
            os.close(r)
        os.waitpid(child, 0)
        while len(out) < len(items):             # the child failed: no value for the rest
            out.append(None)
    return out


def _read_within(child: int, r: int, deadline: float) -> bytes | None:
    """What the child wrote next (None at its end), or :class:`NoAnswer` (the child killed
    and left) when nothing came within ``deadline`` seconds."""
    import select

    if not select.select([r], [], [], deadline)[0]:
        _abandon(child)
        raise NoAnswer(0, f"no answer in {deadline:g} s")
    return os.read(r, 65536) or None


def read_report(child: int, r: int, deadline: float | None = None) -> bytes | None:
    """All a forked child writes to the pipe ``r`` (closed here), then the child reaped; None
    when it failed. With a ``deadline`` (seconds), a child not done by then is killed and
    left behind: :class:`NoAnswer`."""
    import select

    chunks = []
    end = None if deadline is None else time.monotonic() + deadline
    done = False
    try:
        while True:
            if end is not None:
                left = end - time.monotonic()
                if left <= 0 or not select.select([r], [], [], left)[0]:
                    raise NoAnswer(0, f"no answer in {deadline:g} s")
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
        done = True
    finally:
        os.close(r)
        if not done:                    # no answer, or we were interrupted: leave it
            _abandon(child)
    _, status = os.waitpid(child, 0)
    return b"".join(chunks) if exit_code(status) == 0 else None


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to a pipe (a forked child's report)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _abandon(child: int) -> None:
    """Kill a child that does not answer; reap it only if it is already gone (a child stuck
    in an uninterruptible sleep cannot be waited for)."""
    import signal

    try:
        os.kill(child, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(20):
        try:
            if os.waitpid(child, os.WNOHANG)[0]:
                return
        except ChildProcessError:
            return
        time.sleep(0.005)
