"""The full file listing beside an observation (``vacate observe -o OBS --files``): every
file of every directory, which the observation's per-directory table only counts, so
``vacate browse OBS`` can list a directory's files and mark a single one.

A sidecar file, ``OBS.files``, bound to the observation by the sha256 of its bytes (a
listing beside another observation, or beside one written again, is not used). Compact and
read one directory at a time, so a tree of a million files opens with its index alone:

    {"schema": "vacate.files/2", "observation_sha256": ..., "root": ..., "dirs": N, "files": M}\\n
    per directory, its files as columns (:func:`file_columns.pack`: the sizes, the times,
        where each name ends, the orders by each size and by time (of a directory of
        ORDERS_FROM files or more: smaller ones are sorted when read), the names),
        zlib-compressed; a directory of RAW_FROM files or more as they are, read where they
        lie in the file mapped in memory (no decompression, no copy, no object per file:
        the first screen of a directory of a hundred thousand files reads a few pages)
    the index, zlib-compressed JSON: [[directory, offset, length, compressed], ...]
    "vacate.files index OFFSET LENGTH\\n" (fixed width: found from the end)

Names that are not UTF-8 are kept as the observation keeps them (surrogate escapes, written
as UTF-8 with surrogate escapes), so a name comes back as the walk read it. A listing of the
first version (``vacate.files/1``: the numbers and the names joined by NUL, no orders) is
read too, its orders then sorted when first asked for."""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import sys
import zlib
from array import array
from collections.abc import Iterator
from itertools import accumulate

from vacate.observing.errors import VacateError
from vacate.observing.fsio import write_atomic
from vacate.output.file_columns import Files, pack, unpack

SCHEMA = "vacate.files/2"
READS = ("vacate.files/1", SCHEMA)
SUFFIX = ".files"
RAW_FROM = 30_000
ORDERS_FROM = 1000
_TRAILER = b"vacate.files index %016d %016d\n"
_TRAILER_LEN = len(_TRAILER % (0, 0))


def beside(observation: str) -> str:
    """Where the listing of the observation file ``observation`` is kept."""
    return observation + SUFFIX


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def encode(record, root: str, observation_sha256: str) -> bytes:
    """The sidecar's bytes from a walk's record of the whole tree
    (:class:`vacate.observing.model.walk.TreeRecord`: ``scan(..., record_tree=True)``)."""
    blobs: list[bytes] = []
    index: list[list] = []
    files = 0
    at = 0
    for path in record:
        rows = sorted(_rows(record[path][5]))
        if not rows:
            continue
        blob = pack(Files.from_rows("", rows), orders=len(rows) >= ORDERS_FROM)
        packed = len(rows) < RAW_FROM
        if packed:
            blob = zlib.compress(blob, 6)
        index.append([path, at, len(blob), int(packed)])
        blobs.append(blob)
        at += len(blob)
        files += len(rows)
    head = json.dumps({"schema": SCHEMA, "observation_sha256": observation_sha256,
                       "root": root, "dirs": len(index), "files": files}).encode("ascii") + b"\n"
    idx = zlib.compress(json.dumps(index, separators=(",", ":")).encode("ascii"), 6)
    start = len(head)
    return b"".join([head, *blobs, idx, _TRAILER % (start + at, len(idx))])


def _rows(entries) -> list[tuple[str, int, int, int]]:
    """(name, apparent, disk, mtime_ns) of each of a directory's entries in the walk's
    record."""
    return [(name, size, blocks * 512, round(mtime * 1e9))
            for name, size, blocks, mtime, _ino, _nlink, _mode in entries]


def _unpack_v1(data: bytes, head: str) -> Files:
    """The columns of a ``vacate.files/1`` listing: the count, the three number columns, the
    names joined by NUL."""
    n = int.from_bytes(data[:4], "little")
    nums = array("q")
    nums.frombytes(data[4:4 + 24 * n])
    if len(nums) != 3 * n:
        raise ValueError("the columns are cut short")
    if sys.byteorder != "little":
        nums.byteswap()
    names = data[4 + 24 * n:].split(b"\0")
    if len(names) != n and (n or names != [b""]):
        raise ValueError("not as many names as files")
    return Files(head, nums[:n], nums[n:2 * n], nums[2 * n:], b"".join(names),
                 array("I", accumulate(map(len, names))) if n else array("I"))


def write(path: str, record, root: str, observation: bytes) -> None:
    """Write the listing of ``observation`` (its bytes as written) to ``path``, crash-safe."""
    write_atomic(path, encode(record, root, digest(observation)))


class Listing:
    """A sidecar opened for reading: the index in memory, a directory's files read from the
    file when asked for (``get``: :class:`vacate.output.file_columns.Files`, in name order)."""

    def __init__(self, path: str, observation_sha256: str | None = None):
        self.path = path
        try:
            self._f = open(path, "rb")  # noqa: SIM115 (lives with the listing; close())
        except OSError as e:
            raise VacateError(f"cannot read {path}: {e.strerror or e}") from None
        try:
            self._open(observation_sha256)
        except BaseException:
            self._f.close()
            raise

    def _open(self, want: str | None) -> None:
        f, path = self._f, self.path
        try:
            line = f.readline(1 << 16)
            self._start = len(line)
            self.head = json.loads(line)
            size = os.fstat(f.fileno()).st_size
            f.seek(size - _TRAILER_LEN)
            tail = f.read(_TRAILER_LEN).split()
            off, n = int(tail[2]), int(tail[3])
            f.seek(off)
            index = json.loads(zlib.decompress(f.read(n)))
        except (ValueError, IndexError, zlib.error) as e:
            raise VacateError(f"{path}: not a vacate file listing ({e})") from None
        if not isinstance(self.head, dict) or self.head.get("schema") not in READS:
            raise VacateError(f"{path}: not a {SCHEMA} file listing")
        if want is not None and self.head.get("observation_sha256") != want:
            raise VacateError(f"{path}: the file listing of another observation",
                              hint="observe again with --files to have both made together")
        # the first version's entries: [directory, offset, length], all compressed
        self._index = {e[0]: (e[1], e[2], e[3] if len(e) > 3 else 1) for e in index}
        try:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):     # (a file system that cannot map it: read instead)
            self._map = None
        self._unpack = unpack if self.head["schema"] == SCHEMA else _unpack_v1

    @property
    def files(self) -> int:
        return int(self.head.get("files", 0))

    def __contains__(self, directory: object) -> bool:
        return directory in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def get(self, directory: str) -> Files:
        """The files directly in ``directory`` (none when it has none)."""
        head = directory.rstrip("/") + "/"
        at = self._index.get(directory)
        if at is None:
            return Files.from_rows(head, ())
        off, n, packed = at
        try:
            if not packed and self._map is not None:
                return unpack(self._map, head, self._start + off, self._start + off + n)
            data = os.pread(self._f.fileno(), n, self._start + off)
            return self._unpack(zlib.decompress(data) if packed else data, head)
        except (zlib.error, ValueError) as e:
            raise VacateError(f"{self.path}: the files of {directory} are damaged ({e})") \
                from None

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:   # a directory's columns still read: unmapped with them
                pass
        self._f.close()


class FromWalk:
    """The walk's record of the whole tree read as a :class:`Listing` is (browse on a
    volume observed here: no sidecar needed)."""

    def __init__(self, record):
        self._record = record

    def __contains__(self, directory: object) -> bool:
        return directory in self._record

    def get(self, directory: str) -> Files:
        head = directory.rstrip("/") + "/"
        if directory not in self._record:
            return Files.from_rows(head, ())
        return Files.from_rows(head, sorted(_rows(self._record[directory][5])))

    def close(self) -> None:
        self._record.close()
