"""Enumerate the sources to archive: what each one holds (:mod:`vacate.observing.collectors.contents`:
the same filesystem, btrfs subvolumes included, nested mounts never), walked fd-relative
(:func:`vacate.observing.fsio.walk`), deterministic, depth-first and name-sorted, never following a
symlink.

What the walk meets but does not yield is a :class:`Problem` whose code says why:
``LEFT_OUT`` codes (vanished, replaced, unreadable) make an archive incomplete; ``NOTES``
codes (sockets, which tar cannot hold, and mounts, which are not the item's) are recorded in
the manifest as notes; ``excluded`` is what the caller asked to leave out.
"""

from __future__ import annotations

import os
import stat as S
from collections.abc import Iterator
from dataclasses import dataclass

from vacate.observing import fsio
from vacate.observing.collectors import contents
from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem

LEFT_OUT = frozenset({"vanished", "replaced", "unreadable", "unreadable-dir"})
NOTES = frozenset({"socket", "other-filesystem"})


@dataclass(frozen=True, **SLOTS)
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


def left_out(problem: Problem) -> bool:
    """Whether ``problem`` is something the item holds that the archive does not."""
    return problem.code in LEFT_OUT


def note_error(problems: list[Problem], path: bytes, e: OSError) -> None:
    """The Problem of ``path`` that could not be listed, stat'ed, opened or read."""
    p = os.fsdecode(path)
    if isinstance(e, FileNotFoundError):
        problems.append(Problem("vanished", f"{p}: vanished while it was archived", p))
    elif isinstance(e, fsio.Replaced):
        problems.append(Problem("replaced", f"{p}: {e.strerror}", p))
    else:
        code = "unreadable-dir" if isinstance(e, (PermissionError, NotADirectoryError)) \
            else "unreadable"
        problems.append(Problem(code, f"{p}: {e.strerror or e}", p, blocks_verdict=True))


def walk(root: bytes, arcroot: bytes, problems: list[Problem],
         exclude: frozenset[bytes] = frozenset()) -> Iterator[SourceEntry]:
    """The entries of the source ``root``, named ``arcroot`` in the archive. ``exclude``:
    archive paths (``arcroot/...``) never entered nor archived (what the person excluded, the
    archive itself when it is written inside the source)."""
    try:
        is_dir = S.S_ISDIR(os.lstat(root).st_mode)
    except OSError as e:
        note_error(problems, root, e)
        return
    c = contents.of_path(os.fsdecode(root)) if is_dir else None
    rb = os.fsencode(c.root) if c else root
    # the mountpoints below, as paths of this walk (``root`` may have symlinks in it)
    mounts = frozenset(root + os.fsencode(m)[len(rb):] for m in c.skip) if c else frozenset()
    drop = {root + a[len(arcroot):]: a for a in exclude}

    def skip(p: bytes) -> bool:
        if p in drop:
            problems.append(Problem("excluded", f"{os.fsdecode(p)}: excluded; not archived",
                                    os.fsdecode(p)))
            return True
        if p in mounts:
            problems.append(Problem("other-filesystem", f"{os.fsdecode(p)} is a mountpoint "
                                    "(another filesystem); not archived", os.fsdecode(p)))
            return True
        return False

    def enter(p: bytes, st: os.stat_result) -> bool:
        return c.descends(os.fsdecode(p), st.st_dev) is contents.INSIDE

    cut = len(root)
    for p, st in fsio.walk(root, enter=enter, skip=skip,
                           error=lambda p, e: note_error(problems, p, e)):
        mode = st.st_mode
        if S.S_ISDIR(mode) and p != root and not enter(p, st):
            problems.append(Problem("other-filesystem", f"{os.fsdecode(p)} is another "
                                    "filesystem; not archived", os.fsdecode(p)))
            continue
        if S.S_ISSOCK(mode):
            problems.append(Problem("socket", f"{os.fsdecode(p)} is a socket (tar cannot "
                                    "hold one); recorded as a note", os.fsdecode(p)))
            continue
        yield SourceEntry(p, arcroot + p[cut:], st)
