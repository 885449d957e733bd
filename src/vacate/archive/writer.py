"""``archive()``: sources -> zstd-compressed pax tar parts + manifest + checksums + README.

One read of each file feeds both its sha256 and the compressor (zstd, multi-threaded, frame
checksums on). Parts are closed at member boundaries once they hold ``part_size`` bytes of tar
data; a bigger file goes whole into one part. Directories go last, into the final part, so
that extracting later parts does not disturb their mtimes.

Files are read as the walk meets them (depth-first, name-sorted); nothing is held per entry
once it is written: its manifest and SHA256SUMS lines go to the part's spool, then into the
part's sidecar (:mod:`vacate.archive.partial`), and the directories, one record each, wait
for the final part. At 202,001 entries the peak is ~80 MB, where holding the walk's list, the
entries and their lines took ~500 MB (``tests/archive/test_archive_scale.py``). With a
``progress`` callback the files' total size comes from a walk of its own first.

Crash safety and resume: for each finished part we first store its sidecar
(``.vacate-partial/part-N.json``: its sha256, the entries it holds, their SHA256SUMS lines),
then commit the part itself (temp name -> fsync -> rename, or S3 multipart completion). A
part counts as done only when both exist and the size matches; a rerun with the same name
skips every path that a done part holds (looked up in a temporary sqlite3 set made from the
sidecars) and carries on. The manifest and SHA256SUMS are copied from the sidecars last; the
manifest's presence marks the archive complete.

Threads: the main thread walks, reads and feeds zstd (whose workers compress), and gathers
the part's bytes in stage buffers (``gather.Stager``; incompressible chunks are read straight
into their raw blocks there); the hash lanes, one per CPU, hash the files side by side, each
file in one lane (its holes in one call, so a huge sparse file keeps one core busy while the
next files are read and hashed on the others); the output lane hashes each stage buffer (the
part's sha256); the write lane stores it; the finisher lane commits each finished part
(sidecar, fsync, rename) while the next one is produced, in part order, so a part is renamed
only once it is synced and every part before it is renamed. Memory is bounded by the lanes'
queue depths (each lane holds at most ``depth`` calls).

What goes in is what each source holds (:mod:`vacate.archive.source`); what it holds but the
archive does not (vanished, replaced or unreadable while archived) is named in the result
and in the manifest's header (``left_out``), beside what was excluded as asked
(``excluded``) and the notes (sockets, mounts below). Onto a complete archive of the same
sources, nothing is written: it is up to date, or :mod:`vacate.archive.changes` names what
changed since.
"""

from __future__ import annotations

import collections
import errno
import grp
import hashlib
import json
import os
import pwd
import queue
import stat as S
import threading
import time
import typing
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace

from vacate import __version__
from vacate.archive import changes, compress, gather, partial, source, tarfmt
from vacate.archive import manifest as mf
from vacate.archive.catalog import Catalog
from vacate.archive.source import SourceEntry, arc_roots, walk
from vacate.archive.target import Target, WriteError
from vacate.archive.verify import load_manifest
from vacate.observing import fsio
from vacate.observing.compat import SLOTS
from vacate.observing.errors import EXIT_IN_USE, EXIT_OK, EXIT_UNKNOWN, UsageError
from vacate.observing.model.common import Problem

CHUNK = 2 << 20        # read size of big files (into reused buffers; fewer lane handoffs than
                       # 1 MiB, measured ~0.2 CPU-s less on the benchmark tree)
SMALL = 1 << 20        # files up to this are read, hashed and written whole, on the main thread
MAX_LANES = 32         # files hashed side by side at most
INFLIGHT = 64          # CHUNKs read and not hashed yet, all lanes together (128 MiB)
HELD = 4096            # entries of a part held while a big file before them is hashing
_ZEROS = memoryview(bytes(CHUNK))
Progress = typing.Callable[[int, int], None]   # (bytes done, bytes total); typing's: 3.8


@dataclass(frozen=True, **SLOTS)
class ArchiveResult:
    """What `vacate archive` wrote."""
    location: str
    name: str
    parts: tuple[mf.PartInfo, ...]
    entries: int
    files: int
    bytes_read: int
    bytes_written: int
    resumed_parts: int
    changed: tuple[str, ...]           # files that changed while being read
    warnings: tuple[Problem, ...]
    elapsed_s: float
    reused_upload_bytes: int = 0       # S3: pieces of an interrupted upload not sent again
    missing: tuple[str, ...] = ()      # what the sources hold that is not in the archive
    excluded: tuple[str, ...] = ()     # archive paths left out as asked
    destination_inside: tuple[str, ...] = ()  # the archive's own directory inside a source
    bytes_hashed: int = 0              # the files' whole sizes, holes included (all hashed)
    up_to_date: bool = False           # a complete archive was there, the sources unchanged
    changed_since: tuple[str, ...] = ()  # ... or what changed in them since it was made


def exit_code(r: ArchiveResult) -> int:
    """0 done or up to date; 1 changed while read, left out, or changed since; 3 unreadable."""
    if r.changed or r.changed_since:
        return EXIT_IN_USE            # something was archived while it changed, or since
    if any(w.blocks_verdict for w in r.warnings):
        return EXIT_UNKNOWN           # something could not be read: the archive is not whole
    if r.missing:
        return EXIT_IN_USE            # something the sources hold is not in the archive
    return EXIT_OK


class _Lane:
    """One worker thread running calls in order, behind a bounded queue (bounded memory).
    hashlib and file writes release the GIL, so the lanes run beside the main thread (reads)
    and zstd's workers. An error in the lane is raised at the next call or ``drain()``; the
    calls queued behind it are not made (those given an ``undo`` run it instead)."""

    def __init__(self, depth: int = 8):
        self.q: queue.Queue = queue.Queue(maxsize=depth)
        self.err: BaseException | None = None
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        while (item := self.q.get()) is not None:
            try:
                self._one(*item)
            finally:
                self.q.task_done()

    def _one(self, fn, args, fut, undo) -> None:
        if self.err is not None:
            if undo is not None:
                try:
                    undo()
                except Exception:  # noqa: BLE001, S110 (cleanup: the first error is kept)
                    pass
            if fut is not None:
                fut.set_exception(self.err)
            return
        try:
            r = fn(*args)
        except BaseException as e:  # noqa: BLE001 (handed to the main thread)
            self.err = e
            if fut is not None:
                fut.set_exception(e)
            return
        if fut is not None:
            fut.set_result(r)

    @property
    def load(self) -> int:
        """Calls queued or running."""
        return self.q.unfinished_tasks

    def call(self, fn, *args, undo: Callable[[], object] | None = None) -> None:
        """Queue ``fn(*args)``. ``undo``: what is done instead when an earlier call failed and
        ``fn`` is not made (it is not run when ``call`` itself raises: nothing was queued)."""
        if self.err is not None:
            raise self.err
        self.q.put((fn, args, None, undo))

    def value(self, fn, *args) -> Future:
        fut: Future = Future()
        self.q.put((fn, args, fut, None))
        return fut

    def drain(self) -> None:
        self.value(lambda: None).result()
        if self.err is not None:
            raise self.err

    def drain_quietly(self) -> None:
        self.value(lambda: None).exception()

    def close(self) -> None:
        self.q.put(None)
        self.t.join()


class _Part:
    def __init__(self, target: Target, name: str, level: int, threads: int, lane: _Lane,
                 wlane: _Lane, buffers: compress.BufferPool):
        self.name = name
        self.sink = target.create(name)
        self.out = gather.Stager(self.sink, lane, wlane, buffers)
        self.lane = lane
        self.wlane = wlane
        try:                           # the stager is fed by a zstd child's output pump, or
            self.z = compress.compressor(  # by this thread, within the library's calls
                self.out.write, level, threads, raw_out=self.out.write_raw)
        except BaseException:
            self.sink.abort()          # nothing was written to it yet
            raise
        self.tar_bytes = 0
        self.lines = partial.Spool()    # the manifest lines of the entries written
        # entries not written to ``lines`` yet, in order: the first is a big file whose
        # sha256 (a Future) is still hashing (at most HELD entries wait behind it)
        self.held: collections.deque = collections.deque()
        self.inodes: dict[str, list] = {}

    def write(self, data) -> None:
        self.z.write(data)
        self.tar_bytes += len(data)

    def add(self, e: mf.Entry, sha: Future | None = None) -> None:
        """``e`` is in the part; ``sha``: its sha256 while it is still hashing."""
        self.held.append((e, sha))
        self._spool(wait=len(self.held) > HELD)

    def _spool(self, wait: bool) -> None:
        """Entries to ``lines`` in order, up to the first still hashing (``wait``: the first
        one's hash is waited for)."""
        held = self.held
        while held:
            e, sha = held[0]
            if sha is not None:
                if not (wait or sha.done()):
                    return
                e = replace(e, sha256=sha.result())
                wait = False
            self.lines.add(e)
            held.popleft()

    def abort(self) -> None:
        self.z.abort()
        self.lane.drain_quietly()
        self.wlane.drain_quietly()
        self.sink.abort()
        self.lines.close()

    def finish(self) -> mf.PartInfo:
        self.write(tarfmt.END_OF_ARCHIVE)
        self.z.close()
        self.out.close()
        self.lane.drain()
        self.wlane.drain()
        while self.held:
            self._spool(wait=True)
        for v in self.inodes.values():
            if isinstance(v[2], Future):
                v[2] = v[2].result()
        return mf.PartInfo(self.name, self.out.h.hexdigest(), self.out.n, self.tar_bytes,
                           self.lines.count)


class _Names:
    def __init__(self):
        self.users: dict[int, str] = {}
        self.groups: dict[int, str] = {}

    def user(self, uid: int) -> str:
        if uid not in self.users:
            try:
                self.users[uid] = pwd.getpwuid(uid).pw_name
            except KeyError:
                self.users[uid] = ""
        return self.users[uid]

    def group(self, gid: int) -> str:
        if gid not in self.groups:
            try:
                self.groups[gid] = grp.getgrgid(gid).gr_name
            except KeyError:
                self.groups[gid] = ""
        return self.groups[gid]


def _data_segments(fd: int, size: int, st) -> tuple[tuple[int, int], ...] | None:
    """Data segments of a file with holes (SEEK_DATA/SEEK_HOLE), or None if it is dense."""
    if size == 0 or st.st_blocks * 512 >= size:
        return None
    segs = []
    pos = 0
    try:
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:       # ENXIO: only a hole from here to the end
                break
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            if end > start:
                segs.append((start, end - start))
            pos = end
    except OSError:
        return None
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
    if len(segs) == 1 and segs[0] == (0, size):
        return None
    if not segs or segs[-1][0] + segs[-1][1] < size:
        segs.append((size, 0))   # GNU tar marks a trailing hole with an empty last segment
    return tuple(segs)


class _Writer:
    def __init__(self, target: Target, name: str, part_size: int, level: int, threads: int,
                 progress: Progress | None):
        self.target = target
        self.name = name
        self.part_size = part_size
        self.level, self.threads = level, threads
        self.progress = progress
        self.names = _Names()
        self.parts: list[mf.PartInfo] = []
        self.part: _Part | None = None
        self.hardlinks: dict[tuple[int, int], tuple[bytes, int, str]] = {}  # -> path, group, sha
        self.problems: list[Problem] = []
        self.changed: list[str] = []
        self.done_bytes = 0
        self.total_bytes = 0
        self.bytes_read = 0
        self._last_progress = 0.0
        # files are hashed side by side, each in one lane (hashlib releases the GIL): a
        # file's holes are one call, so a big sparse file keeps one core busy while the main
        # thread goes on to the next files, whose hashes run on the other cores
        self.hash_lanes = [_Lane() for _ in range(hash_lanes())]
        # chunks read but not hashed yet, in all lanes together (the memory they hold)
        self.inflight = threading.BoundedSemaphore(INFLIGHT)
        self._tick_lock = threading.Lock()
        self.reused = 0
        self.out_lane = _Lane()
        self.write_lane = _Lane()
        self.read_pool = compress.BufferPool(CHUNK)
        self.stage_pool = gather.pool()
        self.finisher = _Lane(depth=1)    # finished parts waiting for their commit

    # -- parts -----------------------------------------------------------------------------

    def _open_part(self) -> _Part:
        if self.part is None:
            self.part = _Part(self.target, mf.part_name(len(self.parts) + 1), self.level,
                              self.threads, self.out_lane, self.write_lane, self.stage_pool)
        return self.part

    def _close_part(self) -> None:
        p = self.part
        if p is None:
            return
        info = p.finish()
        # the sidecar (with the part's manifest lines) and the commit (fsync, rename) are
        # made in the finisher lane, in part order, while the next part is produced;
        # archive() waits for the lane before it writes the manifest. Once a commit there
        # failed, the parts queued behind it are aborted (a part is committed only after
        # every part before it); while this call raises, the part is still ours to abort
        self.finisher.call(self._commit, p.sink, info, p.inodes, p.lines,
                           undo=lambda: (p.sink.abort(), p.lines.close()))
        self.parts.append(info)
        self.part = None

    def _commit(self, sink, info: mf.PartInfo, inodes: dict, lines: partial.Spool) -> None:
        try:
            partial.store(self.target, info, inodes, lines)
            sink.commit()
        except BaseException:
            sink.abort()
            raise
        finally:
            lines.close()
        self.reused += getattr(sink, "reused_bytes", 0)

    def _tick(self, n: int) -> None:
        """``n`` more bytes done (read, or hashed as a hole: called from the hash lanes)."""
        with self._tick_lock:
            self.done_bytes += n
            if self.progress is None:
                return
            now = time.monotonic()
            if now - self._last_progress <= 0.2:
                return
            self._last_progress = now
            done = self.done_bytes
        self.progress(done, self.total_bytes)

    def _read_ahead(self) -> None:
        """Wait until one more chunk may be read before its hash is done (a lane that failed
        releases nothing: its error is raised instead)."""
        while not self.inflight.acquire(timeout=1):
            for ln in self.hash_lanes:
                if ln.err is not None:
                    raise ln.err

    def _hashed(self, fn, *args) -> None:
        """``fn(*args)`` (hashing data read into a buffer, in a hash lane), then one more
        buffer may be read ahead."""
        try:
            fn(*args)
        finally:
            self.inflight.release()

    def _lane(self) -> _Lane:
        """The hash lane with the least work queued or running (a file's hash runs in one
        lane)."""
        return min(self.hash_lanes, key=lambda ln: ln.load)

    # -- members ---------------------------------------------------------------------------

    def add(self, se: SourceEntry) -> None:
        st = se.st
        kind = tarfmt.type_of_mode(st.st_mode)
        common = {"mode": S.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
                  "user": self.names.user(st.st_uid), "group": self.names.group(st.st_gid),
                  "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}
        if kind == "file":
            key = (st.st_dev, st.st_ino)
            if st.st_nlink > 1 and key in self.hardlinks:
                first, group, sha = self.hardlinks[key]
                if isinstance(sha, Future):
                    sha = sha.result()
                self._simple(mf.Entry(se.arcpath, "hardlink", "", size=st.st_size, link=first,
                                      hardlink_group=group, sha256=sha, **common))
                return
            self._file(se, common)
        elif kind == "symlink":
            try:
                link = os.readlink(se.abspath)
            except OSError as e:
                self._vanished(se, e)
                return
            self._simple(mf.Entry(se.arcpath, "symlink", "", link=link, **common))
        elif kind in ("char", "block"):
            self._simple(mf.Entry(se.arcpath, kind, "",
                                  rdev=(os.major(st.st_rdev), os.minor(st.st_rdev)), **common))
        elif kind == "fifo":
            self._simple(mf.Entry(se.arcpath, "fifo", "", **common))

    def _vanished(self, se: SourceEntry, e: OSError) -> None:
        """``se`` could not be opened or read: gone, replaced, or unreadable."""
        if e.errno == errno.ELOOP:          # a symlink now holds the name (O_NOFOLLOW)
            e = fsio.Replaced(se.abspath)
        source.note_error(self.problems, se.abspath, e)

    def _member(self, e: mf.Entry, sparse=None) -> tarfmt.Member:
        rdev = e.rdev or (0, 0)
        return tarfmt.Member(path=e.path, type=e.type, size=e.size, mode=e.mode, uid=e.uid,
                             gid=e.gid, uname=e.user.encode(), gname=e.group.encode(),
                             mtime_ns=e.mtime_ns, linkpath=e.link or b"", devmajor=rdev[0],
                             devminor=rdev[1], sparse=sparse)

    def _simple(self, e: mf.Entry) -> None:
        part = self._open_part()
        e = replace(e, part=part.name)
        part.write(tarfmt.header(self._member(e)))
        part.add(e)
        self._after_member()

    def _file(self, se: SourceEntry, common: dict) -> None:
        try:
            fd = fsio.open_checked(se.abspath, os.O_RDONLY, se.st)
        except OSError as e:
            self._vanished(se, e)
            return
        try:
            st = os.fstat(fd)
            common.update(mode=S.S_IMODE(st.st_mode), uid=st.st_uid, gid=st.st_gid,
                          mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns)
            self._file_fd(se, fd, st, common)
        finally:
            os.close(fd)

    def _file_fd(self, se: SourceEntry, fd: int, st, common: dict) -> None:
        size = st.st_size
        part = self._open_part()
        segs = _data_segments(fd, size, st)
        h = hashlib.sha256()
        short = False
        small = segs is None and size <= SMALL
        lane = None if small else self._lane()
        if small:
            # the lean path of the many small files: one header call, one read, one write
            data = os.read(fd, size) if size else b""
            while len(data) < size:
                more = os.read(fd, size - len(data))
                if not more:
                    break
                data += more
            short = len(data) < size
            if short:
                data += bytes(size - len(data))
            h.update(data)
            part.write(b"".join((tarfmt.file_header(
                se.arcpath, size, common["mode"], common["uid"], common["gid"],
                common["user"].encode(), common["group"].encode(), common["mtime_ns"]),
                data, _ZEROS[:tarfmt.padding(size)])))
            self.bytes_read += size
            self._tick(size)
        else:
            part.write(tarfmt.header(tarfmt.Member(
                path=se.arcpath, type="file", size=size, mode=common["mode"],
                uid=common["uid"], gid=common["gid"], uname=common["user"].encode(),
                gname=common["group"].encode(), mtime_ns=common["mtime_ns"], sparse=segs)))
            stored = 0
            pos = 0
            direct = part.z.direct
            for off, length in segs or ((0, size),):
                if pos < off:                # a hole: hash its zeros, store nothing
                    lane.call(_hash_zeros, h, off - pos, self._tick)
                    pos = off
                if length:
                    os.lseek(fd, off, os.SEEK_SET)
                left = length
                while left:
                    n = min(CHUNK, left)
                    if direct and n >= compress.PROBE_MIN and \
                            part.z.incompressible_at(fd, off + length - left, n):
                        # weights: read straight into the part's raw blocks (no copy)
                        part.z.raw_begin()
                        slots, holds, ended = part.out.read_raw(fd, n)
                        self._read_ahead()
                        lane.call(self._hashed, gather.hash_slices, h, slots, holds)
                        part.tar_bytes += n
                        short = short or ended
                        left -= n
                        self.bytes_read += n
                        self._tick(n)
                        continue
                    buf = self.read_pool.get()
                    data = memoryview(buf)[:min(CHUNK, left)]
                    got = os.readv(fd, [data])
                    if got:
                        data = data[:got]
                    else:
                        short = True
                        data[:] = _ZEROS[:len(data)]
                    self._read_ahead()
                    lane.call(self._hashed, h.update, data)
                    part.write(data)
                    lane.call(self.read_pool.put, buf)   # after its hash
                    left -= len(data)
                    self.bytes_read += len(data)
                    self._tick(len(data))
                pos = off + length
                stored += length
            if segs is not None:
                stored += len(tarfmt.sparse_map_block(segs))
            part.write(bytes(tarfmt.padding(stored)))
        after = os.fstat(fd)
        changed = short or (after.st_size, after.st_mtime_ns, after.st_ctime_ns) != \
            (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        # a big file's hash finishes in the hash lane; the part resolves it before it closes
        sha: str | Future = h.hexdigest() if small else lane.value(h.hexdigest)
        group = None
        if st.st_nlink > 1:
            group = len(self.hardlinks) + 1
            self.hardlinks[(st.st_dev, st.st_ino)] = (se.arcpath, group, sha)
            part.inodes[f"{st.st_dev}:{st.st_ino}"] = [os.fsdecode(se.arcpath), group, sha]
        e = mf.Entry(se.arcpath, "file", part.name, size=size, sparse=segs is not None,
                     sha256=sha if isinstance(sha, str) else None, hardlink_group=group,
                     changed=changed, **common)
        if changed:
            p = os.fsdecode(se.abspath)
            self.changed.append(p)
            self.problems.append(Problem("changed-while-read",
                                         f"{p} changed while it was archived; archive it again "
                                         "once nothing writes to it", p, blocks_verdict=True))
        part.add(e, sha if isinstance(sha, Future) else None)
        self._after_member()

    def _after_member(self) -> None:
        if self.part is not None and self.part.tar_bytes >= self.part_size:
            self._close_part()

    def add_dirs(self, dirs: list[SourceEntry]) -> None:
        """All directories, in the final part (after every file they hold)."""
        if not dirs:
            return
        part = self._open_part()
        # depth-first pre-order, as tar itself writes: GNU tar applies a directory's mtime
        # once it leaves that directory, so nothing may be created in it afterwards
        for se in sorted(dirs, key=lambda d: d.arcpath.split(b"/")):
            st = se.st
            e = mf.Entry(se.arcpath, "dir", part.name, mode=S.S_IMODE(st.st_mode),
                         uid=st.st_uid, gid=st.st_gid, user=self.names.user(st.st_uid),
                         group=self.names.group(st.st_gid), mtime_ns=st.st_mtime_ns)
            part.write(tarfmt.header(self._member(e)))
            part.add(e)


def hash_lanes() -> int:
    """How many files are hashed side by side: one per CPU this process may use, up to
    ``MAX_LANES``."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_LANES))


HOLE = 8 << 20
_HOLE_ZEROS = memoryview(bytes(HOLE))


def _hash_zeros(h, n: int, tick: Progress) -> None:
    """Hash a hole of ``n`` bytes as the zeros it reads as (in a hash lane): SHA-256 has no
    shortcut for them, and ``sha256sum -c`` of the restored file must pass."""
    while n:
        k = min(HOLE, n)
        h.update(_HOLE_ZEROS[:k])
        n -= k
        tick(k)


def _of_manifest(target: Target, m: Catalog, t0: float, **kw) -> ArchiveResult:
    """The result for the complete archive ``m`` already at ``target`` (nothing written)."""
    return ArchiveResult(
        location=target.location, name=m.name, parts=m.parts, entries=m.count,
        files=m.files(), bytes_read=0,
        bytes_written=sum(p.bytes for p in m.parts), resumed_parts=len(m.parts),
        changed=tuple(p.decode("utf-8", "surrogateescape") for p in m.changed()),
        warnings=(), elapsed_s=time.monotonic() - t0,
        excluded=tuple(m.extra.get("excluded", ())), **kw)


def _finished_earlier(target: Target, sources: list[str], t0: float) -> ArchiveResult | None:
    """A run killed after writing the manifest but before dropping its state: the archive is
    complete; finish the cleanup and report it (None when there is nothing to finish)."""
    try:
        state = json.loads(target.get(partial.STATE))
    except (FileNotFoundError, KeyError):
        partial.drop(target)      # the empty directory of a cleanup killed at its end
        return None
    if state["sources"] != sources:
        return None
    with load_manifest(target) as m:
        partial.drop(target)
        return _of_manifest(target, m, t0)


def _again(target: Target, roots, src_list: list[str], exclude: frozenset[bytes],
           t0: float) -> ArchiveResult:
    """``archive`` onto a complete archive: up to date when the sources are as archived
    (nothing is written), else what changed since."""
    with load_manifest(target) as m:
        return _again_of(target, m, roots, src_list, exclude, t0)


def _again_of(target: Target, m: Catalog, roots, src_list: list[str],
              exclude: frozenset[bytes], t0: float) -> ArchiveResult:
    if list(m.sources) != src_list:
        raise UsageError(f"{target.location} already holds a complete archive of other "
                         f"sources ({', '.join(m.sources)})",
                         hint="choose another --name, or verify the existing one")
    had = sorted(m.extra.get("excluded", ()))
    if had != sorted(map(os.fsdecode, exclude)):
        raise UsageError(f"{target.location} already holds an archive of these sources made "
                         f"with other exclusions ({', '.join(had) or 'none'})",
                         hint="choose another --name, or pass the same --exclude options")
    problems: list[Problem] = []
    found = changes.since(m, roots, exclude, problems)
    r = _of_manifest(target, m, t0, up_to_date=not found, changed_since=tuple(found))
    return replace(r, warnings=tuple(problems),
                   missing=tuple(p.path for p in problems if source.left_out(p)))


def _arc_of(roots, path: str) -> str:
    """The archive path of the source path ``path``."""
    b = os.fsencode(path)
    for ab, base in roots:
        if b == ab or b.startswith(ab + b"/"):
            return os.fsdecode(base + b[len(ab):])
    return path


def _excluded(roots, exclude: list[str], target: Target) -> frozenset[bytes]:
    """The archive paths never entered: ``exclude`` (each relative to the sources, or
    absolute under one), and the archive itself where it is written inside a source."""
    out = set()
    for x in exclude:
        if os.path.isabs(x):
            b = os.fsencode(os.path.normpath(x))
            hits = [base + b[len(ab):] for ab, base in roots if b.startswith(ab + b"/")]
            if not hits:
                raise UsageError(f"--exclude {x}: not below a source",
                                 hint="name it relative to the source, or absolute under it")
            out.update(hits)
        else:
            rel = os.fsencode(os.path.normpath(x))
            if rel in (b".", b"") or rel == b".." or rel.startswith(b"../"):
                raise UsageError(f"--exclude {x}: not below a source",
                                 hint="name a path inside the source")
            out.update(base + b"/" + rel for _, base in roots)
    return frozenset(out | _dest_inside(roots, target))


def _dest_inside(roots, target: Target) -> set[bytes]:
    """The archive's own directory, as archive paths, where it is written inside a source
    (it is left out: an archive does not hold itself)."""
    out = set()
    if hasattr(target, "root"):
        real = os.fsencode(os.path.realpath(target.root))
        for ab, base in roots:
            rab = os.fsencode(os.path.realpath(ab))
            if real.startswith(rab + b"/"):
                out.add(base + real[len(rab):])
    return out


def archive(sources: list[str], target: Target, name: str, *, part_size: int = 1 << 30,
            level: int = 3, threads: int = -1, progress: Progress | None = None,
            exclude: list[str] = ()) -> ArchiveResult:
    """Archive ``sources`` (what each holds: :mod:`vacate.observing.collectors.contents`) to
    ``target``, or resume an interrupted run of the same name, or, onto a complete archive,
    say whether it is up to date. ``exclude``: paths left out (relative to the sources or
    absolute under one), recorded in the manifest's header. A write that fails
    (:class:`WriteError`) removes what this run started (its temp part; the archive
    directory when no part was committed) before it is raised."""
    t0 = time.monotonic()
    try:
        roots = arc_roots(sources)
    except ValueError as e:
        raise UsageError(str(e)) from None
    for ab, _ in roots:
        if not os.path.lexists(ab):
            raise UsageError(f"{os.fsdecode(ab)}: no such file or directory")
    src_list = [os.fsdecode(ab) for ab, _ in roots]
    excl = _excluded(roots, list(exclude), target)
    compress.require()                   # no zstd at all: said before anything is written
    if mf.MANIFEST in target.list():
        done = _finished_earlier(target, src_list, t0)
        if done is not None:
            return done
        return _again(target, roots, src_list, excl, t0)
    fresh = not target.list(mf.STATE_DIR)
    try:
        return _write(target, name, roots, src_list, excl, part_size, level, threads,
                      progress, t0)
    except WriteError:
        if fresh and not any(n.startswith("part-") for n in target.list()):
            partial.drop(target)          # nothing of it is worth keeping
            if hasattr(target, "remove_dir"):
                target.remove_dir("")
        raise


def _write(target: Target, name: str, roots, src_list: list[str], excl: frozenset[bytes],
           part_size: int, level: int, threads: int, progress: Progress | None,
           t0: float) -> ArchiveResult:
    excl_list = sorted(map(os.fsdecode, excl))
    own = sorted(map(os.fsdecode, _dest_inside(roots, target)))
    state = partial.load(target, src_list, excl_list)
    w = _Writer(target, name, part_size, level, threads, progress)
    done: partial.Done | None = state[2] if state else None   # paths a rerun finds done
    dirs: list[SourceEntry] = []    # one record per directory: they go last

    def todo(problems: list[Problem]):
        """What is left to archive, in the walk's order (depth-first, name-sorted)."""
        for ab, base in roots:
            for se in walk(ab, base, problems, excl):
                if done is None or se.arcpath not in done:
                    yield se

    try:
        target.cleanup_unfinished(keep=frozenset(
            {mf.part_name(len(state[0]) + 1)} if state else ()))
        if state is None:
            target.put(partial.STATE, json.dumps(
                {"sources": src_list, "name": name, "part_size": part_size,
                 "exclude": excl_list,
                 "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode())
        else:
            w.parts, w.hardlinks = state[0], state[1]
        resumed = len(w.parts)
        created = json.loads(target.get(partial.STATE))["created"]
        if progress:                # a walk ahead of the one that reads: the total
            w.total_bytes = sum(se.st.st_size for se in todo([])
                                if S.S_ISREG(se.st.st_mode))
            progress(0, w.total_bytes)
        for se in todo(w.problems):  # each file read as the walk meets it
            if S.S_ISDIR(se.st.st_mode):
                dirs.append(se)
            else:
                w.add(se)
        w.add_dirs(dirs)
        w._close_part()
        w.finisher.drain()
    except BaseException:
        if w.part is not None:
            w.part.abort()             # no write may reach the sink after the abort
        w.finisher.drain_quietly()     # finished parts still commit: a rerun keeps them
        raise
    finally:
        for lane in w.hash_lanes:
            lane.close()
        w.out_lane.close()
        w.write_lane.close()
        w.finisher.close()
        if done is not None:
            done.close()
    if progress:
        progress(w.total_bytes, w.total_bytes)

    notes = [{"code": p.code, "path": _arc_of(roots, p.path), "message": p.message}
             for p in w.problems if p.code in source.NOTES and p.path]
    left = [{"code": p.code, "path": _arc_of(roots, p.path), "message": p.message}
            for p in w.problems if source.left_out(p) and p.path]
    head = mf.Manifest(name=name, created=created, sources=tuple(src_list),
                       parts=tuple(w.parts), entries=(), tool=f"vacate {__version__}",
                       extra={"part_size": part_size, "zstd_level": level,
                              "excluded": excl_list, "notes": notes, "left_out": left})
    entries, files, file_bytes = partial.complete(
        target, head, lambda sums: mf.README_TEXT.format(
            tool=head.tool, created=created, sources=", ".join(src_list),
            check=mf.readme_check(sums)).encode())
    partial.drop(target)
    target.cleanup_unfinished()
    return ArchiveResult(
        location=target.location, name=name, parts=head.parts, entries=entries,
        files=files, bytes_read=w.bytes_read,
        bytes_written=sum(p.bytes for p in head.parts), resumed_parts=resumed,
        changed=tuple(w.changed), warnings=tuple(w.problems),
        elapsed_s=time.monotonic() - t0, reused_upload_bytes=w.reused,
        missing=tuple(p.path for p in w.problems if source.left_out(p)),
        excluded=tuple(x for x in excl_list if x not in own),
        destination_inside=tuple(own), bytes_hashed=file_bytes)
