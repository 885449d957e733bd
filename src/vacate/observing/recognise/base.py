"""The recogniser contract and the registry.

A recogniser is a function ``(ctx) -> Classification | None``, registered for files, for
directories, or as a *composite* (a directory recogniser that looks at what was recognised
inside: ``ctx.children``). Each reads only what it needs through ``ctx.reader`` (bounded), and
says how sure it is in ``confidence``; the registry keeps the most confident answer.
"""

from __future__ import annotations

import errno
import os
import stat as S
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple, Optional

from vacate.observing.collectors.walk_descent import fastwalk
from vacate.observing.compat import SLOTS
from vacate.observing.model.inventory import Classification, Stats
from vacate.observing.recognise.read import Reader, open_noatime

LIST_CAP = 5000          # entries looked at per directory
HEAD = 4096              # bytes of a file's head read once and shared
# the listing loop in C (collectors/_fastwalk.c), where it was built: _list_py otherwise
_entries = fastwalk.entries if fastwalk is not None else None


class FileInfo(NamedTuple):
    """One non-directory entry of a listing (a tuple: listings make tens of thousands)."""

    name: str
    size: int
    disk: int
    is_link: bool
    mtime: float = 0.0
    atime: float = 0.0
    regular: bool = True        # a regular file (not a link, FIFO, socket or device)

    @property
    def ext(self) -> str:
        """The extension, with compression suffixes kept: ".jsonl", ".jsonl.gz", ".tar"."""
        return extension(self.name)


@lru_cache(maxsize=1 << 16)
def extension(name: str) -> str:
    """:attr:`FileInfo.ext` of a name (cached: several recognisers ask of every file)."""
    parts = name.lower().split(".")
    if len(parts) < 2:
        return ""
    if parts[-1] in ("gz", "zst", "xz", "bz2") and len(parts) > 2:
        return "." + ".".join(parts[-2:])
    return "." + parts[-1]


@dataclass(frozen=True, **SLOTS)
class Listing:
    """One directory's entries as a recogniser sees them (capped at LIST_CAP)."""
    dirs: tuple[str, ...]
    files: dict[str, FileInfo]
    truncated: bool          # more than LIST_CAP entries: the rest was not looked at
    unreadable: bool = False

    def has(self, name: str) -> bool:
        return name in self.files or name in self.dirs

    def with_suffix(self, *suffixes: str) -> list[FileInfo]:
        return [f for n, f in self.files.items() if n.endswith(suffixes)]


@dataclass(**SLOTS)
class Node:
    """One recognised entry of the tree below a top-level item."""

    path: str
    is_dir: bool
    stats: Stats
    classification: Classification
    children: list[Node] = field(default_factory=list)


@dataclass(**SLOTS)
class Ctx:
    """What a recogniser is given about one entry: its path, stats and a reader."""
    path: str
    is_dir: bool
    stats: Stats
    reader: Reader
    depth: int
    top: str                                  # the top-level item this entry belongs to
    stats_of: Callable[[str], Stats | None]   # a directory's subtree aggregates (from the walk)
    children: list[Node] | None = None        # filled before composites run
    _listing: Listing | None = None
    _head: bytes | None = None

    def head(self, n: int = HEAD) -> bytes:
        """The first ``n`` bytes of this file, read once for all the recognisers (quietly:
        a file that cannot be read is simply not recognised by its content)."""
        if self._head is None or (len(self._head) < n and len(self._head) >= self._asked):
            self._asked = max(n, HEAD)
            self._head = self.reader.head(self.path, self._asked, quiet=True) or b""
        return self._head[:n]

    _asked: int = 0
    name: str = ""                            # the entry's name (its path's last part)

    def __post_init__(self) -> None:
        # asked of every entry by most recognisers: taken from the path once
        self.name = self.path.rpartition("/")[2]

    def join(self, *parts: str) -> str:
        """The path of an entry below this one (``parts``: names from its listings)."""
        p = self.path
        return (p if p.endswith("/") else p + "/") + "/".join(parts)

    def listing(self) -> Listing:
        if self._listing is None:
            self._listing = list_dir(self.path, self.reader)
        return self._listing


def list_dir(path: str, reader: Reader) -> Listing:
    dirs: list[str] = []
    files: dict[str, FileInfo] = {}
    truncated = False
    try:
        cap = min(LIST_CAP, max(reader.entries_left, 64))
        fd = open_noatime(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):   # absent: just absent
            reader.warn("unreadable-dir", path, e.strerror or str(e))
        return Listing((), {}, False, True)
    try:
        if _entries is not None:
            dirs, files, listed, truncated, err = _entries(fd, cap, FileInfo)
            reader.entries_left -= listed
            if err:
                raise OSError(err, os.strerror(err))
        else:
            truncated = _list_py(fd, cap, reader, dirs, files)
    except OSError as e:
        reader.warn("unreadable-dir", path, e.strerror or str(e))
        return Listing((), {}, False, True)
    finally:
        os.close(fd)
    dirs.sort()
    names = tuple(dirs)
    reader.listed(path, names, files)
    return Listing(names, files, bool(truncated))


def _list_py(fd: int, cap: int, reader: Reader, dirs: list[str],
             files: dict[str, FileInfo]) -> bool:
    """:func:`list_dir`'s loop where the C one (``_fastwalk.entries``) is not built: the
    same entries, in the same order; True when there were more than ``cap``."""
    with os.scandir(fd) as it:
        for n, e in enumerate(it):
            if n >= cap:
                return True
            reader.entries_left -= 1
            try:
                if e.is_dir(follow_symlinks=False):     # the entry's type: no stat
                    dirs.append(e.name)
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if S.S_ISDIR(st.st_mode):
                dirs.append(e.name)
            else:
                files[e.name] = FileInfo(e.name, st.st_size, st.st_blocks * 512,
                                         S.S_ISLNK(st.st_mode), st.st_mtime, st.st_atime,
                                         S.S_ISREG(st.st_mode))
    return False


Recogniser = typing.Callable[[Ctx], Optional[Classification]]    # (typing: run-time alias on 3.8)
FILES: list[Recogniser] = []
DIRS: list[Recogniser] = []
COMPOSITES: list[Recogniser] = []


def files(fn: Recogniser) -> Recogniser:
    FILES.append(fn)
    return fn


def dirs(fn: Recogniser) -> Recogniser:
    DIRS.append(fn)
    return fn


def composite(fn: Recogniser) -> Recogniser:
    COMPOSITES.append(fn)
    return fn


CLAIMS: list[tuple[Callable[[str], object], Recogniser]] = []


def claims(match: Callable[[str], object]) -> Callable[[Recogniser], Recogniser]:
    """Register a directory recogniser (``@dirs`` too) that is asked first about a directory
    whose name ``match`` accepts, and alone when it answers: such a directory is laid out by
    one tool only (a hub cache's ``models--org--name``), and asking the others about each of
    hundreds of them costs more than the answer."""
    def register(fn: Recogniser) -> Recogniser:
        CLAIMS.append((match, fn))
        return fn
    return register


def best(ctx: Ctx, recognisers: list[Recogniser],
         current: Classification | None = None) -> Classification | None:
    """The most confident answer; earlier registrations win ties. For directories, a
    recogniser that claims the name (:func:`claims`) and answers has the only say."""
    reader = ctx.reader
    tried = None
    if recognisers is DIRS and CLAIMS and not reader.timed_out:
        for match, r in CLAIMS:
            if match(ctx.name):
                c = r(ctx)
                if c is not None:
                    return c
                tried = r
    for r in recognisers:
        if r is tried:
            continue
        if reader.timed_out:      # out of entries still lets a node say what it is
            break
        c = r(ctx)
        if c is not None and (current is None or c.confidence > current.confidence):
            current = c
    return current


def cls(kind: str, label: str, *, recoverable: str | None = None, source: str | None = None,
        confidence: float = 0.9, guess: bool = False, evidence: tuple[str, ...] = (),
        **details) -> Classification:
    """A Classification with the details given as keywords (None values dropped)."""
    return Classification(kind, label, recoverable, source,
                          {k: v for k, v in details.items() if v is not None},
                          confidence, guess, evidence)
