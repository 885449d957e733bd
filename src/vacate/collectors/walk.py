"""Walk one filesystem below a path: never cross into another mount, never follow symlinks,
count hardlinks once, and keep per-directory aggregates instead of per-file objects.

Counts match ``du -x``: directories and symlinks count their own size too. On btrfs a
subvolume has its own ``st_dev`` but is the same filesystem: it is walked (it is not in
mountinfo), while real mounts below the path (``skip``) are not.
"""

from __future__ import annotations

import heapq
import os
import stat as S
from dataclasses import dataclass, field

from vacate.model.common import Problem
from vacate.model.inventory import DirSummary, FileEntry, Stats


@dataclass(slots=True)
class _Acc:
    apparent: int = 0
    disk: int = 0
    files: int = 0
    dirs: int = 0
    mtime: float | None = None
    atime: float | None = None

    def add_entry(self, st: os.stat_result, is_dir: bool) -> None:
        self.apparent += st.st_size
        self.disk += st.st_blocks * 512
        if is_dir:
            self.dirs += 1
        else:
            self.files += 1
        if self.mtime is None or st.st_mtime > self.mtime:
            self.mtime = st.st_mtime
        if self.atime is None or st.st_atime > self.atime:
            self.atime = st.st_atime

    def merge(self, o: _Acc) -> None:
        self.apparent += o.apparent
        self.disk += o.disk
        self.files += o.files
        self.dirs += o.dirs
        if o.mtime is not None and (self.mtime is None or o.mtime > self.mtime):
            self.mtime = o.mtime
        if o.atime is not None and (self.atime is None or o.atime > self.atime):
            self.atime = o.atime

    def freeze(self) -> Stats:
        return Stats(self.apparent, self.disk, self.files, self.dirs, self.mtime, self.atime)


@dataclass(frozen=True, slots=True)
class WalkResult:
    root: Stats
    top: tuple[tuple[str, bool, Stats], ...]    # (path, is_dir, stats) per top-level entry
    dirs: tuple[DirSummary, ...]
    largest: tuple[FileEntry, ...]
    warnings: tuple[Problem, ...]


@dataclass(slots=True)
class _Walk:
    skip: frozenset[str]
    keep_largest: int
    seen_links: set[tuple[int, int]] = field(default_factory=set)
    largest: list[tuple[int, str, FileEntry]] = field(default_factory=list)
    dirs: list[DirSummary] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def warn(self, code: str, path: str, err: BaseException | str) -> None:
        msg = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        self.warnings.append(Problem(code, f"{path}: {msg}", path))

    def note_file(self, path: str, st: os.stat_result) -> None:
        e = FileEntry(path, st.st_size, st.st_blocks * 512, st.st_mtime, st.st_atime, st.st_nlink)
        key = (st.st_blocks * 512, path, e)
        if len(self.largest) < self.keep_largest:
            heapq.heappush(self.largest, key)
        elif key[0] > self.largest[0][0]:
            heapq.heapreplace(self.largest, key)

    def dir(self, path: str, st: os.stat_result) -> _Acc:
        acc = _Acc()
        acc.add_entry(st, True)
        try:
            it = os.scandir(path)
        except FileNotFoundError as e:
            self.warn("vanished", path, e)
            self.dirs.append(DirSummary(path, acc.freeze()))
            return acc
        except OSError as e:
            self.warn("unreadable-dir", path, e)
            self.dirs.append(DirSummary(path, acc.freeze()))
            return acc
        with it:
            while True:
                try:
                    entry = next(it)
                except StopIteration:
                    break
                except OSError as e:
                    self.warn("unreadable-dir", path, e)
                    break
                sub = self.entry(entry.path, entry)
                if sub is not None:
                    acc.merge(sub[1])
        self.dirs.append(DirSummary(path, acc.freeze()))
        return acc

    def entry(self, path: str, entry: os.DirEntry | None) -> tuple[bool, _Acc] | None:
        try:
            st = entry.stat(follow_symlinks=False) if entry is not None else os.lstat(path)
        except FileNotFoundError as e:
            self.warn("vanished", path, e)
            return None
        except OSError as e:
            self.warn("unreadable", path, e)
            return None
        if S.S_ISDIR(st.st_mode):
            if path in self.skip:
                return None
            return True, self.dir(path, st)
        acc = _Acc()
        if st.st_nlink > 1:
            key = (st.st_dev, st.st_ino)
            if key in self.seen_links:
                acc.files += 1     # the name counts, the bytes were counted once already
                return False, acc
            self.seen_links.add(key)
        acc.add_entry(st, False)
        if S.S_ISREG(st.st_mode):
            self.note_file(path, st)
        return False, acc


def walk(path: str, *, skip: frozenset[str] = frozenset(), keep_largest: int = 50) -> WalkResult:
    """Walk ``path``; ``skip`` holds mountpoints below it (never entered)."""
    w = _Walk(skip=skip, keep_largest=keep_largest)
    try:
        st = os.lstat(path)
    except OSError as e:
        w.warn("unreadable", path, e)
        return WalkResult(Stats(), (), (), (), tuple(w.warnings))
    if not S.S_ISDIR(st.st_mode):
        res = w.entry(path, None)
        acc = res[1] if res else _Acc()
        return WalkResult(acc.freeze(), ((path, False, acc.freeze()),), (),
                          tuple(e for _, _, e in sorted(w.largest, reverse=True)),
                          tuple(w.warnings))
    root = _Acc()
    root.add_entry(st, True)
    top: list[tuple[str, bool, Stats]] = []
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as e:
        w.warn("unreadable-dir", path, e)
        entries = []
    for entry in entries:
        res = w.entry(entry.path, entry)
        if res is None:
            continue
        is_dir, acc = res
        root.merge(acc)
        top.append((entry.path, is_dir, acc.freeze()))
    w.dirs.append(DirSummary(path, root.freeze()))
    return WalkResult(
        root=root.freeze(),
        top=tuple(top),
        dirs=tuple(w.dirs),
        largest=tuple(e for _, _, e in sorted(w.largest, reverse=True)),
        warnings=tuple(w.warnings),
    )
