"""Where an archive lives: a local directory or an S3 prefix, behind one small interface.

Names are relative (``part-000001.tar.zst``, ``.vacate-partial/part-000001.json``).
``create(name)`` returns a sink; nothing is visible under ``name`` until ``sink.commit()``
(local: temp file in the same directory -> fsync -> rename -> fsync dir; S3: the multipart
upload is completed). ``open_target(location)`` picks the kind from the location string.
"""

from __future__ import annotations

import ctypes
import os
from typing import BinaryIO, Protocol

from vacate.errors import UsageError

TMP_PREFIX = ".tmp-"


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


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


class _LocalSink:
    def __init__(self, final: str):
        self.final = final
        d, base = os.path.split(final)
        os.makedirs(d, exist_ok=True)
        self.tmp = os.path.join(d, f"{TMP_PREFIX}{os.getpid()}-{base}")
        self.f = open(self.tmp, "wb", buffering=0)  # noqa: SIM115 (closed in commit/abort)
        self.unsynced = 0
        self.offset = 0

    SYNC_EVERY = 32 << 20

    def write(self, data) -> int:
        n = self.f.write(data)
        self.unsynced += n
        if self.unsynced >= self.SYNC_EVERY:
            # push dirty pages out as we go (the writer calls this from its output thread),
            # so the fsync at commit does not stall on a whole part's worth of data; starting
            # the writeback without waiting for it measured ~10% faster than fdatasync here
            fd = self.f.fileno()
            if _SYNC_FILE_RANGE is None or _SYNC_FILE_RANGE(
                    fd, self.offset, self.unsynced, _SYNC_FILE_RANGE_WRITE) != 0:
                os.fdatasync(fd)
            self.offset += self.unsynced
            self.unsynced = 0
        return n

    def commit(self) -> None:
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        os.replace(self.tmp, self.final)
        _fsync_dir(os.path.dirname(self.final))

    def abort(self) -> None:
        self.f.close()
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


class LocalTarget:
    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.location = self.root

    def _p(self, name: str) -> str:
        return os.path.join(self.root, name)

    def create(self, name: str) -> _LocalSink:
        return _LocalSink(self._p(name))

    def put(self, name: str, data: bytes) -> None:
        s = self.create(name)
        try:
            s.write(data)
            s.commit()
        except BaseException:
            s.abort()
            raise

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
