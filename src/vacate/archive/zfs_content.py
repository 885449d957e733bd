"""A snapshot's data as its ``zfs send`` stream carries it, digested without reading a file
through the filesystem: two snapshots (the source and the one received from an archive) hold
the same data exactly when their digests are equal.

A full stream sends every object's data blocks as WRITE records, objects in ascending order
and each object's blocks by offset; the digest takes each block's object, offset, length and
bytes, one sha256 per object (written to a temp file as 40-byte records, so that memory does
not grow with the number of files), and one over the objects' digests in turn. A block of
zeros is left out, and FREE records (holes) are not taken: a pool that compresses stores
zeros as a hole, and the same data stored either way digests the same. The bonus buffers
(each file's attributes, atime among them) are not taken: a tree walk compares those.

Where two digests differ, :func:`differing` names the objects: ZFS gives a file's object
number as its inode number, and a full receive keeps the numbers, so that a walk of the
received tree can say which paths they are.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass

from vacate.archive import zfs_tool
from vacate.archive.zfs_stream import WRITE, StreamError, Walker
from vacate.observing.compat import SLOTS

CHUNK = 1 << 20
_HEAD = struct.Struct("<QQQ")          # object, offset, length of a block
_ROW = struct.Struct("<Q32s")          # an object and its digest, in the temp file
_ROWS = 4096                           # rows written at a time


@dataclass(frozen=True, **SLOTS)
class Content:
    """A stream's data digested: over ``objects`` objects' ``bytes`` (zeros left out)."""

    digest: str
    objects: int
    bytes: int


class Digester(Walker):
    """Fed a stream's bytes in any pieces (``feed``), walks it as :class:`Walker` does and
    digests its data; ``content()`` at its end. ``close()`` drops the temp file."""

    def __init__(self):
        super().__init__()
        self.rows = tempfile.TemporaryFile()      # noqa: SIM115 (closed by close())
        self.out = bytearray()
        self.total = hashlib.sha256()
        self.obj = -1                     # the object whose blocks are being digested
        self.h = None
        self.objects = self.nbytes = 0
        self.ordered = True               # objects came in ascending order
        self.block = bytearray()
        self.head = b""
        self.zeros: dict[int, bytes] = {}

    def _took(self, typ: int, rec: bytes, payload: int) -> None:
        if typ == WRITE and payload:
            obj, offset, length = struct.unpack_from("<Q", rec, 8)[0], *struct.unpack_from(
                "<QQ", rec, 24)
            self.head = _HEAD.pack(obj, offset, length)
            self.block.clear()

    def _data(self, piece: memoryview, last: bool) -> None:
        if not self.head:
            return
        self.block += piece
        if last:
            self._block()

    def _block(self) -> None:
        head, self.head = self.head, b""
        b = self.block
        n = len(b)
        if not (b[0] or b[-1]):
            z = self.zeros.get(n)
            if z is None:
                z = bytes(n)
                if len(self.zeros) < 16:        # the few block sizes most data has
                    self.zeros[n] = z
            if b == z:
                return
        obj = _HEAD.unpack(head)[0]
        if obj != self.obj:
            self._row()
            if obj < self.obj:
                self.ordered = False
            self.obj, self.h = obj, hashlib.sha256()
        self.h.update(head)
        self.h.update(b)
        self.nbytes += n

    def _row(self) -> None:
        if self.h is not None:
            d = self.h.digest()
            self.total.update(_ROW.pack(self.obj, d))
            self.out += _ROW.pack(self.obj, d)
            self.objects += 1
            self.h = None
            if len(self.out) >= _ROWS * _ROW.size:
                self._flush()

    def _flush(self) -> None:
        self.rows.write(self.out)
        self.out.clear()

    def content(self) -> Content:
        """The digest, once the whole stream was fed; raises StreamError where it was cut
        short."""
        self.end()
        self._row()
        self._flush()
        return Content(self.total.hexdigest(), self.objects, self.nbytes)

    def objects_digested(self):
        """(object, digest) of every object digested, in the stream's order."""
        self.rows.seek(0)
        while data := self.rows.read(_ROWS * _ROW.size):
            yield from _ROW.iter_unpack(data)

    def close(self) -> None:
        self.rows.close()


def differing(a: Digester, b: Digester, limit: int = 20) -> tuple[list[int], int]:
    """The objects whose data differ between two digested streams (the first ``limit``),
    and how many more."""
    if a.ordered and b.ordered:
        pairs = _merged(a.objects_digested(), b.objects_digested())
    else:
        da, db = dict(a.objects_digested()), dict(b.objects_digested())
        pairs = ((o, da.get(o), db.get(o)) for o in sorted(da.keys() | db.keys()))
    out: list[int] = []
    more = 0
    for obj, x, y in pairs:
        if x != y:
            if len(out) < limit:
                out.append(obj)
            else:
                more += 1
    return out, more


def _merged(a, b):
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x[0] < y[0]):
            yield x[0], x[1], None
            x = next(a, None)
        elif x is None or y[0] < x[0]:
            yield y[0], None, y[1]
            y = next(b, None)
        else:
            yield x[0], x[1], y[1]
            x, y = next(a, None), next(b, None)


class SnapshotDigest(threading.Thread):
    """``zfs send SNAPSHOT`` (a full stream of that one snapshot) digested in a thread;
    ``result(stall_s)`` waits for it."""

    def __init__(self, snapshot: str):
        super().__init__(daemon=True, name="snapshot-digest")
        self.snapshot = snapshot
        self.digester = Digester()
        self.content: Content | None = None
        self.error = ""
        self.proc: subprocess.Popen | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            with tempfile.TemporaryFile() as err:
                self.proc = subprocess.Popen(zfs_tool.send_argv(self.snapshot, ()),
                                             stdout=subprocess.PIPE, stderr=err,
                                             stdin=subprocess.DEVNULL)
                fd = self.proc.stdout.fileno()
                buf = bytearray(CHUNK)
                mv = memoryview(buf)
                while not self.stopping.is_set() and (n := os.readv(fd, [buf])):
                    self.digester.feed(mv[:n])
                self.proc.stdout.close()
                if self.stopping.is_set():
                    self.proc.kill()
                if self.proc.wait() != 0:
                    err.seek(0)
                    self.error = (f"`zfs send {self.snapshot}` failed: "
                                  f"{err.read().decode(errors='replace').strip()}")
                    return
            self.content = self.digester.content()
        except (OSError, StreamError) as e:
            self.error = f"the stream of {self.snapshot} could not be digested: {e}"
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def result(self, stall_s: float) -> Content | None:
        """The digest, or None with ``error`` said (also where the stream took nothing for
        ``stall_s``: stopped)."""
        last, since = -1, time.monotonic()
        while True:
            self.join(min(5.0, stall_s))
            if not self.is_alive():
                return self.content
            if self.digester.offset != last:
                last, since = self.digester.offset, time.monotonic()
            elif time.monotonic() - since > stall_s:
                break
        self.stopping.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.join(5.0)
        self.error = (f"`zfs send {self.snapshot}` sent nothing for {stall_s:g} s: stopped "
                      "(the pool does not answer?)")
        return None

    def close(self) -> None:
        self.stopping.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.join(5.0)
        self.digester.close()
