"""Copy an item to its new place with its metadata, remembering what each file was, and read
the copy back from the disk against hashes taken while reading the source.

A pass walks the item (never following a symlink, never leaving its filesystem) and copies
each entry whose source is not the one the state file recorded: a different inode, size,
``mtime_ns`` or ``ctime_ns`` (not rsync's size + mtime). A file is copied as it is: a reflink
(``FICLONE``) where source and destination share a filesystem that can, else its data ranges
only (``SEEK_DATA`` / ``SEEK_HOLE``: holes stay holes); hardlinks inside the item stay
hardlinks; mode, owner, times and extended attributes (POSIX ACLs are ones) are copied where
the destination has them.

Its hash (XXH3-128, BLAKE3 or BLAKE2b: :mod:`vacate.act.copy_hash`) is that of the bytes
read from the source as it is copied: each data range is copied a piece at a time by the
kernel (``sendfile``, page cache to page cache) and the piece, still in the CPU's cache,
read again from the source's pages into a buffer and hashed (where the kernel cannot copy
between the two files, the piece is read, written and hashed from that buffer; a reflinked
file is read for the hash only; a hole is hashed as its zeros). A large file is hashed in a
second thread while the next pieces are copied (:mod:`vacate.act.copy_hash`). A file that
shrinks, grows or is written while copied (its size, ``mtime_ns`` or ``ctime_ns`` after the
copy are not those before) fails the pass with ``ESTALE`` and is not recorded.

The state file (beside the copy, ``.NAME.vacate-copy``) is written crash-safe every few
seconds and at the end, each time once what it records as copied is on the disk (a
``syncfs`` of the destination writes it back at once, then each file and each directory
holding a new name is fsynced, finding little left to write): a ``kill -9`` or a crash loses
only the files copied since, and a rerun recopies a file it finds unrecorded (a partial file
is never recorded). Entries the state recorded that the source no longer has are removed
from the copy (only those: the copy is vacate's own).

:func:`read_back` drops each copied file's cached pages (``POSIX_FADV_DONTNEED``, after the
``fsync`` of the copy) and reads it from the disk, comparing its hash with the source's;
a file read back once is marked so and not read again while it is unchanged.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from dataclasses import dataclass, field

from vacate.act.copy_hash import ALGOS, PIECE, PIPELINE_CHUNK, Hashing, Pipeline, hashing_for
from vacate.observing.fsio import fsync_dir, makedirs_durable, write_atomic

FICLONE = 0x40049409
CHUNK = 8 << 20            # progress told every CHUNK bytes copied
FLUSH_S = 2.0
STATE_VERSION = "vacate.copy-state/1"


def state_path(dest: str) -> str:
    """The state file of the copy at ``dest``."""
    d, name = os.path.split(dest.rstrip("/"))
    return os.path.join(d, f".{name}.vacate-copy")


@dataclass
class CopyResult:
    """What one copy pass did: files seen, copied (bytes), reflinked, hardlinked again,
    removed because the source no longer has them, and what it could not keep."""

    files: int = 0
    copied: int = 0
    bytes_copied: int = 0
    reflinked: int = 0
    linked: int = 0
    removed: int = 0
    warnings: list = field(default_factory=list)


def _key(st: os.stat_result) -> list:
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def syncfs(path: str) -> None:
    """Everything written to the filesystem of ``path`` on the disk (``syncfs``: one flush
    for many files, written back together rather than one ``fsync`` at a time)."""
    import ctypes

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syncfs(fd) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)


class State:
    """What each entry of the source was when copied (by its path in the item), with its
    hash and whether the copy was read back. An entry copied counts only once its data is
    on the disk: ``pending`` ones are recorded at the next flush, once :meth:`_durable` has
    made them so. ``dest``: the copy (needed only by a pass that copies)."""

    def __init__(self, path: str, source: str, dest: str = ""):
        self.path, self.source, self.dest = path, source, dest
        self.entries: dict[str, dict] = {}
        self.pending: dict[str, dict] = {}
        self._flushed = time.monotonic()
        try:
            with open(path, "rb") as f:
                doc = json.loads(f.read().decode("utf-8", "surrogateescape"))
            if doc.get("schema") == STATE_VERSION and doc.get("source") == source:
                self.entries = doc.get("entries", {})
        except (OSError, ValueError):
            pass

    def flush(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._flushed < FLUSH_S:
            return
        if self.pending:
            self._durable()
            self.entries.update(self.pending)
            self.pending = {}
        doc = {"schema": STATE_VERSION, "source": self.source, "entries": self.entries}
        write_atomic(self.path, json.dumps(doc, ensure_ascii=True).encode("ascii"))
        self._flushed = time.monotonic()


    def _durable(self) -> None:
        """What ``pending`` names, on the disk: a ``syncfs`` of the destination writes it all
        back at once, then an ``fsync`` of each file and of each directory that holds a new
        name makes sure of it (each finds little left to write). ``syncfs`` alone is not
        enough: it reports no file's write-back error before Linux 5.8, and reaches no disk
        on some filesystems (FUSE's)."""
        syncfs(os.path.dirname(self.path))
        dirs = set()
        for rel, rec in self.pending.items():
            p = os.path.join(self.dest, rel) if rel else self.dest
            if rec.get("type") == "file" and not rec.get("link"):
                fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            elif rec.get("type") == "dir":
                dirs.add(p)
            dirs.add(os.path.dirname(p))
        for d in sorted(dirs, reverse=True):
            fsync_dir(d)


def _walk(root: str, dev: int):
    """(relative path, lstat) of every entry below ``root``, parents first; never another
    filesystem (a mount point inside is yielded as an empty directory)."""
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            r = os.path.join(rel, e.name) if rel else e.name
            st = e.stat(follow_symlinks=False)
            yield r, st
            if stat.S_ISDIR(st.st_mode) and st.st_dev == dev:
                stack.append(r)


def _copy_xattrs(src: str, dst: str, result: CopyResult) -> None:
    try:
        names = os.listxattr(src, follow_symlinks=False)
    except OSError:
        return
    for n in names:
        try:
            os.setxattr(dst, n, os.getxattr(src, n, follow_symlinks=False),
                        follow_symlinks=False)
        except OSError as e:
            if e.errno not in (errno.ENOTSUP, errno.EPERM, errno.EOPNOTSUPP):
                raise
            result.warnings.append(f"{dst}: extended attribute {n} not kept ({e.strerror})")


def _meta(src: str, dst: str, st: os.stat_result, result: CopyResult) -> None:
    """Owner, mode, extended attributes, times (times last: the others change ctime only)."""
    os.chown(dst, st.st_uid, st.st_gid, follow_symlinks=False)
    if not stat.S_ISLNK(st.st_mode):
        os.chmod(dst, stat.S_IMODE(st.st_mode))
    _copy_xattrs(src, dst, result)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def _copy_file(src: str, dst: str, st: os.stat_result, result: CopyResult, tell,
               pipeline: Pipeline) -> dict:
    """Copy one regular file; its hash from the bytes read from the source (``{ALGO:
    HEX}``)."""

    size = st.st_size
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if (os.fstat(sfd).st_ino, os.fstat(sfd).st_dev) != (st.st_ino, st.st_dev):
            raise OSError(errno.ESTALE, f"{src} was replaced while being copied")
        if os.path.lexists(dst):
            os.unlink(dst)
        dfd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      0o600)
        try:
            cloned = False
            try:
                fcntl.ioctl(dfd, FICLONE, sfd)
                cloned = True
                result.reflinked += 1
            except OSError:
                pass
            hashing = hashing_for(size, pipeline)
            try:
                _copy_ranges(src, sfd, None if cloned else dfd, size, hashing, result, tell)
                digest = hashing.finish()
            finally:
                hashing.stop()
            if not cloned:
                os.ftruncate(dfd, size)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)
    return digest


def _copy_ranges(src: str, sfd: int, dfd: int | None, size: int, hashing: Hashing,
                 result: CopyResult, tell) -> None:
    """The source's data ranges (``SEEK_DATA`` / ``SEEK_HOLE``) read into ``hashing``'s
    buffers a piece at a time, each piece written to ``dfd`` at the same offset (None: a
    reflink holds the bytes already) and then hashed, in file order, a hole as its zeros.
    ``ESTALE`` when the source ends before its size."""
    pos = untold = 0
    kernel = dfd is not None
    while pos < size:
        try:
            data = min(os.lseek(sfd, pos, os.SEEK_DATA), size)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            data = size                               # a hole to the end
        if data > pos:                                # a hole: zeros in the hash only
            hashing.zeros(data - pos)
            pos = data
            if pos >= size:
                break
        hole = min(os.lseek(sfd, pos, os.SEEK_HOLE), size)
        if dfd is not None:
            os.lseek(dfd, pos, os.SEEK_SET)
        while pos < hole:
            view = hashing.buffer(min(PIECE, hole - pos))
            n = _sendfile(dfd, sfd, pos, len(view)) if kernel else -1
            if n < 0:                      # the kernel cannot copy this pair: read, write
                kernel = False
                n = os.preadv(sfd, [view], pos)
                if dfd is not None:
                    w = 0
                    while w < n:
                        w += os.write(dfd, view[w:n])
            elif n and os.preadv(sfd, [view[:n]], pos) != n:
                n = 0
            if n == 0:
                raise OSError(errno.ESTALE, f"{src} shrank while being copied")
            hashing.took(n)
            pos += n
            untold += n
            if untold >= CHUNK:
                _told(untold, result, tell)
                untold = 0
    if untold:
        _told(untold, result, tell)


def _sendfile(dfd: int, sfd: int, pos: int, n: int) -> int:
    """Up to ``n`` bytes at ``pos`` copied by the kernel to ``dfd``'s offset; -1 when it
    cannot copy between these two files."""
    try:
        return os.sendfile(dfd, sfd, pos, n)
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.ENOSYS, errno.EXDEV, errno.EOPNOTSUPP):
            return -1
        raise


def _told(n: int, result: CopyResult, tell) -> None:
    result.bytes_copied += n
    tell(n)


def copy_pass(source: str, dest: str, *, tell=lambda n: None) -> CopyResult:
    """One pass: what changed since the last is copied (see the module's docstring)."""
    with Pipeline() as pipeline:
        return _copy_pass(source, dest, tell, pipeline)


def _copy_pass(source: str, dest: str, tell, pipeline: Pipeline) -> CopyResult:
    result = CopyResult()
    state = State(state_path(dest), source, dest)
    root_st = os.lstat(source)
    seen: set[str] = set()
    links: dict[tuple[int, int], str] = {}
    dirs: list[tuple[str, str, os.stat_result]] = []
    if stat.S_ISDIR(root_st.st_mode):
        makedirs_durable(dest)
        dirs.append((source, dest, root_st))
        walk = _walk(source, root_st.st_dev)
    else:
        walk = iter([("", root_st)])
    for rel, st in walk:
        src = os.path.join(source, rel) if rel else source
        dst = os.path.join(dest, rel) if rel else dest
        seen.add(rel)
        rec = state.entries.get(rel) or state.pending.get(rel)
        same = rec is not None and rec.get("key") == _key(st) and os.path.lexists(dst)
        if stat.S_ISREG(st.st_mode):
            result.files += 1
            if st.st_nlink > 1:
                first = links.get((st.st_dev, st.st_ino))
                if first is not None:
                    if not same:
                        if os.path.lexists(dst):
                            os.unlink(dst)
                        os.link(first, dst)
                        result.linked += 1
                        head = _rel(first, dest)
                        state.pending[rel] = {**(state.pending.get(head)
                                                 or state.entries[head]), "link": head}
                    continue
                links[(st.st_dev, st.st_ino)] = dst
            if same:
                continue
            digest = _copy_file(src, dst, st, result, tell, pipeline)
            _meta(src, dst, st, result)
            after = os.lstat(src)
            if _key(after) != _key(st):
                raise OSError(errno.ESTALE, f"{src} changed while being copied")
            state.pending[rel] = {"type": "file", "key": _key(st), **digest,
                                  "size": st.st_size, "read_back": False}
            result.copied += 1
        elif stat.S_ISDIR(st.st_mode):
            os.makedirs(dst, exist_ok=True)
            dirs.append((src, dst, st))
            state.pending[rel] = {"type": "dir", "key": _key(st)}
        elif stat.S_ISLNK(st.st_mode):
            if not same:
                if os.path.lexists(dst):
                    os.unlink(dst)
                os.symlink(os.readlink(src), dst)
                _meta(src, dst, st, result)
                state.pending[rel] = {"type": "symlink", "key": _key(st)}
                result.copied += 1
        else:
            if not same:
                if os.path.lexists(dst):
                    os.unlink(dst)
                os.mknod(dst, st.st_mode, st.st_rdev)
                _meta(src, dst, st, result)
                state.pending[rel] = {"type": "special", "key": _key(st)}
                result.copied += 1
        state.flush()
    state.flush(force=True)
    for rel in sorted((r for r in state.entries if r not in seen), reverse=True):
        dst = os.path.join(dest, rel)
        try:
            if os.path.isdir(dst) and not os.path.islink(dst):
                os.rmdir(dst)
            else:
                os.unlink(dst)
            result.removed += 1
        except FileNotFoundError:
            pass
        del state.entries[rel]
    for src, dst, st in reversed(dirs):            # a directory's times after its entries
        _meta(src, dst, st, result)
        fd = os.open(dst, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    state.flush(force=True)
    return result


def _rel(path: str, root: str) -> str:
    return os.path.relpath(path, root) if path != root else ""


def unchanged(source: str, dest: str) -> list[str]:
    """What differs between the source now and what the state recorded (empty: the copy
    is of the source as it is): each entry named."""
    state = State(state_path(dest), source)
    if not state.entries:
        return ["nothing was copied yet"]
    out = []
    try:
        root_st = os.lstat(source)
    except OSError as e:
        return [f"{source}: {e.strerror}"]
    walk = _walk(source, root_st.st_dev) if stat.S_ISDIR(root_st.st_mode) else \
        iter([("", root_st)])
    seen = set()
    for rel, st in walk:
        seen.add(rel)
        rec = state.entries.get(rel)
        if rec is None or rec.get("key") != _key(st) or \
                not os.path.lexists(os.path.join(dest, rel) if rel else dest):
            out.append(rel or source)
            if len(out) >= 10:
                return out
    out += [r for r in state.entries if r not in seen][:10]
    return out


@dataclass
class ReadBack:
    """What reading the copy back from the disk found: files and bytes read, and each file
    whose hash is not the one taken from the source (path, why)."""

    files: int = 0
    bytes_read: int = 0
    mismatches: list = field(default_factory=list)      # (path, why)


def read_back(source: str, dest: str, *, tell=lambda n: None, hook=None) -> ReadBack:
    """Read every copied file not read back yet from the disk and compare its hash with
    the source's; mark those that match. ``hook(dest)``: called before reading (tests). A
    large file is hashed in a second thread while the next bytes are read, as it is when
    copied."""
    with Pipeline() as pipeline:
        return _read_back(source, dest, tell, hook, pipeline)


def _read_back(source: str, dest: str, tell, hook, pipeline: Pipeline) -> ReadBack:
    state = State(state_path(dest), source)
    out = ReadBack()
    if hook is not None:
        hook(dest)
    for rel, rec in sorted(state.entries.items()):
        if rec.get("type") != "file" or rec.get("read_back") or rec.get("link"):
            continue
        path = os.path.join(dest, rel) if rel else dest
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            out.mismatches.append((path, e.strerror))
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            algo = next((a for a in ALGOS if a in rec), "blake3")
            hashing = hashing_for(rec["size"], pipeline, algo)
            try:
                n_total = 0
                while True:
                    view = hashing.buffer(PIPELINE_CHUNK)
                    n = os.readv(fd, [view])
                    if n == 0:
                        break
                    hashing.took(n)
                    n_total += n
                    tell(n)
                digest = hashing.finish()[algo]
            finally:
                hashing.stop()
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        out.files += 1
        out.bytes_read += n_total
        if n_total != rec["size"] or digest != rec[algo]:
            why = (f"read back {n_total} bytes with {algo.upper()} {digest[:16]}..., "
                   f"the source's was {rec[algo][:16]}... ({rec['size']} bytes)")
            out.mismatches.append((path, why))
            continue
        rec["read_back"] = True
        state.flush()
    state.flush(force=True)
    return out


def all_read_back(source: str, dest: str) -> bool:
    state = State(state_path(dest), source)
    return bool(state.entries) and all(
        r.get("read_back") or r.get("link") for r in state.entries.values()
        if r.get("type") == "file")
