"""What is on the volume: totals, items, drill-down and what each item is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target

# typing is imported only by type checkers (its import is a measurable part of start-up)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True, **SLOTS)
class Stats:
    """Aggregates over a subtree, counted the way ``du -x`` counts.

    ``apparent_bytes`` and ``disk_bytes`` include directories and symlinks themselves (as du
    does); a hardlinked file counts once, where it was first met. ``files`` counts every
    non-directory entry (regular files, symlinks, fifos, sockets, devices); ``dirs`` counts
    directories below the root of the subtree, plus the root itself when it is a directory.
    Times are POSIX seconds (float) or None when the subtree holds nothing.
    """

    apparent_bytes: int = 0
    disk_bytes: int = 0
    files: int = 0
    dirs: int = 0
    newest_mtime: float | None = None
    newest_atime: float | None = None

    def as_json(self) -> dict:
        return {
            "apparent_bytes": self.apparent_bytes,
            "disk_bytes": self.disk_bytes,
            "files": self.files,
            "dirs": self.dirs,
            "newest_mtime": self.newest_mtime,
            "newest_atime": self.newest_atime,
        }


@dataclass(frozen=True, **SLOTS)
class Classification:
    """What an item is, and what it takes to get it back (filled in by the recognisers).

    ``kind``: model, draft-model, gguf, checkpoint, training-output, dataset, installer,
    env-backup, venv, conda-env, source-code, container-image, vm-image, cache, logs,
    filesystem-artifact, directory, file.
    ``recoverable``: re-downloadable, regenerable, unique, or None when not known.
    ``confidence``: 0..1; ``guess`` is True when it rests on a name alone.
    """

    kind: str
    label: str
    recoverable: str | None = None
    source: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    confidence: float = 1.0
    guess: bool = False
    evidence: tuple[str, ...] = ()

    def as_json(self) -> dict:
        return {
            "kind": self.kind,
            "label": self.label,
            "recoverable": self.recoverable,
            "source": self.source,
            "details": self.details,
            "confidence": self.confidence,
            "guess": self.guess,
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True, **SLOTS)
class DirSummary:
    """One directory of the drill-down: its whole subtree's aggregates."""

    path: str
    stats: Stats


@dataclass(frozen=True, **SLOTS)
class FileEntry:
    """One of the largest files."""

    path: str
    apparent_bytes: int
    disk_bytes: int
    mtime: float
    atime: float
    nlink: int = 1


@dataclass(frozen=True, **SLOTS)
class Item:
    """A top-level entry of the volume, or a recognised artifact below one (``parent`` set).

    ``id`` is stable across runs: ``item:`` + the path relative to the target.
    """

    id: str
    path: str
    parent: str | None
    is_dir: bool
    stats: Stats
    classification: Classification | None = None

    def as_json(self) -> dict:
        d = {"id": self.id, "path": self.path, "parent": self.parent, "is_dir": self.is_dir}
        d.update(self.stats.as_json())
        c = self.classification
        if c is None:
            c = Classification(kind="directory" if self.is_dir else "file",
                               label="directory" if self.is_dir else "file", confidence=0.0)
        d.update(c.as_json())
        return d


@dataclass(frozen=True, **SLOTS)
class ScanResult:
    """What `vacate scan` found: the target, totals, items, directories and largest files."""
    target: Target
    totals: Stats
    items: tuple[Item, ...]
    dirs: tuple[DirSummary, ...]          # every directory walked, for drill-down
    largest_files: tuple[FileEntry, ...]
    warnings: tuple[Problem, ...]
    elapsed_s: float = 0.0
    # the whole tree, only when asked (ncdu export): directory path -> its entries, read from
    # disk on access (model.walk.TreeRecord)
    listing: Mapping[str, tuple] | None = None
    entries: int = 0                            # entries walked (files + directories)
