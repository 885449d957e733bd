"""Two directory trees compared entry by entry — names, types, sizes, modes, owners, mtimes,
link counts, symlink targets and inode numbers — in the same sorted order, with nothing held
in memory per entry; and a digest of the second tree (the one received), over the same
fields. Neither walk leaves its filesystem, and neither reads a file: what the files hold is
compared from the snapshots' streams (:mod:`vacate.archive.zfs_content`), whose objects are
the inode numbers compared here.

The first tree can be walked ahead, while the second is still being made (a receive): a
:class:`Recorder` walks it in a thread into a temp file, and :func:`compare_recorded` reads
that file back beside the walk of the second tree; or it was recorded long before (a native
archive's tree file), and :func:`compare_with` takes its entries."""

from __future__ import annotations

import hashlib
import os
import pickle
import queue
import stat as S
import tempfile
import threading
from dataclasses import dataclass

from vacate.observing.compat import SLOTS

BATCH = 256
_DONE = object()


@dataclass(frozen=True, **SLOTS)
class Compared:
    """A received tree walked against the source's: what was compared and what differed."""

    entries: int                   # in the second tree
    bytes: int                     # file bytes in the second tree (their sizes)
    digest: str                    # sha256 over the second tree's entries
    differences: tuple[str, ...]   # the first ones (``limit``), each a sentence
    more: int                      # differences not listed


def _kind(mode: int) -> str:
    return {S.S_IFREG: "file", S.S_IFDIR: "dir", S.S_IFLNK: "symlink", S.S_IFIFO: "fifo",
            S.S_IFSOCK: "socket", S.S_IFCHR: "char", S.S_IFBLK: "block"}.get(
                S.S_IFMT(mode), "other")


def entries(root: bytes, skip_top: frozenset[bytes] = frozenset()):
    """(relative path, fields) of every entry below ``root``, sorted by path component."""
    dev = os.lstat(root).st_dev

    def walk(d: bytes, rel: bytes):
        names = sorted(os.listdir(d))
        for name in names:
            if not rel and name in skip_top:
                continue
            p = d + b"/" + name
            r = rel + b"/" + name if rel else name
            st = os.lstat(p)
            kind = _kind(st.st_mode)
            link = os.readlink(p) if kind == "symlink" else b""
            size = st.st_size if kind in ("file", "symlink") else 0
            yield r, (kind, size, S.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns,
                      st.st_nlink if kind != "dir" else 0, link, st.st_ino)
            if kind == "dir" and st.st_dev == dev:
                yield from walk(p, r)

    st = os.lstat(root)
    # the top's inode is the mount's (FUSE gives 1, a snapshot directory its own): not kept
    yield b".", ("dir", 0, S.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns, 0,
                 b"", 0)
    yield from walk(root, b"")


def _feed(it, q: queue.Queue) -> None:
    batch = []
    try:
        for e in it:
            batch.append(e)
            if len(batch) == BATCH:
                q.put(batch)
                batch = []
        q.put(batch)
        q.put(_DONE)
    except OSError as e:
        q.put(batch)
        q.put(e)


def _drain(q: queue.Queue):
    while True:
        b = q.get()
        if b is _DONE:
            return
        if isinstance(b, BaseException):
            raise b
        yield from b


def _parallel(it):
    q: queue.Queue = queue.Queue(maxsize=16)
    threading.Thread(target=_feed, args=(it, q), daemon=True).start()
    return _drain(q)


def digest_line(path: bytes, fields: tuple) -> bytes:
    """One entry as the tree's digest takes it in (the same at archive time and at verify)."""
    return path + b"\0" + repr(fields).encode() + b"\n"


_FIELDS = ("type", "size", "mode", "uid", "gid", "mtime_ns", "links", "symlink target",
           "inode")


class Recorder(threading.Thread):
    """Walks ``root`` in a thread into a temp file of entries;
    ``close()`` stops it where it is and drops the file."""

    def __init__(self, root: str, skip_top: frozenset[bytes] = frozenset()):
        super().__init__(daemon=True)
        self.root, self.skip_top = os.fsencode(root), skip_top
        self.file = tempfile.TemporaryFile()      # noqa: SIM115 (closed by close())
        self.error: OSError | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        batch = []
        try:
            for e in entries(self.root, self.skip_top):
                if self.stopping.is_set():
                    return
                batch.append(e)
                if len(batch) == BATCH:
                    pickle.dump(batch, self.file)
                    batch = []
            pickle.dump(batch, self.file)
        except OSError as e:
            self.error = e

    def recorded(self):
        """The entries walked, in order (after ``join``)."""
        self.file.seek(0)
        while True:
            try:
                batch = pickle.load(self.file)
            except EOFError:
                return
            yield from batch

    def close(self) -> None:
        self.stopping.set()
        self.join()
        self.file.close()


def _key(path: bytes) -> list[bytes]:
    return path.split(b"/")


def compare(source: str, received: str, limit: int = 20,
            skip_top: frozenset[bytes] = frozenset()) -> Compared:
    """``received`` compared with ``source`` (both walked now, one thread each);
    ``skip_top``: names at the top of both trees left out (ZFS's ``.zfs``)."""
    return _compare(_parallel(entries(os.fsencode(source), skip_top)), received, limit,
                    skip_top)


def compare_recorded(rec: Recorder, received: str, limit: int = 20,
                     skip_top: frozenset[bytes] = frozenset()) -> Compared:
    """``received`` compared with the tree ``rec`` walked (waited for here)."""
    rec.join()
    if rec.error is not None:
        raise rec.error
    return _compare(rec.recorded(), received, limit, skip_top)


def compare_with(recorded, received: str, limit: int = 20,
                 skip_top: frozenset[bytes] = frozenset()) -> Compared:
    """``received`` compared with ``recorded``: (path, fields) in the walk's order, as a
    tree file gives them back (what it raises while read goes to the caller)."""
    return _compare(iter(recorded), received, limit, skip_top)


def _compare(a, received: str, limit: int, skip_top: frozenset[bytes]) -> Compared:
    b = _parallel(entries(os.fsencode(received), skip_top))
    h = hashlib.sha256()
    diffs: list[str] = []
    n = nbytes = more = 0

    def differ(text: str) -> None:
        nonlocal more
        if len(diffs) < limit:
            diffs.append(text)
        else:
            more += 1

    ea, eb = next(a, None), next(b, None)
    while ea is not None or eb is not None:
        if eb is not None and (ea is None or _key(eb[0]) < _key(ea[0])):
            differ(f"{_shown(eb[0])}: received, not in the source")
            eb = next(b, None)
            continue
        if eb is None or _key(ea[0]) < _key(eb[0]):
            differ(f"{_shown(ea[0])}: in the source, not received")
            ea = next(a, None)
            continue
        path, fb = eb
        n += 1
        nbytes += fb[1] if fb[0] == "file" else 0
        h.update(digest_line(path, fb))
        if ea[1] != fb:
            what = [f for f, x, y in zip(_FIELDS, ea[1], fb) if x != y]
            differ(f"{_shown(path)}: {', '.join(what)} differ")
        ea, eb = next(a, None), next(b, None)
    return Compared(n, nbytes, h.hexdigest(), tuple(diffs), more)


def digest(root: str, skip_top: frozenset[bytes] = frozenset()) -> Compared:
    """The digest of one tree alone (as :func:`compare` makes it of the second)."""
    h = hashlib.sha256()
    n = nbytes = 0
    for path, f in entries(os.fsencode(root), skip_top):
        n += 1
        nbytes += f[1] if f[0] == "file" else 0
        h.update(digest_line(path, f))
    return Compared(n, nbytes, h.hexdigest(), (), 0)


def _shown(path: bytes) -> str:
    return repr(path.decode("utf-8", "surrogateescape"))[1:-1]


def paths_of(root: str, inodes, skip_top: frozenset[bytes] = frozenset()) -> dict[int, str]:
    """The path (as shown) of each of ``inodes`` below ``root`` (one, where it has several
    links)."""
    want = set(inodes)
    out: dict[int, str] = {}
    for path, f in entries(os.fsencode(root), skip_top):
        if f[8] in want and f[8] not in out:
            out[f[8]] = _shown(path)
            if len(out) == len(want):
                break
    return out
