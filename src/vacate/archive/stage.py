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

from vacate.archive import compress

SIZE = 8 << 20          # a multiple of any block size (O_DIRECT), as the local sink's stage


def pool() -> compress.BufferPool:
    return compress.BufferPool(SIZE, keep=8, make=lambda n: mmap.mmap(-1, n))


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
        self.filled = 0

    def write(self, data) -> None:
        mv = memoryview(data)
        while mv:
            if self.view is None:
                self.buf = self.buffers.get()
                self.view = memoryview(self.buf)
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

    def _ship(self, put) -> None:
        self.lane.call(self._hash, self.view[:self.filled], self.buf, put)
        self.buf = self.view = None
        self.filled = 0

    def _hash(self, v: memoryview, buf, put) -> None:
        self.h.update(v)
        self.n += len(v)
        self.wlane.call(put, v)
        self.wlane.call(self.buffers.put, buf)

    def close(self) -> None:
        if self.filled:
            self._ship(self.sink.write)     # a partial buffer: the sink copies what it keeps
