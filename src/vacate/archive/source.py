"""Enumerate the sources to archive: a deterministic, depth-first, name-sorted walk that never
follows symlinks and never crosses into another filesystem."""

from __future__ import annotations

import os
import stat as S
from collections.abc import Iterator
from dataclasses import dataclass

from vacate.model.common import Problem


@dataclass(frozen=True, slots=True)
class SourceEntry:
    """A file to archive: where it is, its name in the archive, its stat."""
    abspath: bytes
    arcpath: bytes          # path inside the archive, e.g. b"eagle3/ckpt/model.pt"
    st: os.stat_result


def arc_roots(sources: list[str]) -> list[tuple[bytes, bytes]]:
    """(absolute source path, top-level archive name) per source; names must be unique."""
    out = []
    seen = set()
    for s in sources:
        ab = os.fsencode(os.path.abspath(s))
        base = os.path.basename(ab.rstrip(b"/"))
        if not base:
            raise ValueError(f"cannot archive {s!r} itself: name a directory below /")
        if base in seen:
            raise ValueError(f"two sources share the name {os.fsdecode(base)!r}")
        seen.add(base)
        out.append((ab, base))
    return out


def walk(root: bytes, arcroot: bytes, problems: list[Problem],
         exclude: frozenset[bytes] = frozenset()) -> Iterator[SourceEntry]:
    """``exclude``: absolute paths never entered (the archive being written, when it lies
    inside a source)."""
    try:
        st = os.lstat(root)
    except OSError as e:
        problems.append(Problem("unreadable", f"{os.fsdecode(root)}: {e.strerror}",
                                os.fsdecode(root), blocks_verdict=True))
        return
    yield SourceEntry(root, arcroot, st)
    if not S.S_ISDIR(st.st_mode):
        return
    dev = st.st_dev
    stack = [(root, arcroot)]
    while stack:
        d, arc = stack.pop()
        try:
            with os.scandir(d) as it:
                names = sorted(e.name for e in it)
        except OSError as e:
            problems.append(Problem("unreadable-dir", f"{os.fsdecode(d)}: {e.strerror}",
                                    os.fsdecode(d), blocks_verdict=True))
            continue
        subdirs = []
        for name in names:
            p = d + b"/" + name
            try:
                est = os.lstat(p)
            except OSError as e:
                problems.append(Problem("vanished", f"{os.fsdecode(p)}: {e.strerror}",
                                        os.fsdecode(p)))
                continue
            a = arc + b"/" + name
            if p in exclude:
                problems.append(Problem("excluded", f"{os.fsdecode(p)} is where the archive "
                                        "is written; not archived", os.fsdecode(p)))
                continue
            if S.S_ISDIR(est.st_mode):
                if est.st_dev != dev:
                    problems.append(Problem("other-filesystem",
                                            f"{os.fsdecode(p)} is another filesystem; "
                                            "not archived", os.fsdecode(p)))
                    continue
                subdirs.append((p, a))
            elif S.S_ISSOCK(est.st_mode):
                problems.append(Problem("socket", f"{os.fsdecode(p)} is a socket; not archived",
                                        os.fsdecode(p)))
                continue
            yield SourceEntry(p, a, est)
        stack.extend(reversed(subdirs))   # their contents next, in name order
