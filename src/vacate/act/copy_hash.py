"""How migrate's copy and its read-back hash a file, in file order: the bytes read into
the hashing's buffers and the zeros of holes.

The hash is XXH3-128 where the ``xxhash`` module is installed, else BLAKE3 (one core), else
the standard library's BLAKE2b (a far host's bare ``python3``); the state file names the one
taken, and the read-back uses that one. What it guards against is a copy that differs from
what was read (a bad write, a bad block, a bug), not someone forging a file to match: who
can change the copy can change the state file beside it. For that a 128-bit checksum made
for it is enough, as rsync's ``--checksum`` uses it: XXH3-128 takes 0.014 s for 512 MB
where BLAKE3 on one core takes 0.083 s, which is most of what the copy costs over
``cp -a``.

A small file is hashed in the caller's thread as each piece is read (:class:`Hashing`); a
large one fills a few larger chunk buffers that one second thread per pass
(:class:`Pipeline`) hashes, strictly in the order handed over, while the caller reads and
writes the next (``preadv``, ``write`` and the hashes' ``update`` all run without the GIL):
below ``PIPELINED_BYTES`` a hand-over costs more than it saves (measured). Only where the
process may run on ``PIPELINE_CPUS`` CPUs or more: besides the copying thread and the
hashing one, the kernel's own workers need a CPU (a loop device's, the filesystems'
writeback); on two CPUs every arrangement with the second thread was slower than without
it and varied 0.6-2.7 s from round to round (bench/HISTORY.md, "migrate's copy").
"""

from __future__ import annotations

import queue
import threading

from vacate.observing.collectors.forking import cpus

PIECE = 256 << 10          # read, written and hashed at a time (stays in the CPU's cache)
ZEROS = 8 << 20            # a hole's zeros hashed so many at a time
PIPELINED_BYTES = 8 << 20  # a file this large is hashed in a second thread
PIPELINE_CHUNK = 2 << 20   # handed to that thread at a time,
PIPELINE_DEPTH = 3         # of so many buffers
PIPELINE_CPUS = 4          # the CPUs a pipeline needs (see above)


def hashing_for(size: int, pipeline: Pipeline, algo: str | None = None) -> Hashing:
    """How a file of ``size`` bytes is hashed: in ``pipeline``'s thread when it is large
    and this process has the CPUs for it."""
    if size >= PIPELINED_BYTES and cpus() >= PIPELINE_CPUS:
        return Pipelined(pipeline, algo)
    return Hashing(size, algo)


class Hashing:
    """The hash of a file, fed in file order: the bytes read into its buffers, the zeros
    of holes. Here each piece is hashed in the caller's thread as soon as it is read (a
    small file). ``algo``: the one a recorded hash was taken with."""

    def __init__(self, size: int, algo: str | None = None):
        self.h = hasher(algo)
        self.view = memoryview(bytearray(min(PIECE, max(size, 1))))

    def buffer(self, n: int) -> memoryview:
        """Where to read up to ``n`` of the file's next bytes."""
        return self.view[:n]

    def took(self, n: int) -> None:
        """``n`` bytes were read into the last buffer."""
        self.h.update(self.view[:n])

    def zeros(self, n: int) -> None:
        zeros_into(self.h, n)

    def finish(self) -> dict:
        return {algo_of(self.h): self.h.hexdigest()}

    def stop(self) -> None:
        pass


class Pipelined(Hashing):
    """The same, each chunk hashed by a :class:`Pipeline`'s thread while the caller reads
    (and writes) the next."""

    def __init__(self, pipeline: Pipeline, algo: str | None = None):
        self.h = hasher(algo)
        self.pipeline = pipeline
        self.view: memoryview | None = None
        self.fill = 0

    def _hand_over(self) -> None:
        if self.view is not None:
            self.pipeline.hash(self.h, self.view, self.fill)
            self.view, self.fill = None, 0

    def buffer(self, n: int) -> memoryview:
        if self.view is not None and self.fill + n > len(self.view):
            self._hand_over()
        if self.view is None:
            self.view = self.pipeline.chunk()
        return self.view[self.fill:self.fill + n]

    def took(self, n: int) -> None:
        self.fill += n

    def zeros(self, n: int) -> None:
        self._hand_over()
        self.pipeline.hash(self.h, None, n)

    def finish(self) -> dict:
        self._hand_over()
        self.pipeline.wait()
        return super().finish()

    def stop(self) -> None:
        if self.view is not None:                     # the copy failed holding a chunk
            self.pipeline.free.put(self.view)
            self.view = None


class Pipeline:
    """A second thread that hashes chunks of files, strictly in the order handed over,
    while the caller reads and writes the next ones (``update`` runs without the GIL): a
    few chunk buffers go round, the caller waiting for a free one; an error there is
    raised in the caller's thread at its next call. Started at the first large file of a
    copy pass or a read-back, ended with it."""

    def __init__(self):
        self.free: queue.Queue = queue.Queue()
        self.todo: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.stopped = False
        self.thread: threading.Thread | None = None

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *_exc) -> None:
        if self.thread is not None:                   # what is still queued is dropped
            self.stopped = True
            self.todo.put(None)
            self.thread.join()
            self.thread = None

    def _check(self) -> None:
        if self.error is not None:
            raise self.error

    def chunk(self) -> memoryview:
        """A free chunk buffer."""
        self._check()
        if self.thread is None:
            for _ in range(PIPELINE_DEPTH):
                self.free.put(memoryview(bytearray(PIPELINE_CHUNK)))
            self.thread = threading.Thread(target=self._run, name="vacate-hash", daemon=True)
            self.thread.start()
        return self.free.get()

    def hash(self, h, chunk: memoryview | None, n: int) -> None:
        """``h`` updated with the first ``n`` bytes of ``chunk`` (None: ``n`` zeros)."""
        self._check()
        self.todo.put((h, chunk, n))

    def wait(self) -> None:
        """Until everything handed over is hashed."""
        self.todo.join()
        self._check()

    def _run(self) -> None:
        while True:
            job = self.todo.get()
            if job is None:
                return
            h, chunk, n = job
            try:
                if self.error is None and not self.stopped:
                    if chunk is None:
                        zeros_into(h, n)
                    else:
                        h.update(chunk[:n])
            except BaseException as e:  # noqa: BLE001 (raised in the caller's thread)
                self.error = e
            finally:
                if chunk is not None:
                    self.free.put(chunk)
                self.todo.task_done()


ALGOS = ("xxh128", "blake3", "blake2b")        # the first whose module is here is taken
_NAMES = {"xxh3_128": "xxh128", "blake3": "blake3", "blake2b": "blake2b"}   # by type


def hasher(algo: str | None = None):
    """A new hash to check a copy with: ``algo`` (the one a recorded hash was taken with;
    ImportError where its module is gone), else the first of ``ALGOS`` installed."""
    for name in (algo,) if algo else ALGOS:
        h = _new(name)
        if h is not None:
            return h
    raise ImportError(f"the copy was hashed with {algo}, whose module is not installed here")


def _new(name: str):
    try:
        if name == "xxh128":
            import xxhash

            return xxhash.xxh3_128()
        if name == "blake3":
            import blake3

            return blake3.blake3(max_threads=1)
    except ImportError:
        return None
    if name == "blake2b":
        import hashlib

        return hashlib.blake2b()
    raise ValueError(f"{name!r}: not a hash vacate checks copies with")


def algo_of(h) -> str:
    """The name a hash made by :func:`hasher` is recorded under."""
    return _NAMES[type(h).__name__]


def zeros_into(h, n: int) -> None:
    z = bytes(min(n, ZEROS))
    while n > 0:
        k = min(n, len(z))
        h.update(z[:k])
        n -= k
