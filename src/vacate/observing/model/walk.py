"""What one walk of a filesystem found (:func:`vacate.observing.collectors.walk.walk`): totals, the
top-level entries, the drill-down (one row per directory), the largest files and, when asked,
every entry.

Standard library only.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem
from vacate.observing.model.inventory import DirSummary, FileEntry, Stats


class DirTable(Sequence):
    """The drill-down: one row per directory, sorted by path, each row
    ``[path, apparent_bytes, disk_bytes, files, dirs, newest_mtime_ns, newest_atime_ns]`` (the
    subtree's aggregates, as :class:`Stats`). Reads as a sequence of :class:`DirSummary`, made
    on access: a walk of millions of files has tens of thousands of directories, and building
    an object for each costs more than the JSON that prints them (``rows``). ``index`` maps
    each path to its row (the walk's own, or made when first asked for). Not to be
    modified."""

    __slots__ = ("_index", "rows")

    def __init__(self, rows: list[list], index: dict[str, list] | None = None):
        self.rows = rows
        self._index = index

    @property
    def index(self) -> dict[str, list]:
        if self._index is None:
            self._index = {r[0]: r for r in self.rows}
        return self._index

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(_summary(r) for r in self.rows[i])
        return _summary(self.rows[i])

    def __iter__(self) -> Iterator[DirSummary]:
        return map(_summary, self.rows)


def _summary(r: list) -> DirSummary:
    return DirSummary(r[0], stats_of_row(r))


def stats_of_row(r: list) -> Stats:
    """The :class:`Stats` of one :class:`DirTable` row."""
    return Stats(r[1], r[2], r[3], r[4], ns_to_secs(r[5]), ns_to_secs(r[6]))


def ns_to_secs(ns: int) -> float:
    """Nanoseconds as the float seconds ``os.stat_result`` gives (``st_mtime`` from
    ``st_mtime_ns``, bit for bit: the same arithmetic)."""
    sec, nsec = divmod(ns, 1_000_000_000)
    return sec + nsec * 1e-9


@dataclass(frozen=True, **SLOTS)
class WalkResult:
    """What one walk found: totals, the top-level entries, every directory, the largest files."""
    root: Stats
    top: tuple[tuple[str, bool, Stats], ...]    # (path, is_dir, stats) per top-level entry
    dirs: Sequence[DirSummary]                  # a DirTable
    largest: tuple[FileEntry, ...]
    warnings: tuple[Problem, ...]
    entries: int = 0
    workers: int = 0
    listing: TreeRecord | None = None           # the whole tree, when asked


class TreeRecord:
    """Every entry of a walk (``walk(..., record=True)``, for an export of the whole tree),
    kept in an anonymous temporary file, one ``marshal`` blob per directory, and read back one
    directory at a time: a million files cost the export tens of MB of index, not the
    gigabytes their Python objects would. Reads like a mapping of directory path ->
    ``(path, size, blocks, mtime, ino, [(name, size, blocks, mtime, ino, nlink, mode)...],
    mountpoint names left out, read_error)``, in the order the directories were walked."""

    def __init__(self) -> None:
        import tempfile  # (only an export of the whole tree needs it: off check's start)

        self._file = tempfile.TemporaryFile(prefix="vacate-tree-")  # noqa: SIM115 (lives with the record)
        self._index: dict[str, tuple[int, int]] = {}
        self._end = 0

    def add(self, path: str, blob: bytes) -> None:
        fd = self._file.fileno()
        view = memoryview(blob)
        off = self._end
        while view:
            view = view[os.pwrite(fd, view, off + len(blob) - len(view)):]
        self._index[path] = (off, len(blob))
        self._end = off + len(blob)

    def __contains__(self, path: object) -> bool:
        return path in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, path: str) -> tuple:
        off, n = self._index[path]
        data = os.pread(self._file.fileno(), n, off)
        while len(data) < n:
            more = os.pread(self._file.fileno(), n - len(data), off + len(data))
            if not more:
                raise OSError(f"the walk's record of {path} is cut short")
            data += more
        return (path, *marshal.loads(data))

    def close(self) -> None:
        self._file.close()
