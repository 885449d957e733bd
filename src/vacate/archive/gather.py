"""Where a part's bytes are gathered on their way to the target: page-aligned buffers of
``SIZE`` bytes, each hashed (the part's sha256) with one call in the output lane and then
handed whole to the write lane; the local sink writes such a buffer with ``O_DIRECT`` as it
is, without a copy.

Data stored in raw zstd blocks (weights) arrives unframed, straight from the buffer it was
read into: the 3-byte block headers are put in between as it is copied here, so that copy is
the only one (before, the framing on the main thread and the sink's copy into its own buffer
were two copies of the 1.75 GB of weights of the benchmark tree).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import threading

from vacate.archive import compress

SIZE = 8 << 20          # a multiple of any block size (O_DIRECT), as the local sink's stage


def pool() -> compress.BufferPool:
    return compress.BufferPool(SIZE, keep=8, make=lambda n: mmap.mmap(-1, n))


class Hold:
    """A stage buffer that two lanes read: back to its pool once each has called ``done()``
    (the write lane, once it is stored; the hash lane, when file data was read into it)."""

    __slots__ = ("buf", "left", "lock", "pool")

    def __init__(self, buf, pool: compress.BufferPool):
        self.buf, self.pool, self.left = buf, pool, 1
        self.lock = threading.Lock()

    def take(self) -> None:
        with self.lock:
            self.left += 1

    def done(self) -> None:
        with self.lock:
            self.left -= 1
            last = self.left == 0
        if last:
            self.pool.put(self.buf)


def hash_slices(h, slices: list[memoryview], holds: list[Hold]) -> None:
    """The file's hash over the data that ``read_raw`` read (in the hash lane)."""
    for v in slices:
        h.update(v)
    for hd in holds:
        hd.done()


def _readv_all(fd: int, views: list[memoryview]) -> bool:
    """Fill ``views`` from ``fd``; True when the file ended first (the rest is zeros)."""
    todo = views
    while todo:
        got = os.readv(fd, todo[:1024])           # IOV_MAX
        if not got:
            for v in todo:
                v[:] = bytes(len(v))
            return True
        i = 0
        while i < len(todo) and got >= len(todo[i]):
            got -= len(todo[i])
            i += 1
        todo = todo[i:]
        if got:
            todo = [todo[0][got:], *todo[1:]]
    return False


class Stager:
    """The compressed side of one part. ``write()`` (bytes) and ``write_raw()`` (unframed data
    for raw blocks) are called by one thread, in stream order, and copy before they return;
    ``close()`` ships the rest. ``h`` and ``n`` are the part's sha256 and size once the lanes
    have drained."""

    def __init__(self, sink, lane, wlane, buffers: compress.BufferPool):
        self.sink = sink
        self.put = getattr(sink, "write_aligned", sink.write)
        self.lane = lane              # hashes each buffer, then hands it to ...
        self.wlane = wlane            # ... the write lane, which stores it
        self.buffers = buffers
        self.h = hashlib.sha256()
        self.n = 0
        self.buf = None
        self.view: memoryview | None = None
        self.hold: Hold | None = None
        self.filled = 0
        self.deferred: list | None = None   # buffers filled while a read into them is pending

    def _next(self) -> None:
        self.buf = self.buffers.get()
        self.view = memoryview(self.buf)
        self.hold = Hold(self.buf, self.buffers)

    def write(self, data) -> None:
        mv = memoryview(data)
        while mv:
            if self.view is None:
                self._next()
            k = min(len(mv), SIZE - self.filled)
            self.view[self.filled:self.filled + k] = mv[:k]
            self.filled += k
            if self.filled == SIZE:
                self._ship(self.put)
            mv = mv[k:]

    def write_raw(self, data) -> None:
        mv = memoryview(data)
        k = compress.RAW_BLOCK
        for i in range(0, len(mv), k):
            b = mv[i:i + k]
            self.write(compress.raw_header(len(b)))
            self.write(b)

    def read_raw(self, fd: int, n: int) -> tuple[list[memoryview], list[Hold], bool]:
        """Read ``n`` bytes of ``fd`` (from its offset) straight into raw blocks here, each
        block's header put in front of its slot: no copy. Returns the slots (the file's data,
        in order, for its hash), the holds of the buffers they lie in (taken once each:
        ``hash_slices`` releases them) and whether the file ended first (zeros instead)."""
        slots: list[memoryview] = []
        holds: list[Hold] = []
        self.deferred = []
        k = compress.RAW_BLOCK
        for i in range(0, n, k):
            b = min(k, n - i)
            self.write(compress.raw_header(b))
            while b:
                if self.view is None:
                    self._next()
                if not holds or holds[-1] is not self.hold:
                    self.hold.take()
                    holds.append(self.hold)
                m = min(b, SIZE - self.filled)
                slots.append(self.view[self.filled:self.filled + m])
                self.filled += m
                b -= m
                if self.filled == SIZE:
                    self._ship(self.put)
        deferred, self.deferred = self.deferred, None
        short = _readv_all(fd, slots)
        for item in deferred:                 # now that their data is in them
            self.lane.call(self._hash, *item)
        return slots, holds, short

    def _ship(self, put) -> None:
        item = (self.view[:self.filled], self.hold, put)
        if self.deferred is not None:
            self.deferred.append(item)
        else:
            self.lane.call(self._hash, *item)
        self.buf = self.view = self.hold = None
        self.filled = 0

    def _hash(self, v: memoryview, hold: Hold, put) -> None:
        self.h.update(v)
        self.n += len(v)
        self.wlane.call(put, v)
        self.wlane.call(hold.done)

    def close(self) -> None:
        if self.filled:
            self._ship(self.sink.write)     # a partial buffer: the sink copies what it keeps
