"""Where an archive lives: a local directory or an S3 prefix, behind one small interface.

Names are relative (``part-000001.tar.zst``, ``.vacate-partial/part-000001.json``).
``create(name)`` returns a sink; nothing is visible under ``name`` until ``sink.commit()``
(local: temp file in the same directory -> fsync -> rename -> fsync dir, see
:mod:`vacate.observing.fsio`; S3: the multipart upload is completed). ``open_target(location)`` picks
the kind from the location string. A local write that fails (a full disk) raises
:class:`WriteError`, an error for people (exit 2), once the sink has removed its temp file.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import mmap
import os
import threading
from typing import BinaryIO, Protocol

from vacate.observing import fsio
from vacate.observing.errors import UsageError, VacateError

TMP_PREFIX = fsio.TMP_PREFIX


class WriteError(VacateError):
    """Writing to the archive's target failed (no space left, a read-only or failing disk)."""

    def __init__(self, path: str, err: OSError):
        why = err.strerror or str(err)
        hint = ("free space on it (or choose another --to) and run the same command again: "
                "parts already written are kept and it resumes after them"
                if err.errno in (errno.ENOSPC, errno.EDQUOT) else None)
        super().__init__(f"cannot write {path}: {why}", hint=hint)
        self.errno = err.errno


def _writing(method):
    """A sink's write method whose ``OSError`` becomes :class:`WriteError` (named by the
    final path)."""
    @functools.wraps(method)
    def wrapped(self, *args):
        try:
            return method(self, *args)
        except WriteError:
            raise
        except OSError as e:
            raise WriteError(self.final, e) from e
    return wrapped


class Sink(Protocol):
    def write(self, data: bytes) -> int: ...
    def commit(self) -> None: ...
    def abort(self) -> None: ...


class Target(Protocol):
    location: str

    def create(self, name: str) -> Sink: ...
    def put(self, name: str, data: bytes) -> None: ...
    def get(self, name: str) -> bytes: ...
    def open(self, name: str) -> BinaryIO: ...
    def list(self, prefix: str = "") -> dict[str, int]: ...
    def delete(self, name: str) -> None: ...
    def cleanup_unfinished(self, keep: frozenset[str] = frozenset()) -> int: ...


def open_target(location: str, *, endpoint: str | None = None, environ=None) -> Target:
    if location.startswith("s3://"):
        from vacate.archive.s3 import S3Target
        return S3Target.from_url(location, endpoint=endpoint, environ=environ)
    if "://" in location:
        raise UsageError(f"unsupported target {location!r}",
                         hint="use a directory or s3://bucket/prefix")
    return LocalTarget(location)


def _writeback_starter():
    """Linux ``sync_file_range(fd, off, n, SYNC_FILE_RANGE_WRITE)``: start writing dirty pages
    out without waiting for them (None where it is not available)."""
    try:
        f = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    f.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    f.restype = ctypes.c_int
    return f


_SYNC_FILE_RANGE = _writeback_starter()
_SYNC_FILE_RANGE_WRITE = 2
_O_DIRECT = getattr(os, "O_DIRECT", 0)


class _LocalSink:
    """A temp file; ``commit`` fsyncs it, renames it to its final name and fsyncs the
    directory.

    Large output (an archive part) is gathered in a page-aligned buffer and written with
    ``O_DIRECT`` where the filesystem allows it: no copy into the page cache and no dirty
    pages for the kernel to write back later (measured here: about half a core-second per GB
    less, and the fsync at commit finds nothing left to write). Where ``O_DIRECT`` is refused
    (tmpfs, some network filesystems) the writes are ordinary ones, and writeback is started
    as we go by a flusher thread of the sink's own (``sync_file_range`` may block on a busy
    disk: it must not stall the writes), so that the fsync at commit has little to wait for.
    The bytes in the file are the same either way."""

    STAGE = 8 << 20               # O_DIRECT write size (a multiple of any block size)
    ALIGN = 4096
    SYNC_EVERY = 32 << 20

    def __init__(self, final: str):
        self.final = final
        try:
            fsio.makedirs_durable(os.path.dirname(final))
            self.tmp = fsio.temp_path(final)
            self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                              0o644)
        except OSError as e:
            raise WriteError(final, e) from e
        self.closed = False
        self.direct: bool | None = None if _O_DIRECT else False   # None: not tried yet
        self.stage: mmap.mmap | None = None
        self.filled = 0
        self.written = 0
        self.kicked = 0               # writeback asked for up to here
        self.cv = threading.Condition()
        self.stopping = False
        self.flusher: threading.Thread | None = None

    @_writing
    def write(self, data) -> int:
        if self.direct is False:
            return self._buffered(data)
        mv = memoryview(data).cast("B")
        n = len(mv)
        if self.stage is None:
            self.stage = mmap.mmap(-1, self.STAGE)
        while mv:
            k = min(len(mv), self.STAGE - self.filled)
            self.stage[self.filled:self.filled + k] = mv[:k]
            self.filled += k
            mv = mv[k:]
            if self.filled == self.STAGE:
                self._drain_stage(final=False)
                if self.direct is False and mv:
                    self._buffered(mv)
                    break
        return n

    @_writing
    def write_aligned(self, data) -> int:
        """``write()`` of a page-aligned buffer (an anonymous mmap) whose length is a multiple
        of ``ALIGN``: with ``O_DIRECT`` written as it is, without the copy into the stage."""
        if self.direct is False or self.filled:
            return self.write(data)
        with memoryview(data) as view:
            self._write_out(view, final=False)
        return len(data)

    def _drain_stage(self, final: bool) -> None:
        """Write out the staged bytes: directly while that works; at ``final`` the unaligned
        tail goes through the page cache."""
        with memoryview(self.stage) as v:
            self._write_out(v[:self.filled], final)
        self.filled = 0

    def _write_out(self, view: memoryview, final: bool) -> None:
        fd = self.fd
        try:
            if self.direct is None and not final:
                try:
                    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | _O_DIRECT)
                    self.direct = True
                except OSError:
                    self.direct = False
            if self.direct:
                aligned = len(view) - len(view) % self.ALIGN
                done = 0
                try:
                    while done < aligned and done % self.ALIGN == 0:
                        done += os.write(fd, view[done:aligned])
                except OSError as e:
                    if e.errno != errno.EINVAL:
                        raise
                if done < aligned:
                    self._direct_off()            # refused after all: carry on buffered
                elif final:
                    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_O_DIRECT)
                view = view[done:]
                self.written += done
                self.kicked = self.written        # nothing of it is left to write back
            if view:
                self._buffered(view)
        finally:
            view.release()

    def _direct_off(self) -> None:
        if self.direct:
            fd = self.fd
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_O_DIRECT)
        self.direct = False

    def buffered_from_now(self) -> None:
        """Write what is staged, and everything from here on, through the page cache."""
        self._direct_off()
        if self.filled:
            with memoryview(self.stage) as v:
                self._buffered(v[:self.filled])
            self.filled = 0

    def _buffered(self, data) -> int:
        mv = memoryview(data)
        while mv:
            n = os.write(self.fd, mv)
            mv = mv[n:]
            self.written += n
        if self.written - self.kicked >= self.SYNC_EVERY:
            if self.flusher is None:
                self.flusher = threading.Thread(target=self._flush, daemon=True)
                self.flusher.start()
            with self.cv:
                self.cv.notify()
        return len(data)

    def _flush(self) -> None:
        fd = self.fd
        while True:
            with self.cv:
                while not self.stopping and self.written - self.kicked < self.SYNC_EVERY:
                    self.cv.wait()
                if self.stopping:
                    return
                start, end = self.kicked, self.written
                self.kicked = end
            # start writing the dirty pages out without waiting for them; where that is not
            # available, wait for them here (off the writing thread)
            if _SYNC_FILE_RANGE is None or _SYNC_FILE_RANGE(
                    fd, start, end - start, _SYNC_FILE_RANGE_WRITE) != 0:
                os.fdatasync(fd)

    def _stop(self) -> None:
        if self.flusher is not None:
            with self.cv:
                self.stopping = True
                self.cv.notify()
            self.flusher.join()
            self.flusher = None
        if self.stage is not None:
            try:
                self.stage.close()
            except BufferError:     # a view of it is still held (by a traceback): GC frees it
                pass
            self.stage = None

    @_writing
    def commit(self) -> None:
        if self.filled:
            self._drain_stage(final=True)
        self._stop()
        fsio.commit_temp(self._release(), self.tmp, self.final)

    def abort(self) -> None:
        """Drop what was written (the temp file), whatever state the sink is in."""
        self._stop()
        if not self.closed:
            os.close(self._release())
        fsio.remove_quietly(self.tmp)

    def _release(self) -> int:
        """The fd, for the caller to close: the sink forgets its number, so that a write
        that comes after all fails (EBADF) instead of landing in whatever file is opened
        under that number next."""
        fd, self.fd = self.fd, -1
        self.closed = True
        return fd


class LocalTarget:
    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.location = self.root

    def _p(self, name: str) -> str:
        return os.path.join(self.root, name)

    def create(self, name: str) -> _LocalSink:
        return _LocalSink(self._p(name))

    def put(self, name: str, data: bytes) -> None:
        final = self._p(name)
        try:
            fsio.makedirs_durable(os.path.dirname(final))
            fsio.write_atomic(final, data)
        except OSError as e:
            raise WriteError(final, e) from e

    def get(self, name: str) -> bytes:
        with open(self._p(name), "rb") as f:
            return f.read()

    def open(self, name: str) -> BinaryIO:
        return open(self._p(name), "rb")

    def list(self, prefix: str = "") -> dict[str, int]:
        d = self._p(prefix)
        out = {}
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.is_file(follow_symlinks=False) and not e.name.startswith(TMP_PREFIX):
                        out[os.path.join(prefix, e.name) if prefix else e.name] = \
                            e.stat(follow_symlinks=False).st_size
        except FileNotFoundError:
            pass
        return out

    def delete(self, name: str) -> None:
        try:
            os.unlink(self._p(name))
        except FileNotFoundError:
            pass

    def remove_dir(self, name: str) -> None:
        try:
            os.rmdir(self._p(name))
        except OSError:
            pass

    def cleanup_unfinished(self, keep: frozenset[str] = frozenset()) -> int:
        """Remove temp files an interrupted run left behind; returns how many. (A local part
        is rewritten whole: ``keep`` is for targets that can continue an upload.)"""
        n = 0
        for d in (self.root, self._p(".vacate-partial")):
            try:
                names = os.listdir(d)
            except FileNotFoundError:
                continue
            for name in names:
                if name.startswith(TMP_PREFIX):
                    os.unlink(os.path.join(d, name))
                    n += 1
        return n
