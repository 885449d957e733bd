"""Where a part's tar stream is compressed.

python-zstandard (0.25) holds the GIL while it compresses, so in-process compression
serialises with the hashing threads. With ``VACATE_ZSTD=process`` (and the ``zstd`` command
installed) a part is compressed by a ``zstd -T0`` child process instead: we write the tar
stream to its stdin and a pump thread hashes and stores what comes out of its stdout, as
``tar | zstd`` would. On the 2-vCPU machine of BENCHMARKS.md both measured the same (the CPU
sum is the limit there), so the library is the default. Both write one zstd frame with its
content checksum.
"""

from __future__ import annotations

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


class LibraryCompressor:
    def __init__(self, out: Callable[[bytes], None], level: int, threads: int):
        class _W:
            def write(self, data) -> int:
                out(data)
                return len(data)

        cctx = zstandard.ZstdCompressor(level=level, threads=threads, write_checksum=True)
        self.zw = cctx.stream_writer(_W(), closefd=False, write_return_read=True)

    def write(self, data) -> None:
        self.zw.write(data)

    def close(self) -> None:
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
