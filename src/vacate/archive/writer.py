"""``archive()``: sources -> zstd-compressed pax tar parts + manifest + checksums + README.

One read of each file feeds both its sha256 and the compressor (zstd, multi-threaded, frame
checksums on). Parts are closed at member boundaries once they hold ``part_size`` bytes of tar
data; a bigger file goes whole into one part. Directories go last, into the final part, so
that extracting later parts does not disturb their mtimes.

Crash safety and resume: for each finished part we first store its sidecar
(``.vacate-partial/part-N.json``: the entries it holds and its sha256), then commit the part
itself (temp name -> fsync -> rename, or S3 multipart completion). A part counts as done only
when both exist and the size matches; a rerun with the same name skips every path that a done
part holds and carries on. The manifest is written last: its presence marks the archive
complete.

Threads (the tree of BENCHMARKS.md "archive (issue 5)" keeps two cores busy): the main thread
walks, reads and feeds zstd (whose workers compress), and gathers the part's bytes in stage
buffers (``stage.Stager``; incompressible chunks are read straight into their raw blocks
there); the hash lane hashes each file; the output lane hashes each stage buffer (the part's
sha256); the write lane stores it; the finisher lane commits each finished part (sidecar,
fsync, rename) while the next one is produced, in part order, so a part is renamed only once
it is synced and every part before it is renamed. Memory is bounded by the lanes' queue
depths (each lane holds at most ``depth`` calls).
"""

from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import queue
import shutil
import stat as S
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace

from vacate import __version__
from vacate.archive import compress, stage, tarfmt
from vacate.archive import manifest as mf
from vacate.archive.source import SourceEntry, arc_roots, walk
from vacate.archive.target import Target
from vacate.errors import UsageError
from vacate.model.common import Problem

CHUNK = 2 << 20        # read size of big files (into reused buffers; fewer lane handoffs than
                       # 1 MiB, measured ~0.2 CPU-s less on the benchmark tree)
SMALL = 1 << 20        # files up to this are read, hashed and written whole, on the main thread
_ZEROS = memoryview(bytes(CHUNK))
Progress = Callable[[int, int], None]     # (bytes done, bytes total)


@dataclass(frozen=True, slots=True)
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


class _Lane:
    """One worker thread running calls in order, behind a bounded queue (bounded memory).
    hashlib and file writes release the GIL, so the lanes run beside the main thread (reads)
    and zstd's workers. An error in the lane is raised at the next call or ``drain()``."""

    def __init__(self, depth: int = 8):
        self.q: queue.Queue = queue.Queue(maxsize=depth)
        self.err: BaseException | None = None
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        while (item := self.q.get()) is not None:
            fn, args, fut = item
            if self.err is not None:
                if fut is not None:
                    fut.set_exception(self.err)
                continue
            try:
                r = fn(*args)
            except BaseException as e:  # noqa: BLE001 (handed to the main thread)
                self.err = e
                if fut is not None:
                    fut.set_exception(e)
                continue
            if fut is not None:
                fut.set_result(r)

    def call(self, fn, *args) -> None:
        if self.err is not None:
            raise self.err
        self.q.put((fn, args, None))

    def value(self, fn, *args) -> Future:
        fut: Future = Future()
        self.q.put((fn, args, fut))
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
        self.out = stage.Stager(self.sink, lane, wlane, buffers)
        self.lane = lane
        self.wlane = wlane
        if use_zstd_process():     # the stager is fed by the child's output pump
            self.z = compress.ProcessCompressor(self.out.write, level, threads)
        else:                      # by this thread, within the compressor's calls
            self.z = compress.LibraryCompressor(self.out.write, level, threads,
                                                raw_out=self.out.write_raw)
        self.tar_bytes = 0
        self.entries: list[mf.Entry] = []
        self.pending: list[tuple[int, Future]] = []    # entries whose sha256 is still hashing
        self.inodes: dict[str, list] = {}

    def write(self, data) -> None:
        self.z.write(data)
        self.tar_bytes += len(data)

    def abort(self) -> None:
        self.z.abort()
        self.lane.drain_quietly()
        self.wlane.drain_quietly()
        self.sink.abort()

    def finish(self) -> mf.PartInfo:
        self.write(tarfmt.END_OF_ARCHIVE)
        self.z.close()
        self.out.close()
        self.lane.drain()
        self.wlane.drain()
        for i, fut in self.pending:
            self.entries[i] = replace(self.entries[i], sha256=fut.result())
        for v in self.inodes.values():
            if isinstance(v[2], Future):
                v[2] = v[2].result()
        return mf.PartInfo(self.name, self.out.h.hexdigest(), self.out.n, self.tar_bytes,
                           len(self.entries))


def use_zstd_process() -> bool:
    """python-zstandard compresses unless VACATE_ZSTD=process (and the zstd command exists):
    the child process measured the same here (2 vCPUs); it may pay off with more cores."""
    return os.environ.get("VACATE_ZSTD") == "process" and shutil.which("zstd") is not None


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
        self.entries: list[mf.Entry] = []
        self.part: _Part | None = None
        self.hardlinks: dict[tuple[int, int], tuple[bytes, int, str]] = {}  # -> path, group, sha
        self.problems: list[Problem] = []
        self.changed: list[str] = []
        self.done_bytes = 0
        self.total_bytes = 0
        self.bytes_read = 0
        self._last_progress = 0.0
        self.hash_lane = _Lane()
        self.reused = 0
        self.out_lane = _Lane()
        self.write_lane = _Lane()
        self.read_pool = compress.BufferPool(CHUNK)
        self.stage_pool = stage.pool()
        self.finisher = _Lane(depth=1)    # finished parts waiting for their commit
        self.entry_lines: list[str] = []  # MANIFEST.jsonl lines of the committed parts
        self.sums: list[bytes] = []       # their SHA256SUMS lines

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
        # the sidecar, the commit (fsync, rename) and the part's manifest and SHA256SUMS lines
        # are made in the finisher lane, in part order, while the next part is produced;
        # archive() waits for the lane before it writes the manifest
        self.finisher.call(self._commit, p.sink, info, p.inodes, p.entries)
        self.parts.append(info)
        self.entries.extend(p.entries)
        self.part = None

    def _commit(self, sink, info: mf.PartInfo, inodes: dict, entries: list) -> None:
        lines = mf.entry_lines(entries)
        side = (f'{{"part": {json.dumps(info.as_json())}, '
                f'"inodes": {json.dumps(inodes, ensure_ascii=True)}, '
                f'"entries": [{", ".join(lines)}]}}').encode("ascii")
        try:
            self.target.put(f"{mf.STATE_DIR}/{info.name}.json", side)
            sink.commit()
        except BaseException:
            sink.abort()
            raise
        self.reused += getattr(sink, "reused_bytes", 0)
        self.entry_lines += lines
        self.sums.append(mf.sums_file(entries))

    def _tick(self, n: int) -> None:
        self.done_bytes += n
        if self.progress is not None:
            now = time.monotonic()
            if now - self._last_progress > 0.2:
                self._last_progress = now
                self.progress(self.done_bytes, self.total_bytes)

    # -- members ---------------------------------------------------------------------------

    def add(self, se: SourceEntry) -> None:
        st = se.st
        kind = tarfmt.type_of_mode(st.st_mode)
        common = {"mode": S.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
                  "user": self.names.user(st.st_uid), "group": self.names.group(st.st_gid),
                  "mtime_ns": st.st_mtime_ns}
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
        self.problems.append(Problem("vanished", f"{os.fsdecode(se.abspath)}: {e.strerror}",
                                     os.fsdecode(se.abspath)))

    def _member(self, e: mf.Entry, sparse=None) -> tarfmt.Member:
        rdev = e.rdev or (0, 0)
        return tarfmt.Member(path=e.path, type=e.type, size=e.size, mode=e.mode, uid=e.uid,
                             gid=e.gid, uname=e.user.encode(), gname=e.group.encode(),
                             mtime_ns=e.mtime_ns, linkpath=e.link or b"", devmajor=rdev[0],
                             devminor=rdev[1], sparse=sparse)

    def _simple(self, e: mf.Entry) -> None:
        part = self._open_part()
        e = _with_part(e, part.name)
        part.write(tarfmt.header(self._member(e)))
        part.entries.append(e)
        self._after_member()

    def _file(self, se: SourceEntry, common: dict) -> None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NOATIME", 0)
        try:
            try:
                fd = os.open(se.abspath, flags)
            except PermissionError:
                fd = os.open(se.abspath, flags & ~getattr(os, "O_NOATIME", 0))
        except OSError as e:
            self._vanished(se, e)
            return
        try:
            st = os.fstat(fd)
            if not S.S_ISREG(st.st_mode):
                self.problems.append(Problem("vanished", f"{os.fsdecode(se.abspath)} was "
                                             "replaced while archiving", os.fsdecode(se.abspath)))
                return
            common.update(mode=S.S_IMODE(st.st_mode), uid=st.st_uid, gid=st.st_gid,
                          mtime_ns=st.st_mtime_ns)
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
            direct = isinstance(part.z, compress.LibraryCompressor)
            for off, length in segs or ((0, size),):
                while pos < off:             # a hole: hash its zeros, store nothing
                    n = min(CHUNK, off - pos)
                    self.hash_lane.call(h.update, _ZEROS[:n])
                    pos += n
                    self._tick(n)
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
                        self.hash_lane.call(stage.hash_slices, h, slots, holds)
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
                    self.hash_lane.call(h.update, data)
                    part.write(data)
                    self.hash_lane.call(self.read_pool.put, buf)   # after its hash
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
        sha: str | Future = h.hexdigest() if small else self.hash_lane.value(h.hexdigest)
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
        if isinstance(sha, Future):
            part.pending.append((len(part.entries), sha))
        part.entries.append(e)
        self._after_member()

    def _after_member(self) -> None:
        if self.part is not None and self.part.tar_bytes >= self.part_size:
            self._close_part()

    def add_dirs(self, dirs: list[SourceEntry]) -> None:
        """All directories, in the final part (after every file they hold)."""
        part = self._open_part()
        # depth-first pre-order, as tar itself writes: GNU tar applies a directory's mtime
        # once it leaves that directory, so nothing may be created in it afterwards
        for se in sorted(dirs, key=lambda d: d.arcpath.split(b"/")):
            st = se.st
            e = mf.Entry(se.arcpath, "dir", part.name, mode=S.S_IMODE(st.st_mode),
                         uid=st.st_uid, gid=st.st_gid, user=self.names.user(st.st_uid),
                         group=self.names.group(st.st_gid), mtime_ns=st.st_mtime_ns)
            part.write(tarfmt.header(self._member(e)))
            part.entries.append(e)


def _with_part(e: mf.Entry, part: str) -> mf.Entry:
    from dataclasses import replace
    return replace(e, part=part)


def _load_state(target: Target, sources: list[str], part_size: int):
    """Done parts of an interrupted run with the same name: (parts, entries, inodes)."""
    state_raw = None
    try:
        state_raw = target.get(f"{mf.STATE_DIR}/state.json")
    except (FileNotFoundError, KeyError):
        return None
    state = json.loads(state_raw)
    if state["sources"] != sources:
        raise UsageError(
            f"{target.location} holds an unfinished archive of other sources "
            f"({', '.join(state['sources'])})",
            hint="use another --name, or the same sources to resume it")
    files = target.list()
    sides = target.list(mf.STATE_DIR)
    parts, entries, inodes = [], [], {}
    n = 1
    while True:
        pname = mf.part_name(n)
        side = f"{mf.STATE_DIR}/{pname}.json"
        if side not in sides:
            break
        d = json.loads(target.get(side))
        info = mf.PartInfo.from_json(d["part"])
        if files.get(pname) != info.bytes:
            break            # the sidecar was stored but the part never committed
        parts.append(info)
        entries.extend(mf.Entry.from_json(x) for x in d["entries"])
        for k, (p, g, sha) in d["inodes"].items():
            dev, ino = map(int, k.split(":"))
            inodes[(dev, ino)] = (os.fsencode(p), g, sha)
        n += 1
    # anything beyond the done parts is debris from the interrupted part
    for name in list(sides):
        if name.endswith(".json") and name != f"{mf.STATE_DIR}/state.json":
            k = int(name.rsplit("part-", 1)[1].split(".")[0])
            if k > len(parts):
                target.delete(name)
    for name in files:
        if name.startswith("part-") and name.endswith(".tar.zst") \
                and int(name[5:11]) > len(parts):
            target.delete(name)
    return parts, entries, inodes


def _drop_state(target: Target) -> None:
    for k in target.list(mf.STATE_DIR):
        target.delete(k)
    if hasattr(target, "remove_dir"):
        target.remove_dir(mf.STATE_DIR)


def _finished_earlier(target: Target, sources: list[str], t0: float) -> ArchiveResult | None:
    """A run killed after writing the manifest but before dropping its state: the archive is
    complete; finish the cleanup and report it (None when there is nothing to finish)."""
    try:
        state = json.loads(target.get(f"{mf.STATE_DIR}/state.json"))
    except (FileNotFoundError, KeyError):
        return None
    if state["sources"] != sources:
        return None
    m = mf.loads(target.get(mf.MANIFEST))
    _drop_state(target)
    return ArchiveResult(
        location=target.location, name=m.name, parts=m.parts, entries=len(m.entries),
        files=sum(1 for e in m.entries if e.type == "file"), bytes_read=0,
        bytes_written=sum(p.bytes for p in m.parts), resumed_parts=len(m.parts),
        changed=tuple(e.path.decode("utf-8", "surrogateescape") for e in m.entries
                      if e.changed),
        warnings=(), elapsed_s=time.monotonic() - t0)


def archive(sources: list[str], target: Target, name: str, *, part_size: int = 1 << 30,
            level: int = 3, threads: int = -1, progress: Progress | None = None) -> ArchiveResult:
    t0 = time.monotonic()
    try:
        roots = arc_roots(sources)
    except ValueError as e:
        raise UsageError(str(e)) from None
    for ab, _ in roots:
        if not os.path.lexists(ab):
            raise UsageError(f"{os.fsdecode(ab)}: no such file or directory")
    src_list = [os.fsdecode(ab) for ab, _ in roots]
    if mf.MANIFEST in target.list():
        done = _finished_earlier(target, src_list, t0)
        if done is not None:
            return done
        raise UsageError(f"{target.location} already holds a complete archive",
                         hint="choose another --name, or verify the existing one")
    w = _Writer(target, name, part_size, level, threads, progress)
    state = _load_state(target, src_list, part_size)
    target.cleanup_unfinished(keep=frozenset(
        {mf.part_name(len(state[0]) + 1)} if state else ()))
    done_paths: set[bytes] = set()
    if state is None:
        target.put(f"{mf.STATE_DIR}/state.json", json.dumps(
            {"sources": src_list, "name": name, "part_size": part_size,
             "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode())
        resumed = 0
    else:
        w.parts, w.entries, w.hardlinks = state[0], list(state[1]), state[2]
        w.entry_lines = mf.entry_lines(w.entries)
        w.sums = [mf.sums_file(w.entries)]
        done_paths = {e.path for e in w.entries}
        resumed = len(w.parts)
    created = json.loads(target.get(f"{mf.STATE_DIR}/state.json"))["created"]

    todo: list[SourceEntry] = []
    dirs: list[SourceEntry] = []
    exclude = frozenset()
    if hasattr(target, "root"):          # a local archive inside a source is not archived
        exclude = frozenset({os.fsencode(os.path.realpath(target.root))})
    for ab, base in roots:
        for se in walk(ab, base, w.problems, exclude):
            if S.S_ISDIR(se.st.st_mode):
                dirs.append(se)
            elif se.arcpath not in done_paths:
                todo.append(se)
                if S.S_ISREG(se.st.st_mode):
                    w.total_bytes += se.st.st_size
    if progress:
        progress(0, w.total_bytes)
    try:
        for se in todo:
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
        w.hash_lane.close()
        w.out_lane.close()
        w.write_lane.close()
        w.finisher.close()
    if progress:
        progress(w.total_bytes, w.total_bytes)

    m = mf.Manifest(name=name, created=created, sources=tuple(src_list), parts=tuple(w.parts),
                    entries=tuple(w.entries), tool=f"vacate {__version__}",
                    extra={"part_size": part_size, "zstd_level": level})
    target.put(mf.SUMS, b"".join(w.sums))
    target.put(mf.PART_SUMS, mf.part_sums_file(m.parts))
    target.put(mf.README, mf.README_TEXT.format(
        tool=m.tool, created=created, sources=", ".join(src_list)).encode())
    target.put(mf.MANIFEST, m.dumps(w.entry_lines))      # last: marks the archive complete
    _drop_state(target)
    target.cleanup_unfinished()
    return ArchiveResult(
        location=target.location, name=name, parts=m.parts, entries=len(m.entries),
        files=sum(1 for e in m.entries if e.type == "file"), bytes_read=w.bytes_read,
        bytes_written=sum(p.bytes for p in m.parts), resumed_parts=resumed,
        changed=tuple(w.changed), warnings=tuple(w.problems),
        elapsed_s=time.monotonic() - t0, reused_upload_bytes=w.reused)
