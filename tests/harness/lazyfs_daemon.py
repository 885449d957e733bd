"""The daemon of the test filesystem of :mod:`harness.lazyfs`: serves a
:class:`lazyfs_model.State` over FUSE and answers a control socket.

``python3 lazyfs_daemon.py BACKING MOUNTPOINT SOCKET`` loads the tree under BACKING as what is
durable, mounts it at MOUNTPOINT in the foreground, and when unmounted rewrites BACKING with
what is durable then. It runs in a process of its own (a FUSE daemon inside the process that
uses its mount would deadlock on it); :class:`harness.lazyfs.LazyFS` starts and stops it.

FUSE requests are served by one thread (libfuse's ``-s``); the control socket has a thread of
its own, and one lock keeps a command and a request from running at once, so a cut falls
between two requests. The socket takes one line and answers one line of JSON: ``cut``
(drop all that is not durable), ``pending`` (what a cut would drop), ``ping``, ``arm N``
(count the requests that change something from now on, cut right after the Nth and then
fail every request with EIO, as a machine that went down would) and ``thaw`` (serve again;
says how many such requests there were and whether the armed cut was made).

libfuse 2 (through mfusepy): Debian's ``fuse`` package, which zfs-fuse needs, conflicts with
``fuse3``, whose ``fusermount3`` libfuse 3 needs to mount. libfuse 2 has no ``renameat2``
flags: a rename with ``RENAME_NOREPLACE`` or ``RENAME_EXCHANGE`` fails with ``EINVAL``.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import socket
import stat
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lazyfs_model import State, oserror
from mfusepy import FUSE, Operations, fuse_get_context

# the kernel's caches off: each lookup and stat reaches the daemon (so nothing stale is
# served after a cut), reads and writes bypass the page cache (direct_io), and the kernel
# checks permissions from the attributes it is given
MOUNT_OPTIONS = {
    "foreground": True, "nothreads": True, "direct_io": True, "use_ino": True,
    "hard_remove": True, "default_permissions": True, "big_writes": True,
    "attr_timeout": 0, "entry_timeout": 0, "negative_timeout": 0, "ac_attr_timeout": 0,
    "fsname": "lazyfs", "subtype": "lazyfs",
}


# the requests that change something: each is a step an armed cut counts
STEPS = frozenset({"chmod", "chown", "utimens", "truncate", "fsyncdir", "mkdir", "rmdir",
                   "unlink", "rename", "link", "symlink", "mknod", "create", "write", "fsync"})


def _locked(fn):
    """The request under the lock; refused with EIO while frozen (after an armed cut: the
    machine is down) but for closing handles; an armed cut made right after its step."""
    name = fn.__name__

    @functools.wraps(fn)
    def run(self, *args):
        with self.lock:
            if self.frozen and name not in ("release", "releasedir", "flush"):
                raise oserror(errno.EIO, "lazyfs is frozen after a cut")
            got = fn(self, *args)
            if name in STEPS:
                self.steps += 1
                if self.steps == self.armed:
                    self.s.cut()
                    self.frozen = True
            return got
    return run


class LazyOps(Operations):
    """The FUSE operations over one :class:`State`."""
    use_ns = True
    flag_nullpath_ok = True     # an unlinked file still open is reached by its handle

    def __init__(self, state: State, backing: str, sock_path: str):
        self.s = state
        self.backing = backing
        self.sock_path = sock_path
        self.lock = threading.Lock()
        self.steps = 0          # requests that changed something, since the last "arm"
        self.armed = 0          # cut right after this step (0: not armed)
        self.frozen = False

    # -- the control socket ---------------------------------------------------------------

    def init(self, path):
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(self.sock_path)
        srv.listen(4)
        threading.Thread(target=self._control, args=(srv,), daemon=True).start()

    def _control(self, srv: socket.socket) -> None:
        while True:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(10)
                try:
                    line = conn.makefile("rb").readline().decode().strip()
                    with self.lock:
                        word, _, arg = line.partition(" ")
                        if line == "cut":
                            reply = {"ok": True, **self.s.cut()}
                        elif word == "arm":
                            self.steps, self.armed, self.frozen = 0, int(arg), False
                            reply = {"ok": True}
                        elif line == "thaw":
                            reply = {"ok": True, "steps": self.steps, "cut": self.frozen}
                            self.armed, self.frozen = 0, False
                        elif line == "state":
                            reply = {"ok": True, "steps": self.steps, "cut": self.frozen}
                        elif line == "pending":
                            reply = {"ok": True, "pending": self.s.pending()}
                        elif line == "ping":
                            reply = {"ok": True}
                        else:
                            reply = {"ok": False, "error": f"unknown command {line!r}"}
                    conn.sendall(json.dumps(reply).encode() + b"\n")
                except OSError:
                    continue

    # -- the inode a request names ------------------------------------------------------------

    def _ino(self, path, fh=None) -> int:
        if fh:
            return self.s.handle(fh)[0]
        if path is None:
            raise oserror(errno.ENOENT)
        return self.s.lookup(path)

    @staticmethod
    def _who() -> tuple[int, int]:
        uid, gid, _ = fuse_get_context()
        return uid, gid

    # -- attributes -----------------------------------------------------------------------

    @_locked
    def getattr(self, path, fh=None):
        ino = self._ino(path, fh)
        n = self.s.live[ino]
        nlink = n.links
        if n.is_dir:
            nlink = 2 + sum(self.s.live[i].is_dir for i in n.entries.values())
        return {"st_ino": ino, "st_mode": n.mode, "st_nlink": nlink, "st_uid": n.uid,
                "st_gid": n.gid, "st_size": n.size, "st_blocks": (n.size + 511) // 512,
                "st_atime": n.atime, "st_mtime": n.mtime, "st_ctime": n.ctime}

    @_locked
    def chmod(self, path, mode):
        self.s.chmod(self._ino(path), mode)

    @_locked
    def chown(self, path, uid, gid):
        self.s.chown(self._ino(path), uid, gid)

    @_locked
    def utimens(self, path, times=None):
        if times is None:
            now = time.time_ns()
            times = (now, now)
        self.s.utimens(self._ino(path), *times)

    @_locked
    def truncate(self, path, length, fh=None):
        self.s.truncate(self._ino(path, fh), length)

    @_locked
    def access(self, path, amode):
        self.s.lookup(path)

    @_locked
    def statfs(self, path):
        v = os.statvfs(self.backing)
        return {"f_bsize": v.f_bsize, "f_frsize": v.f_frsize, "f_blocks": v.f_blocks,
                "f_bfree": v.f_bfree, "f_bavail": v.f_bavail, "f_files": v.f_files,
                "f_ffree": v.f_ffree, "f_favail": v.f_favail, "f_namemax": 255}

    # -- the namespace --------------------------------------------------------------------

    def readdir(self, path, fh):
        return [name for name, _, _ in self.readdir_with_offset(path, 0, fh)]

    @_locked
    def readdir_with_offset(self, path, offset, fh):
        # each entry with the offset of the next, so a listing that fills libfuse's buffer
        # goes on where it stopped
        ino = self._ino(path, fh)
        node = self.s.live[ino]
        names = [(".", ino), ("..", ino), *node.entries.items()]
        return [(name, {"st_ino": i, "st_mode": self.s.live[i].mode}, k + 1)
                for k, (name, i) in enumerate(names) if k >= offset]

    @_locked
    def opendir(self, path):
        ino = self.s.lookup(path)
        if not self.s.live[ino].is_dir:
            raise oserror(errno.ENOTDIR, path)
        return self.s.open(ino, os.O_RDONLY | os.O_DIRECTORY)

    @_locked
    def releasedir(self, path, fh):
        self.s.release(fh)

    @_locked
    def fsyncdir(self, path, datasync, fh):
        self.s.sync_dir(self._ino(path, fh))

    @_locked
    def mkdir(self, path, mode):
        self.s.mkdir(path, mode, *self._who())

    @_locked
    def rmdir(self, path):
        self.s.rmdir(path)

    @_locked
    def unlink(self, path):
        self.s.unlink(path)

    @_locked
    def rename(self, old, new):
        self.s.rename(old, new)

    @_locked
    def link(self, target, source):
        self.s.link(source, target)

    @_locked
    def symlink(self, target, source):
        self.s.symlink(target, source, *self._who())

    @_locked
    def readlink(self, path):
        n = self.s.live[self.s.lookup(path)]
        if not stat.S_ISLNK(n.mode):
            raise oserror(errno.EINVAL, path)
        return n.target

    @_locked
    def mknod(self, path, mode, dev):
        if not stat.S_ISREG(mode):
            raise oserror(errno.EPERM, "lazyfs holds regular files, directories and links only")
        self.s.create(path, mode, *self._who())

    # -- files ----------------------------------------------------------------------------

    @_locked
    def create(self, path, mode, flags):
        ino = self.s.create(path, mode, *self._who())
        return self.s.open(ino, flags)

    @_locked
    def open(self, path, flags):
        return self.s.open(self.s.lookup(path), flags)

    @_locked
    def read(self, path, size, offset, fh):
        return self.s.read(self.s.handle(fh)[0], size, offset)

    @_locked
    def write(self, path, data, offset, fh):
        ino, flags = self.s.handle(fh)
        return self.s.write(ino, offset, data, append=bool(flags & os.O_APPEND))

    @_locked
    def flush(self, path, fh):
        return 0

    @_locked
    def release(self, path, fh):
        self.s.release(fh)

    @_locked
    def fsync(self, path, datasync, fh):
        self.s.sync_file(self._ino(path, fh))


def main(backing: str, mnt: str, sock_path: str) -> None:
    state = State()
    state.load(backing)
    ops = LazyOps(state, backing, sock_path)
    try:
        FUSE(ops, mnt, **MOUNT_OPTIONS)
    finally:
        with ops.lock:
            state.dump(backing)


if __name__ == "__main__":
    main(*sys.argv[1:4])
