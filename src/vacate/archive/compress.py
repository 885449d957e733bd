"""Where a part's tar stream is compressed.

python-zstandard (0.25, in-process, the default) releases the GIL while it compresses
(measured: a sha256 thread beside it overlaps). With ``VACATE_ZSTD=process`` (and the ``zstd`` command
installed) a part is compressed by a ``zstd -T0`` child process instead: we write the tar
stream to its stdin and a pump thread hashes and stores what comes out of its stdout, as
``tar | zstd`` would. On the 2-vCPU machine of BENCHMARKS.md both measured the same (the CPU
sum is the limit there), so the library is the default. Both write one zstd frame with its
content checksum.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable

import zstandard

READ = 1 << 20


class ProcessCompressor:
    def __init__(self, out: Callable[[bytes], None], level: int, threads: int):
        cmd = ["zstd", "-q", "-c", "--no-progress", f"-T{max(threads, 0)}", f"-{level}"]
        if level > 19:
            cmd.insert(1, "--ultra")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, bufsize=0)
        self.err: BaseException | None = None
        self.t = threading.Thread(target=self._pump, args=(out,), daemon=True)
        self.t.start()

    def _pump(self, out) -> None:
        try:
            while b := self.p.stdout.read(READ):
                out(b)
        except BaseException as e:  # noqa: BLE001 (raised in the main thread at close)
            self.err = e
            self.p.kill()

    def write(self, data) -> None:
        mv = memoryview(data)
        while mv:
            n = self.p.stdin.write(mv)
            mv = mv[n:]

    def close(self) -> None:
        self.p.stdin.close()
        self.t.join()
        rc = self.p.wait()
        if self.err is not None:
            raise self.err
        if rc != 0:
            raise OSError(f"zstd exited with {rc}: "
                          f"{self.p.stderr.read().decode(errors='replace')[-500:]}")

    def abort(self) -> None:
        self.p.kill()
        self.p.wait()
        self.t.join()


# Incompressible data (weights, already-compressed files) gets no compressor CPU: each large
# write is probed (a 32 KiB sample at level 1) and a run of incompressible writes is stored
# in raw zstd blocks of its own frame (header + 3-byte block headers, no content checksum:
# the part's sha256 and each file's sha256 cover it). The output stays one standard zstd
# stream of concatenated frames; ``zstd -dc`` decodes it. Level-3 zstd would emit raw blocks
# for such data anyway, after spending ~0.7 CPU-s per GB finding no matches.
PROBE_MIN = 64 << 10           # smaller writes are not probed
KEEP_MODE = 2048               # tar headers and padding stay in whatever frame is open
SAMPLE = 4 << 10               # four samples of this size per probe (~5-40 us at level -1)
INCOMPRESSIBLE = 0.97          # compressed/original of the sample at or above this: store
BATCH = 256 << 10              # small writes are gathered up to this before compressing
RAW_BLOCK = 128 << 10          # zstd's largest block; also the raw frame's window
RAW_FRAME_HEADER = b"\x28\xb5\x2f\xfd" + b"\x00" + b"\x38"   # magic, descriptor, 128 KiB
RAW_LAST_EMPTY = b"\x01\x00\x00"                               # last block, raw, size 0


class BufferPool:
    """Buffers of ``size`` bytes for reuse. A fresh multi-MB ``bytes`` per chunk costs a page
    fault per 4 KiB page on every allocation (glibc hands such sizes back to the kernel):
    measured here, the main thread spent more time in those faults than in the reads. Never
    blocks: the buffers in use are bounded by the lanes' queue depths, since whoever hands a
    buffer to a lane waits while the lane is full; at most ``keep`` wait in the pool."""

    def __init__(self, size: int, keep: int = 32, make: Callable = bytearray):
        self.size = size
        self.keep = keep
        self.make = make             # bytearray, or an anonymous mmap (page-aligned)
        self.free: list = []
        self.lock = threading.Lock()

    def get(self):
        with self.lock:
            if self.free:
                return self.free.pop()
        return self.make(self.size)

    def put(self, buf: bytearray) -> None:
        with self.lock:
            if len(self.free) < self.keep:
                self.free.append(buf)


def raw_size(n: int) -> int:
    """Bytes of ``n`` bytes of data stored in raw blocks."""
    return n + 3 * -(-n // RAW_BLOCK)


def raw_header(n: int) -> bytes:
    """The 3-byte header of a raw block of ``n`` bytes (not the last block)."""
    return (n << 3).to_bytes(3, "little")


def raw_blocks(data) -> bytes:
    """``data`` as raw blocks (3-byte block header, up to 128 KiB of data, ...), in one
    buffer (without a ``raw_out``; the writer's ``Stager`` frames as it copies instead)."""
    mv = memoryview(data)
    k = RAW_BLOCK
    return b"".join([piece for i in range(0, len(mv), k)
                     for piece in (raw_header(min(k, len(mv) - i)),
                                   mv[i:i + k])])


class LibraryCompressor:
    """``out`` receives the compressed stream as bytes. With ``raw_out``, data stored in raw
    blocks goes there instead, as it is: the receiver frames it (3-byte block headers) as it
    copies it to where the part is gathered, before it returns; else ``out`` gets the framed
    blocks."""

    def __init__(self, out: Callable[[bytes], None], level: int, threads: int,
                 raw_out: Callable | None = None):
        class _W:
            def write(self, data) -> int:
                out(data)
                return len(data)

        cctx = zstandard.ZstdCompressor(level=level, threads=threads, write_checksum=True)
        self.zw = cctx.stream_writer(_W(), closefd=False, write_return_read=True)
        self.out = out
        self.probe = zstandard.ZstdCompressor(level=-1)
        self.mode = ""              # "z": a compressed frame is open, "raw": a stored one
        self.pending = bytearray()  # small writes for the compressed frame, gathered
        self.raw_out = raw_out

    def incompressible(self, data) -> bool:
        mv = memoryview(data)
        step = (len(mv) - SAMPLE) // 3
        return self._stored(b"".join(mv[i * step:i * step + SAMPLE] for i in range(4)))

    def incompressible_at(self, fd: int, offset: int, n: int) -> bool:
        """``incompressible()`` of the ``n`` (>= PROBE_MIN) bytes of ``fd`` at ``offset``,
        from the same samples, read with ``pread`` (the data itself is not read yet)."""
        step = (n - SAMPLE) // 3
        return self._stored(b"".join(os.pread(fd, SAMPLE, offset + i * step)
                                     for i in range(4)))

    def _stored(self, sample: bytes) -> bool:
        return len(self.probe.compress(sample)) >= INCOMPRESSIBLE * len(sample)

    def raw_begin(self) -> None:
        """What follows, up to the next ``write()``, goes into raw blocks of a stored frame
        straight from where the caller puts it (``Stager.read_raw``)."""
        if self.mode != "raw":
            self._switch("raw")

    def _flush_pending(self) -> None:
        if self.pending:
            self.zw.write(self.pending)        # consumed whole before write() returns
            del self.pending[:]

    def _switch(self, mode: str) -> None:
        self._flush_pending()
        if self.mode == "z":
            self.zw.flush(zstandard.FLUSH_FRAME)
        elif self.mode == "raw":
            self.out(RAW_LAST_EMPTY)
        if mode == "raw":
            self.out(RAW_FRAME_HEADER)
        self.mode = mode

    def write(self, data) -> None:
        n = len(data)
        if n >= PROBE_MIN:
            mode = "raw" if self.incompressible(data) else "z"
        elif n <= KEEP_MODE and self.mode:
            mode = self.mode
        else:
            mode = "z"
        if mode != self.mode:
            self._switch(mode)
        if mode == "raw":
            if self.raw_out is None:
                self.out(raw_blocks(data))
            else:
                self.raw_out(data)
        elif n < BATCH:                  # small members (tar headers, small files): one
            self.pending += data         # compressor call per BATCH bytes, not per write
            if len(self.pending) >= BATCH:
                self._flush_pending()
        else:
            self._flush_pending()
            self.zw.write(data)

    def close(self) -> None:
        self._flush_pending()
        if self.mode == "raw":
            self._switch("")
        else:
            self.zw.flush(zstandard.FLUSH_FRAME)
        self.zw.close()

    def abort(self) -> None:
        pass


def compressor(out: Callable[[bytes], None], level: int, threads: int,
               use_process: bool | None = None):
    if use_process is None:
        use_process = shutil.which("zstd") is not None
    cls = ProcessCompressor if use_process else LibraryCompressor
    return cls(out, level, threads)
