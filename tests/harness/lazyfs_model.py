"""What the test filesystem of :mod:`harness.lazyfs` holds: two states of one tree and the rules
that carry a change from the first to the second.

*live* is what a running program sees; *durable* is what a crash at this moment would leave.
Every change is made to live; ``fsync`` of a file copies that inode's data and attributes into
durable, ``fsync`` of a directory copies that directory's entries (and attributes). A *cut*
throws live away and makes it a copy of what is durable and reachable from the root.

The directory rule (a rename is one thing, made durable by syncing its destination):

- syncing directory D makes D's entries as they are now durable, except that a name gone
  from D whose inode still has a live name elsewhere, and no durable name but this one,
  stays durable in D until a later sync gives the inode its new name (syncing only a
  rename's source never loses the file);
- when a sync gives an inode a durable name, the durable names that inode had and that are
  gone live go with it (syncing a rename's destination removes its old name too, so a
  directory never has two durable names);
- an inode that gets a durable name but was never fsync'd itself is durable as it was
  created: a file empty, a directory without entries, a symbolic link with its target.

No FUSE here: :mod:`harness.lazyfs_daemon` serves this state; the model's rules can be tested
without a mount. Errors are ``OSError`` with the errno the system call should fail with.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import time
from dataclasses import dataclass, field

ROOT = 1


def oserror(code: int, what: str = "") -> OSError:
    return OSError(code, os.strerror(code), what)


@dataclass
class Node:
    """One inode: its attributes and, by its type, data, a link's target or entries."""
    mode: int
    uid: int
    gid: int
    atime: int
    mtime: int
    ctime: int
    data: bytearray = field(default_factory=bytearray)
    target: str = ""
    entries: dict = field(default_factory=dict)
    links: int = 0          # live names (live nodes only)
    opens: int = 0          # open handles (live nodes only)
    dirty_data: bool = False
    dirty_meta: bool = False

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def size(self) -> int:
        if stat.S_ISLNK(self.mode):
            return len(os.fsencode(self.target))
        return 4096 if self.is_dir else len(self.data)

    def copy(self) -> Node:
        return Node(self.mode, self.uid, self.gid, self.atime, self.mtime, self.ctime,
                    bytearray(self.data), self.target, dict(self.entries))

    def touch(self, *, data: bool = False) -> None:
        self.ctime = time.time_ns()
        if data:
            self.mtime = self.ctime
            self.dirty_data = True
        else:
            self.dirty_meta = True


class State:
    """The live and the durable tree (see the module's docstring) and the open handles."""

    def __init__(self, uid: int = 0, gid: int = 0):
        now = time.time_ns()
        root = Node(stat.S_IFDIR | 0o755, uid, gid, now, now, now, links=1)
        self.live: dict[int, Node] = {ROOT: root}
        self.durable: dict[int, Node] = {ROOT: root.copy()}
        self.handles: dict[int, tuple[int, int]] = {}   # fh -> (ino, open flags)
        self.next_ino = ROOT + 1
        self.next_fh = 1

    # -- names ------------------------------------------------------------------------------

    def lookup(self, path: str) -> int:
        ino = ROOT
        for part in (p for p in path.split("/") if p):
            node = self.live[ino]
            if not node.is_dir:
                raise oserror(errno.ENOTDIR, path)
            if part not in node.entries:
                raise oserror(errno.ENOENT, path)
            ino = node.entries[part]
        return ino

    def _parent(self, path: str) -> tuple[int, str]:
        head, name = os.path.split(path.rstrip("/"))
        d = self.lookup(head or "/")
        if not self.live[d].is_dir:
            raise oserror(errno.ENOTDIR, path)
        return d, name

    def paths(self) -> dict[int, str]:
        """Each live inode's first name found from the root (``/`` for the root)."""
        out = {ROOT: "/"}
        todo = [ROOT]
        while todo:
            d = todo.pop()
            for name, ino in sorted(self.live[d].entries.items()):
                if ino not in out:
                    out[ino] = os.path.join(out[d], name)
                    if self.live[ino].is_dir:
                        todo.append(ino)
        return out

    # -- the namespace --------------------------------------------------------------------

    def _add(self, path: str, node: Node) -> int:
        d, name = self._parent(path)
        if name in self.live[d].entries:
            raise oserror(errno.EEXIST, path)
        ino, self.next_ino = self.next_ino, self.next_ino + 1
        node.links = 1
        node.dirty_data = node.dirty_meta = True
        self.live[ino] = node
        self.live[d].entries[name] = ino
        self.live[d].touch(data=True)
        return ino

    def _new(self, mode: int, uid: int, gid: int) -> Node:
        now = time.time_ns()
        return Node(mode, uid, gid, now, now, now)

    def create(self, path: str, mode: int, uid: int, gid: int) -> int:
        return self._add(path, self._new(stat.S_IFREG | stat.S_IMODE(mode), uid, gid))

    def mkdir(self, path: str, mode: int, uid: int, gid: int) -> int:
        return self._add(path, self._new(stat.S_IFDIR | stat.S_IMODE(mode), uid, gid))

    def symlink(self, path: str, target: str, uid: int, gid: int) -> int:
        node = self._new(stat.S_IFLNK | 0o777, uid, gid)
        node.target = target
        return self._add(path, node)

    def link(self, existing: str, path: str) -> None:
        ino = self.lookup(existing)
        node = self.live[ino]
        if node.is_dir:
            raise oserror(errno.EPERM, existing)
        d, name = self._parent(path)
        if name in self.live[d].entries:
            raise oserror(errno.EEXIST, path)
        self.live[d].entries[name] = ino
        self.live[d].touch(data=True)
        node.links += 1
        node.ctime = time.time_ns()

    def _drop_name(self, d: int, name: str) -> None:
        ino = self.live[d].entries.pop(name)
        self.live[d].touch(data=True)
        node = self.live[ino]
        node.links -= 1
        node.ctime = time.time_ns()
        self._forget(ino)

    def _forget(self, ino: int) -> None:
        node = self.live.get(ino)
        if node is not None and node.links <= 0 and node.opens <= 0 and ino != ROOT:
            del self.live[ino]

    def unlink(self, path: str) -> None:
        d, name = self._parent(path)
        ino = self.live[d].entries.get(name)
        if ino is None:
            raise oserror(errno.ENOENT, path)
        if self.live[ino].is_dir:
            raise oserror(errno.EISDIR, path)
        self._drop_name(d, name)

    def rmdir(self, path: str) -> None:
        d, name = self._parent(path)
        ino = self.live[d].entries.get(name)
        if ino is None:
            raise oserror(errno.ENOENT, path)
        node = self.live[ino]
        if not node.is_dir:
            raise oserror(errno.ENOTDIR, path)
        if node.entries:
            raise oserror(errno.ENOTEMPTY, path)
        self._drop_name(d, name)

    def rename(self, old: str, new: str) -> None:
        sd, sn = self._parent(old)
        ino = self.live[sd].entries.get(sn)
        if ino is None:
            raise oserror(errno.ENOENT, old)
        dd, dn = self._parent(new)
        there = self.live[dd].entries.get(dn)
        if there == ino:
            return                      # two names of one inode: rename does nothing
        if there is not None:
            if self.live[ino].is_dir:
                if not self.live[there].is_dir:
                    raise oserror(errno.ENOTDIR, new)
                if self.live[there].entries:
                    raise oserror(errno.ENOTEMPTY, new)
            elif self.live[there].is_dir:
                raise oserror(errno.EISDIR, new)
            self._drop_name(dd, dn)
        del self.live[sd].entries[sn]
        self.live[dd].entries[dn] = ino
        self.live[sd].touch(data=True)
        self.live[dd].touch(data=True)
        self.live[ino].ctime = time.time_ns()

    # -- data and attributes ----------------------------------------------------------------

    def write(self, ino: int, offset: int, data: bytes, append: bool = False) -> int:
        node = self.live[ino]
        buf = node.data
        if append:
            offset = len(buf)
        if offset > len(buf):
            buf.extend(bytes(offset - len(buf)))
        buf[offset:offset + len(data)] = data
        node.touch(data=True)
        return len(data)

    def read(self, ino: int, size: int, offset: int) -> bytes:
        return bytes(self.live[ino].data[offset:offset + size])

    def truncate(self, ino: int, length: int) -> None:
        node = self.live[ino]
        if node.is_dir:
            raise oserror(errno.EISDIR)
        if length < len(node.data):
            del node.data[length:]
        else:
            node.data.extend(bytes(length - len(node.data)))
        node.touch(data=True)

    def chmod(self, ino: int, mode: int) -> None:
        node = self.live[ino]
        node.mode = stat.S_IFMT(node.mode) | stat.S_IMODE(mode)
        node.touch()

    def chown(self, ino: int, uid: int, gid: int) -> None:
        node = self.live[ino]
        if uid != -1:
            node.uid = uid
        if gid != -1:
            node.gid = gid
        node.touch()

    def utimens(self, ino: int, atime: int, mtime: int) -> None:
        node = self.live[ino]
        node.atime, node.mtime = atime, mtime
        node.touch()

    # -- handles --------------------------------------------------------------------------

    def open(self, ino: int, flags: int) -> int:
        fh, self.next_fh = self.next_fh, self.next_fh + 1
        self.handles[fh] = (ino, flags)
        self.live[ino].opens += 1
        return fh

    def handle(self, fh: int) -> tuple[int, int]:
        """The handle's inode and flags; EIO when a cut took its inode away."""
        ino, flags = self.handles[fh]
        if ino not in self.live:
            raise oserror(errno.EIO, "the inode of this handle was dropped by a cut")
        return ino, flags

    def release(self, fh: int) -> None:
        ino, _ = self.handles.pop(fh)
        if ino in self.live:
            self.live[ino].opens -= 1
            self._forget(ino)

    # -- durability -----------------------------------------------------------------------

    def sync_file(self, ino: int) -> None:
        """``fsync`` of a file: its data and attributes as they are now are durable (its
        names are not: they are its directories' entries)."""
        node = self.live[ino]
        snap = node.copy()
        if node.is_dir:                 # a directory's entries are its own sync's business
            snap.entries = dict(self.durable[ino].entries) if ino in self.durable else {}
        self.durable[ino] = snap
        node.dirty_data = node.dirty_meta = False

    def _durable_names(self, ino: int, skip: int = 0) -> list[tuple[int, str]]:
        return [(d, name) for d, dn in self.durable.items() if d != skip and dn.is_dir
                for name, i in dn.entries.items() if i == ino]

    def _born(self, ino: int) -> Node:
        """What is durable of an inode named durably before it was ever fsync'd."""
        snap = self.live[ino].copy()
        snap.data = bytearray()
        snap.entries = {}
        return snap

    def sync_dir(self, d: int) -> None:
        """``fsync`` of a directory (the module's docstring has the rule)."""
        node = self.live[d]
        old = self.durable[d].entries if d in self.durable else {}
        new = dict(node.entries)
        named = set(new.values())
        for name, ino in old.items():
            if name in new or ino in named:
                continue
            alive = ino in self.live and self.live[ino].links > 0
            if alive and not self._durable_names(ino, skip=d):
                new[name] = ino         # a rename away whose destination is not synced
        for name, ino in new.items():
            if old.get(name) == ino:
                continue
            if ino not in self.durable:
                self.durable[ino] = self._born(ino)
            for p, n in self._durable_names(ino, skip=d):
                if p not in self.live or self.live[p].entries.get(n) != ino:
                    del self.durable[p].entries[n]     # the rename's source goes with it
        snap = node.copy()
        snap.data = bytearray()
        snap.entries = new
        self.durable[d] = snap
        node.dirty_meta = False
        node.dirty_data = new != node.entries

    def cut(self) -> dict:
        """Drop every change not durable: live becomes what is durable and reachable from
        the root. Returns how many inodes were live and how many are now."""
        before = len(self.live)
        reach: dict[int, Node] = {}
        todo = [ROOT]
        while todo:
            ino = todo.pop()
            if ino in reach or ino not in self.durable:
                continue
            reach[ino] = self.durable[ino]
            todo.extend(reach[ino].entries.values())
        for dn in reach.values():       # a name whose inode is not durable has no inode
            for name in [n for n, i in dn.entries.items() if i not in reach]:
                del dn.entries[name]
        self.durable = reach
        self.live = {ino: n.copy() for ino, n in reach.items()}
        self.live[ROOT].links = 1
        for dn in self.live.values():
            for ino in dn.entries.values():
                self.live[ino].links += 1
        for ino, _ in self.handles.values():
            if ino in self.live:
                self.live[ino].opens += 1
        return {"live_before": before, "live_after": len(self.live)}

    def pending(self) -> list[dict]:
        """What a cut now would drop, inode by inode: its live path (None: no name left but
        an open handle) and what of it is not durable (``new``: never synced at all;
        ``data``, ``attributes``, ``entries``: changed since it was)."""
        paths = self.paths()
        out = []
        for ino, node in sorted(self.live.items()):
            if ino not in self.durable:
                what = ["new"]
            else:
                what = []
                if node.is_dir:
                    if node.entries != self.durable[ino].entries:
                        what.append("entries")
                elif node.dirty_data:
                    what.append("data")
                if node.dirty_meta:
                    what.append("attributes")
            if what:
                out.append({"path": paths.get(ino), "ino": ino, "pending": what})
        return out

    # -- the backing directory ------------------------------------------------------------

    def load(self, root: str) -> None:
        """The tree under ``root`` as the durable (and live) state; hard links kept;
        anything but directories, regular files and symbolic links left out."""
        seen: dict[tuple[int, int], int] = {}

        def node_of(path: str, st: os.stat_result) -> Node:
            n = Node(st.st_mode, st.st_uid, st.st_gid, st.st_atime_ns, st.st_mtime_ns,
                     st.st_ctime_ns)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    n.data = bytearray(f.read())
            elif stat.S_ISLNK(st.st_mode):
                n.target = os.readlink(path)
            return n

        def fill(d: int, path: str) -> None:
            with os.scandir(path) as it:
                for e in sorted(it, key=lambda e: e.name):
                    st = e.stat(follow_symlinks=False)
                    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode) or
                            stat.S_ISLNK(st.st_mode)):
                        continue
                    key = (st.st_dev, st.st_ino)
                    if key in seen:
                        ino = seen[key]
                    else:
                        ino, self.next_ino = self.next_ino, self.next_ino + 1
                        seen[key] = ino
                        self.live[ino] = node_of(e.path, st)
                        if stat.S_ISDIR(st.st_mode):
                            fill(ino, e.path)
                    self.live[ino].links += 1
                    self.live[d].entries[e.name] = ino

        st = os.lstat(root)
        self.live = {ROOT: node_of(root, st)}
        self.live[ROOT].links = 1
        fill(ROOT, root)
        self.durable = {ino: n.copy() for ino, n in self.live.items()}

    def dump(self, root: str) -> None:
        """Rewrite ``root`` to hold the durable state (what a crash now would leave)."""
        with os.scandir(root) as it:
            for e in list(it):
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path)
                else:
                    os.unlink(e.path)
        written: dict[int, str] = {}

        def attrs(path: str, n: Node) -> None:
            os.chown(path, n.uid, n.gid, follow_symlinks=False)
            if not stat.S_ISLNK(n.mode):
                os.chmod(path, stat.S_IMODE(n.mode))
            os.utime(path, ns=(n.atime, n.mtime), follow_symlinks=False)

        def put(d: int, path: str) -> None:
            for name, ino in sorted(self.durable[d].entries.items()):
                n, p = self.durable.get(ino), os.path.join(path, name)
                if n is None:
                    continue
                if ino in written:
                    os.link(written[ino], p)
                    continue
                if n.is_dir:
                    os.mkdir(p)
                    put(ino, p)
                elif stat.S_ISLNK(n.mode):
                    os.symlink(n.target, p)
                else:
                    with open(p, "wb") as f:
                        f.write(n.data)
                    written[ino] = p
                attrs(p, n)

        put(ROOT, root)
        attrs(root, self.durable[ROOT])
