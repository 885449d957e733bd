"""How a part's tar stream is compressed and read back: python-zstandard where it is
importable, else the host's ``zstd`` command; one interface either way.

python-zstandard (0.25, in-process, the default) releases the GIL while it compresses
(measured: a sha256 thread beside it overlaps). Where it is not installed (a far host's
``python3``), or with ``VACATE_ZSTD=process``, a part is compressed by a ``zstd -T0`` child
process instead: we write the tar stream to its stdin and a pump thread hashes and stores what
comes out of its stdout, as ``tar | zstd`` would. On the 2-vCPU machine of BENCHMARKS.md both
measured the same (the CPU sum is the limit there). Both write one standard zstd stream with
content checksums, so the parts are the same format either way: ``zstd -dc PART | tar -x``
restores them. Reading back is the same choice: :func:`decompressor` hands out the
decompressed bytes of a part through the library's stream reader or a ``zstd -d`` child.

:func:`missing` says, without side effects, when neither is there (the planner asks it up
front); :func:`require` raises :class:`ZstdMissing` before anything is written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable

from vacate.observing.errors import VacateError

READ = 1 << 20
PACKAGE = "zstd"            # what provides the command on Debian, Ubuntu, RHEL, Fedora, SUSE
_LIB: list = []             # [python-zstandard or None], once looked for


def library():
    """The ``zstandard`` module, or None where it is not importable (imported once, on first
    use: the modules shipped to a far host must import without it)."""
    if not _LIB:
        try:
            import zstandard
        except ImportError:
            zstandard = None
        _LIB.append(zstandard)
    return _LIB[0]


def command() -> str | None:
    """The path of the ``zstd`` command on PATH, or None."""
    return shutil.which("zstd")


def missing() -> str | None:
    """Why this host cannot write or read an archive (None: it can): neither python-zstandard
    nor the ``zstd`` command is there. Cheap and side-effect free, for a plan to say so up
    front."""
    if library() is not None or command() is not None:
        return None
    return f"neither the zstd command nor python-zstandard is installed: install the " \
           f"package {PACKAGE!r} (apt-get install {PACKAGE} / dnf install {PACKAGE})"


class ZstdMissing(VacateError):
    """Archives cannot be written or read here: no zstd at all (exit 2, before anything is
    written)."""


def require() -> None:
    """Raise :class:`ZstdMissing` where :func:`missing` names a reason."""
    why = missing()
    if why is not None:
        raise ZstdMissing(why, hint=f"install {PACKAGE} on this host and run it again")


def use_process() -> bool:
    """Whether a ``zstd`` child compresses: where python-zstandard is missing, or where
    ``VACATE_ZSTD=process`` asks for it (and the command exists)."""
    if library() is None:
        return True
    return os.environ.get("VACATE_ZSTD") == "process" and command() is not None


class DecompressError(Exception):
    """The compressed stream is not valid zstd (what zstd said)."""


class ProcessCompressor:
    """A part compressed by a ``zstd`` child: ``write()`` feeds its stdin, a pump thread hands
    its stdout to ``out``. Incompressible data is left to zstd (it stores such blocks raw)."""

    direct = False              # no raw blocks read straight into the stage (``raw_begin``)

    def __init__(self, out: Callable[[bytes], None], level: int, threads: int):
        cmd = ["zstd", "-q", "-c", f"-T{max(threads, 0)}", f"-{level}"]
        if level > 19:
            cmd.insert(1, "--ultra")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, bufsize=0)
        self.err: BaseException | None = None
        self.t = threading.Thread(target=self._pump, args=(out,), daemon=True)
        self.t.start()

    def _pump(self, out) -> None:
        try:
            while True:
                b = self.p.stdout.read(READ)
                if not b:
                    break
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

    direct = True               # incompressible data may go straight into raw blocks

    def __init__(self, out: Callable[[bytes], None], level: int, threads: int,
                 raw_out: Callable | None = None):
        class _W:
            def write(self, data) -> int:
                out(data)
                return len(data)

        zstandard = library()
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
            self.zw.flush(library().FLUSH_FRAME)
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
            self.zw.flush(library().FLUSH_FRAME)
        self.zw.close()

    def abort(self) -> None:
        pass


def compressor(out: Callable[[bytes], None], level: int, threads: int,
               raw_out: Callable | None = None):
    """The part's compressor: python-zstandard's, or a ``zstd`` child's (:func:`use_process`);
    :class:`ZstdMissing` where neither is there."""
    require()
    if use_process():
        return ProcessCompressor(out, level, threads)
    return LibraryCompressor(out, level, threads, raw_out=raw_out)


# ---- reading back --------------------------------------------------------------------------

class _LibraryReader:
    """Decompressed bytes through python-zstandard's stream reader (all frames)."""

    def __init__(self, src):
        self.r = library().ZstdDecompressor().stream_reader(src, read_size=2 * READ,
                                                            read_across_frames=True)

    def read(self, n: int) -> bytes:
        try:
            return self.r.read(n)
        except library().ZstdError as e:
            raise DecompressError(str(e)) from None

    def close(self) -> None:
        pass                        # the source is the caller's to close


class _ProcessReader:
    """Decompressed bytes from a ``zstd -q -d -c`` child: a feeder thread writes what
    ``src.read`` gives to its stdin; ``read`` takes its stdout. At the end, zstd's exit status
    tells whether the stream was whole."""

    def __init__(self, src):
        self.p = subprocess.Popen(["zstd", "-q", "-d", "-c"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        self.src = src
        self.err: BaseException | None = None
        self.stderr = b""
        self.t = threading.Thread(target=self._feed, daemon=True)
        self.t.start()
        self.e = threading.Thread(target=self._errors, daemon=True)
        self.e.start()

    def _feed(self) -> None:
        try:
            while True:
                b = self.src.read(2 * READ)
                if not b:
                    break
                self.p.stdin.write(b)
        except BrokenPipeError:
            pass                    # zstd stopped reading: its status says why
        except BaseException as e:  # noqa: BLE001 (raised in the reading thread)
            self.err = e
            self.p.kill()
        finally:
            try:
                self.p.stdin.close()
            except OSError:
                pass

    def _errors(self) -> None:
        self.stderr = self.p.stderr.read()

    def read(self, n: int) -> bytes:
        b = self.p.stdout.read(n)
        if b:
            return b
        self.t.join()
        rc = self.p.wait()
        self.e.join()
        if self.err is not None:
            raise self.err
        if rc != 0:
            said = self.stderr.decode(errors="replace").strip().splitlines()
            raise DecompressError(said[-1][-300:] if said else f"zstd exited with {rc}")
        return b""

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.t.join()
        self.e.join()
        self.p.stdout.close()
        self.p.stderr.close()


def decompressor(src):
    """A reader of the decompressed bytes of the zstd stream ``src.read`` gives (all its
    frames): ``read(n)`` (b"" at the end; :class:`DecompressError` where the stream is not
    valid zstd), ``close()``. python-zstandard where it is importable (and not
    ``VACATE_ZSTD=process``), else a ``zstd`` child; :class:`ZstdMissing` where neither is."""
    require()
    return _ProcessReader(src) if use_process() else _LibraryReader(src)
