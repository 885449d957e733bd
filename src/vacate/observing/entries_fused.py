"""The entries files of the items to delete taken from the scan's own walk: one ``fstatat``
an entry for both the scan and the record, instead of a second walk of each item after the
scan (:func:`vacate.observing.entries.write_entries_file`).

``plan`` knows the items it is asked to delete (``--delete P``) before it observes the
volume. It hands them to the walk (:class:`WalkRecords`, through ``observe`` and ``scan``).
The walk lists the directories above an item in Python, with every entry's full ``lstat``
(``Walker.needs_full``: the item's own row needs its ctime, which the C listing does not
keep), and every directory inside one in C (``_fastwalk.Descent``'s record mode, or
``Walker.listdir_full`` where C was not built or for the few directories of the walk's
breadth-first start). For each directory inside an item the walker that listed it -- a
forked walker, most of them -- builds the rows the recorder would (from the same ``lstat``
the scan counts), sorts them, encodes the directory's line
(:func:`~vacate.observing.entries.dir_line`), takes its sha256 and compresses its gzip
member (:func:`~vacate.observing.entries.gzip_member`): the compression, ~1 s of CPU a
million entries and most of what recording costs, is shared among the walkers. It sends
the member back with its part, with the line's digest, the directory's entry count and
totals. The parent appends each run of members to the item's entries file as it comes (in
any order: the index says where each one is) and keeps an index line per directory; once
the walk is done (while the recognisers' processes look), the index is sorted, the digest
taken and the index member written by :class:`~vacate.observing.entries.EntriesStream`, as for a
record made alone. So the file is what :class:`~vacate.observing.entries.EntriesFile` reads,
and the digest is the one :func:`~vacate.observing.entries.record_item` gives for the same
unchanged tree; only the order of the members, and so the file's sha256, may differ.

Why this is safe: the staleness check and apply record the item alone again and compare
digests, so a record of the walk's that differed from the recorder's could only make apply
refuse the item as changed, never delete anything the recorder would not have recorded.
The walk's record is used only where it is certain to be that same record (else
:meth:`WalkRecords.recorded` gives None and the plan records the item alone, as before):

- the item is a directory on the target's device, reached by the walk as itself (an item
  spelled through a symlink is never reached: the walk does not follow them);
- no mount point inside it, nor on it or above it (from the mount table, which the walk
  skips; the recorder writes a ``mountpoint`` row the walk cannot). A mount the table did
  not show (made during the walk) is the one case the walk's record differs: apply then
  refuses the item as changed, as it would for any change after the plan;
- every entry inside it is on the item's device (no btrfs subvolume, no file bind-mounted
  from elsewhere: the recorder's ``subvolume`` and ``mountpoint`` rows);
- the walk met no problem at or inside it (a directory or an entry it could not read, one
  that vanished or changed while it was walked, a walker that died): the recorder would
  name it in the record, or skip it silently where the walk warns;
- every directory inside it was recorded once: one line for the item and one for each
  ``dir`` row of the lines (nothing lost between processes);
- of items nested in one another, only the outermost (the inner one goes with it).

What is never taken from the walk: items the plan decides to delete on its own (not named
by ``--delete``; recorded alone once decided), an item named by a glob, and every item of a
plan made elsewhere (``--host``) or in a container (``--ct``): the walk runs in another
process, on another machine, there. The record is the tree as the scan saw it, which is
what the plan decided from; a change after that is found by apply's staleness check as
before.

Standard library only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

from vacate.observing.entries import (
    KIND_OF_MODE,
    EntriesStream,
    Recorded,
    commit_file,
    dir_line,
    encode_str,
    gzip_member,
    open_temp,
    row_totals,
)
from vacate.observing.fsio import remove_quietly
from vacate.observing.model.common import Problem

_FMT = 0o170000


def _under(path: str, top: str) -> bool:
    """``path`` is ``top`` or below it."""
    return path == top or path.startswith(top + "/") or top == "/"


def _ancestors(path: str) -> Iterable[str]:
    """The directories above ``path`` ("/" included)."""
    while path != "/":
        path = path.rpartition("/")[0] or "/"
        yield path


class _Item:
    """The parent's side of one item's record: its entries file as it is written."""

    __slots__ = ("done", "fd", "lines", "ok", "root", "stream", "subdirs", "tmp")

    def __init__(self) -> None:
        self.ok = True
        self.done: Recorded | None = None     # finished, not taken yet
        self.root: tuple | None = None
        self.lines = 0
        self.subdirs = 0
        self.fd = -1
        self.tmp = ""
        self.stream: EntriesStream | None = None


class WalkRecords:
    """The items (absolute paths) whose entries the walk records, into entries files in
    ``directory``, for the target's device ``dev``. The walkers call :meth:`related`,
    :meth:`item_of`, :meth:`listing` and :meth:`sink` (in forked walkers too: they use
    nothing but the items); this process :meth:`prepare`, :meth:`take` (what the walkers
    sent) and :meth:`taint` (what makes a record unusable), :meth:`finish`, then
    :meth:`recorded` per item, and :meth:`close` (the files nobody took are removed)."""

    def __init__(self, items: Iterable[str], *, directory: str, dev: int):
        paths = sorted({os.path.normpath(p) for p in items if p.startswith("/")})
        self.items = tuple(p for p in paths if not any(
            q != p and _under(p, q) for q in paths))     # the outermost of nested ones
        self.directory = directory
        self.dev = dev
        self._state: dict[str, _Item] = {p: _Item() for p in self.items}
        self._above = frozenset(a for it in self.items for a in _ancestors(it))

    # -- in the walkers --------------------------------------------------------------------
    def related(self, path: str) -> bool:
        """The directory ``path`` is inside an item, is one, or lies above one: the walk
        lists it keeping what the record needs (see the module's doc)."""
        return path in self._above or self.item_of(path) is not None

    def item_of(self, path: str) -> str | None:
        """The item the directory ``path`` lies in (or is), if any (a set lookup a level
        of ``path``: the walk asks for every directory it lists in Python)."""
        state = self._state
        while path not in state:
            if path == "/" or "/" not in path:
                return None
            path = path.rpartition("/")[0] or "/"
        return path

    def listing(self, item: str, path: str, dst: os.stat_result, entries: list) -> tuple:
        """What the walker sends of the directory ``path`` inside ``item`` (its ``lstat``
        ``dst``), listed as ``entries`` ((name, lstat) each): (item, rel, member, the
        line's sha256, entries, subdirectories, files, apparent bytes, newest mtime, newest
        ctime, the item's own row where ``path`` is the item); the member None where the
        record cannot be the recorder's (another device inside)."""
        rel = path[len(item) + 1:] if path != item else ""
        dev = dst.st_dev
        root = None
        if not rel:
            root = self._root(dst)
            if root is None:
                return (item, rel, None)
        kinds = KIND_OF_MODE.get
        rows = []
        subdirs = 0
        for name, st in entries:
            if st.st_dev != dev:
                return (item, rel, None)
            kind = kinds(st.st_mode & _FMT, "other")
            if kind == "dir":
                subdirs += 1
            rows.append((name, kind, dev, st.st_ino, st.st_size, st.st_mtime_ns,
                         st.st_ctime_ns, st.st_nlink))     # entries.row_of, written out
        rows.sort()
        line = dir_line(rel, rows)
        totals = row_totals(rows) if rows else (0, 0, 0, 0, 0)
        return (item, rel, gzip_member(line), hashlib.sha256(line).digest(), subdirs,
                *totals, root)

    def sink(self, item: str, path: str, st, records) -> tuple:
        """What ``_fastwalk.Descent`` records the directory ``path`` inside ``item`` (its
        ``lstat`` ``st``) and all below it with: (cut, sink, encode), the sink appending
        what :meth:`listing` gives to the list ``records()`` returns."""
        root = self._root(st) if path == item else None

        def line(rel: str, line: bytes, entries: int, files: int, apparent: int, m: int,
                 c: int, subdirs: int, same: bool) -> None:
            records().append(
                (item, rel, gzip_member(line), hashlib.sha256(line).digest(), subdirs,
                 entries, files, apparent, m, c, root if not rel else None)
                if same and (rel or root is not None) else (item, rel, None))

        return (len(item) + 1, line, encode_str)

    def _root(self, st) -> tuple | None:
        """The item's own row, from its ``lstat`` (None: not one the recorder's could be)."""
        if st.st_dev != self.dev or getattr(st, "st_ctime_ns", None) is None:
            return None
        return ("", "dir", st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                st.st_nlink)

    # -- in this process -------------------------------------------------------------------
    def prepare(self, skip: Iterable[str]) -> None:
        """The walk skips the mount points ``skip``: an item with one inside, on or above it
        is recorded alone."""
        for m in skip:
            for it in self.items:
                if _under(m, it) or _under(it, m):
                    self._state[it].ok = False

    def take(self, records: list) -> None:
        """What a walker sent (:meth:`listing`'s tuples): each item's members appended to
        its file, a run of them at once."""
        i, n = 0, len(records)
        while i < n:
            item, j = records[i][0], i + 1
            while j < n and records[j][0] == item:
                j += 1
            self._take(self._state[item], item, records[i:j])
            i = j

    def _take(self, s: _Item, item: str, records: list) -> None:
        if not s.ok:
            return
        if any(r[2] is None for r in records):
            self._drop(s)
            return
        try:
            if s.stream is None:
                s.fd, s.tmp = open_temp(self.directory, f"-{self.items.index(item)}")
                s.stream = EntriesStream(os.fdopen(os.dup(s.fd), "wb", buffering=1 << 20), item,
                                   self.dev, thread=False)
            stream = s.stream
            at = stream.append(b"".join([r[2] for r in records]))[0]
            stream.out.flush()   # nothing buffered when walkers or lookers are forked
        except OSError:         # (the directory full, say): recorded alone, which says why
            self._drop(s)
            return
        index = stream.index
        for _, rel, z, digest, subdirs, entries, files, apparent, m, c, root in records:
            index.append((rel, at, len(z), entries, digest))
            at += len(z)
            if entries:
                stream.totals(entries, files, apparent, m, c)
            s.subdirs += subdirs
            if root is not None:
                s.root = root
        s.lines += len(records)

    def taint(self, problems: Iterable[Problem]) -> None:
        """The walk's problems: an item at or above which one was met (or one without a
        path: a walker that died) is recorded alone."""
        for p in problems:
            for it in self.items:
                if p.path is None or _under(p.path, it):
                    self._drop(self._state[it])

    def finish(self) -> None:
        """Finish every item's record now (the walk is done): its index written, its file
        committed. ``scan`` calls it while the recognisers' processes look, when this one
        would wait."""
        for item, s in self._state.items():
            if s.ok and s.done is None:
                s.done = self._finish(item, s)

    def recorded(self, item: str) -> Recorded | None:
        """The item's record, its entries file committed in the directory (named by its
        sha256), taken (:meth:`close` leaves it); None where the walk's record is not
        certain to be the recorder's (see the module's doc): record it alone."""
        s = self._state.get(item)
        if s is None or not s.ok:
            return None
        rec = s.done if s.done is not None else self._finish(item, s)
        s.done = None
        return rec

    def _finish(self, item: str, s: _Item) -> Recorded | None:
        if s.stream is None or s.root is None or s.lines != s.subdirs + 1 or \
                len({x[0] for x in s.stream.index}) != s.lines:
            self._drop(s)
            return None
        try:
            rec = s.stream.finish(item, self.dev, s.root, ())
            s.stream.out.close()
            s.stream = None
            fd, s.fd = s.fd, -1
            return commit_file(fd, s.tmp, self.directory, rec)
        except OSError:         # as in _take: recorded alone
            self._drop(s)
            return None
        except BaseException:
            self._drop(s)
            raise

    def _drop(self, s: _Item) -> None:
        s.ok = False
        if s.stream is not None:
            try:
                s.stream.out.close()
            except OSError:
                pass            # (what it could not write is removed below)
            s.stream = None
        if s.fd >= 0:
            os.close(s.fd)
            s.fd = -1
            remove_quietly(s.tmp)

    def close(self) -> None:
        """Remove what was written and not taken."""
        for s in self._state.values():
            self._drop(s)
            if s.done is not None:
                remove_quietly(os.path.join(self.directory, s.done.file))
                s.done = None
