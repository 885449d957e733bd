"""``write_native()``: ``zfs send`` of a snapshot, compressed by ``zstd``, into parts with
``SHA256SUMS``, a README and the manifest (:mod:`vacate.archive.zfs_names`).

The stream runs ``zfs send … | (this process) | zstd -T0 -LEVEL`` : this process moves the
stream on with ``splice`` (no copy through Python), after reading its first records for the
toguid, and counts its bytes; zstd's output is cut into parts, each hashed and written
durably (temp, fsync, rename, fsync the directory) as it fills. Meanwhile a thread walks the
snapshot's tree into ``ZFS-TREE.jsonl`` (:mod:`vacate.archive.zfs_tree`: what verify compares
the received tree with, so that it need not read the source again); the send, bound by zstd,
hides most of its cost. ``SHA256SUMS`` and the README follow, the manifest last: a directory without it is an unfinished archive. zfs-fuse 0.7 has
no resumable send, so a rerun after an interruption removes what the unfinished run left and
sends again from the start; a rerun onto a finished archive of the same snapshot is a no-op.
"""

from __future__ import annotations

import hashlib
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable

from vacate.archive import zfs_names as zn
from vacate.archive import zfs_tool, zfs_tree
from vacate.archive.manifest import MANIFEST as TAR_MANIFEST
from vacate.archive.target import LocalTarget
from vacate.archive.zfs_stream import StreamError, Walker
from vacate.observing.compat import SLOTS, widen_pipe
from vacate.observing.errors import UsageError, VacateError

CHUNK = 1 << 20
PIPE_BYTES = 1 << 20         # each of zstd's pipes
HEAD_LIMIT = 1 << 20          # read at most this much of the stream for its toguid
STALL_S = 600.0               # the longest wait for the next compressed bytes
Progress = Callable[[str, int], None]


@dataclass(frozen=True, **SLOTS)
class NativeArchiveResult:
    """What write_native() wrote (or found finished already: ``up_to_date``)."""

    location: str
    manifest: zn.NativeManifest
    snapshot_taken: bool
    up_to_date: bool
    elapsed_s: float
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return 0


def _none(phase: str, n: int) -> None:
    pass


def split_origin(origin: str) -> tuple[str, str]:
    """``DATASET@SNAP`` → (dataset, snap), each checked; raises UsageError."""
    dataset, at, snap = origin.partition("@")
    if not at or not snap:
        raise UsageError(f"{origin!r} names no snapshot", hint="name it: DATASET@SNAP")
    if why := zn.dataset_error(dataset):
        raise UsageError(f"{dataset!r}: {why}")
    if why := zn.snapshot_error(snap):
        raise UsageError(f"{snap!r}: {why}")
    return dataset, snap


def write_native(dataset: str, snapshot: str, target: LocalTarget, name: str, *,
                 part_size: int = 10**9, level: int = 3, send_flags: tuple[str, ...] = ("-p",),
                 take_snapshot: bool = False, progress: Progress = _none
                 ) -> NativeArchiveResult:
    """Archive ``dataset@snapshot`` into ``target`` (a local directory) as ``name``'s parts.
    ``take_snapshot``: take it first where it is not there yet (the plan takes its own).
    ``progress(phase, n)``: ``snapshot``, ``send``, ``part-writing`` (n: the stream's bytes
    sent so far), ``part`` (n: the part committed, from 0), ``tree`` (n: its entries),
    ``sums``, ``readme``, ``manifest`` (the archive is finished)."""
    t0 = time.monotonic()
    origin = f"{dataset}@{snapshot}"
    bad = [f for f in send_flags if f not in zn.SEND_FLAGS]
    if bad:
        raise UsageError(f"vacate does not send with {' '.join(bad)}",
                         hint=f"the flags every ZFS can receive: {' '.join(zn.SEND_FLAGS)}")
    if shutil.which("zstd") is None:
        raise UsageError("zstd is not installed here", hint="install zstd")
    taken = False
    if take_snapshot:
        taken = zfs_tool.snapshot(dataset, snapshot)
        progress("snapshot", 0)
    elif not zfs_tool.exists(origin):
        raise UsageError(f"no snapshot {origin}",
                         hint="take it (zfs snapshot), or pass --take-snapshot")
    p = zfs_tool.props(origin, "guid", "createtxg", "creation", "referenced")
    here = target.list()
    if TAR_MANIFEST in here:
        raise UsageError(f"{target.location} holds a tar archive",
                         hint="give the native archive a name of its own (--name)")
    if zn.MANIFEST in here:
        m = zn.loads(target.get(zn.MANIFEST))
        if m.name == name and m.origin == origin and m.guid == int(p["guid"]):
            return NativeArchiveResult(target.location, m, taken, True, time.monotonic() - t0)
        raise UsageError(f"{target.location} holds a finished archive of {m.origin} "
                         f"(guid {m.guid}), not of {origin} (guid {p['guid']})",
                         hint="choose another --name or --to")
    _clear_unfinished(target, name, here)
    m0 = zn.NativeManifest(name, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), dataset,
                           snapshot, int(p["guid"]), int(p["createtxg"]), int(p["creation"]),
                           int(p["referenced"]), 0, tuple(send_flags), 0, (), level,
                           zfs_tool.local_props(dataset),
                           tuple(sorted(zfs_tool.props(dataset, *zn.LAYOUT).items())))
    notes = zfs_tree.drop_left(origin, m0.guid, 0.0)     # what a killed run left
    clone = zfs_tree.archive_clone(dataset, m0.guid)
    recorder = zfs_tree.TreeRecorder(dataset, snapshot, clone, target)
    recorder.start()
    try:
        parts, stream_bytes, toguid = _send(origin, m0, target, part_size, progress)
    except BaseException:
        recorder.stop()
        raise
    try:
        tree = recorder.result(STALL_S)
    except VacateError as e:        # the archive stands: verify reads the source instead
        tree = None
        notes.append(f"the snapshot's tree was not recorded ({e.message}): verify will read "
                     "the source snapshot's tree instead")
    progress("tree", tree.entries if tree else 0)
    # -R sends the older snapshots first: the named one's BEGIN comes late in the stream
    # (verify walks it all and finds it there)
    if "-R" not in send_flags and toguid != m0.guid:
        raise VacateError(f"the stream of {origin} names snapshot guid {toguid}, but zfs says "
                          f"its guid is {m0.guid}: nothing is marked finished")
    from dataclasses import replace
    m = replace(m0, toguid=m0.guid, stream_bytes=stream_bytes, parts=tuple(parts), tree=tree)
    target.put(zn.SUMS, zn.sums_file(parts))
    progress("sums", 0)
    target.put(zn.README, zn.readme(m))
    progress("readme", 0)
    target.put(zn.MANIFEST, m.dumps())          # last: the archive is finished
    progress("manifest", 0)
    if recorder.left:               # busy a moment ago: zfs-fuse lets go of it in seconds
        notes += zfs_tree.drop_left(origin, m.guid, zfs_tool.DESTROY_PATIENCE_S)
    return NativeArchiveResult(target.location, m, taken, False, time.monotonic() - t0,
                               tuple(dict.fromkeys(notes)))


def _clear_unfinished(target: LocalTarget, name: str, here: dict[str, int]) -> None:
    """Remove what an interrupted run left: its parts, sums, tree and README, and temp
    files."""
    target.cleanup_unfinished()
    for f in here:
        if zn.is_part(f, name) or f in (zn.SUMS, zn.README, zn.TREE):
            target.delete(f)


class _Pump(threading.Thread):
    """Moves the stream from ``zfs send`` to zstd: the first records read (the toguid),
    the rest spliced; counts the bytes."""

    def __init__(self, src: int, dst: int):
        super().__init__(daemon=True)
        self.src, self.dst = src, dst
        self.bytes = 0
        self.toguid = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._head()
            splice = getattr(os, "splice", None)
            while True:
                n = splice(self.src, self.dst, CHUNK) if splice else self._copy()
                if n == 0:
                    break
                self.bytes += n
        except OSError as e:            # reported by the caller
            self.error = e
        finally:
            os.close(self.dst)

    def _copy(self) -> int:
        data = os.read(self.src, CHUNK)
        self._write(data)
        return len(data)

    def _write(self, data) -> None:
        mv = memoryview(data)
        while mv:
            mv = mv[os.write(self.dst, mv):]

    def _head(self) -> None:
        w = Walker()
        while self.bytes < HEAD_LIMIT:
            data = os.read(self.src, 64 << 10)
            if not data:
                break
            self.bytes += len(data)
            try:
                w.feed(data)
            except StreamError:
                pass          # told by the count and zfs send's status; verify walks it all
            self._write(data)
            if w.toguids:
                self.toguid = w.toguids[0]
                return


def _send(origin: str, m: zn.NativeManifest, target: LocalTarget, part_size: int,
          progress: Progress) -> tuple[list[zn.Part], int, int]:
    with tempfile.TemporaryFile() as err:
        return _sending(origin, m, target, part_size, progress, err)


def _sending(origin: str, m: zn.NativeManifest, target: LocalTarget, part_size: int,
             progress: Progress, err, stall_s: float = STALL_S) -> tuple[list[zn.Part], int, int]:
    send = subprocess.Popen(zfs_tool.send_argv(origin, m.send_flags), stdout=subprocess.PIPE,
                            stderr=err, stdin=subprocess.DEVNULL)
    r, w = os.pipe()
    zstd = subprocess.Popen(["zstd", "-q", "-c", "-T0", f"-{m.level}"], stdin=r,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    os.close(r)
    for fd in (w, zstd.stdout.fileno()):      # room for zstd to run ahead of a slow write
        widen_pipe(fd, PIPE_BYTES)
    pump = _Pump(send.stdout.fileno(), w)
    pump.start()
    progress("send", 0)
    parts: list[zn.Part] = []
    sink = None
    try:
        out = zstd.stdout.fileno()
        buf = bytearray(CHUNK)
        filled = 0
        h = None
        while True:
            if not select.select([out], [], [], stall_s)[0]:
                raise zfs_tool.ZfsError(f"`zfs send {origin}` sent nothing for {stall_s:g} s: "
                                        "stopped (the pool does not answer?); run again to "
                                        "send it from the start")
            n = os.readv(out, [memoryview(buf)[:min(CHUNK, part_size - filled)]])
            if n == 0:
                break
            if sink is None:
                sink = target.create(zn.part_name(m.name, len(parts)))
                h = hashlib.sha256()
            sink.write(memoryview(buf)[:n])
            h.update(memoryview(buf)[:n])
            filled += n
            progress("part-writing", pump.bytes)
            if filled == part_size:
                parts.append(_commit(sink, m.name, len(parts), filled, h, progress))
                sink, filled = None, 0
        if sink is not None:
            parts.append(_commit(sink, m.name, len(parts), filled, h, progress))
            sink = None
        pump.join()
        send.stdout.close()
        if send.wait() != 0:
            err.seek(0)
            raise zfs_tool.ZfsError(f"`zfs send {' '.join(m.send_flags)} {origin}` failed: "
                                    f"{err.read().decode(errors='replace').strip()}")
        if zstd.wait() != 0 or pump.error:
            raise VacateError(f"compressing the stream failed: {pump.error or 'zstd failed'}")
        if not parts:
            raise VacateError(f"`zfs send {origin}` sent nothing")
        return parts, pump.bytes, pump.toguid
    except BaseException:
        if sink is not None:
            sink.abort()
        for p in (send, zstd):
            if p.poll() is None:
                p.kill()
                p.wait()
        raise
    finally:
        zstd.stdout.close()


def _commit(sink, name: str, n: int, size: int, h, progress: Progress) -> zn.Part:
    sink.commit()
    progress("part", n)
    return zn.Part(zn.part_name(name, n), size, h.hexdigest())
