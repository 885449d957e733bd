"""Looking at the top-level items on two CPUs: this process and one forked child take the
items one at a time, biggest first, from a shared queue (a pipe of item numbers), so that a
single huge item does not leave the other CPU idle while the small ones queue behind it.

Each item is looked at with the entry budget fixed for it beforehand
(:func:`~vacate.recognise.explore.entry_budgets`), by its own :class:`Explorer` state, so the
result does not depend on which process took it or when. The child sends what it found back
pickled; if it fails, whatever it had taken is looked at again here.
"""

from __future__ import annotations

import os
import pickle
import struct
import time
from collections.abc import Callable, Sequence

from vacate.collectors.forking import can_fork, die_with_parent
from vacate.model.inventory import Item, Stats
from vacate.recognise.explore import Explorer, Subtree

Found = dict[int, tuple]          # item number -> (Classification, sub-items, problems)
_REC = struct.Struct("=I")
MIN_ENTRIES = 20_000               # below this many entries in all, one process is quicker
MAX_QUEUE = 16_000                 # item numbers a pipe holds without a reader (64 KiB)


def look_all(items: Sequence[Item], budgets: Sequence[int],
             stats_of: Callable[[str], Stats | None], budget_s: float, deadline: float,
             parallel: bool = True) -> Found:
    """Look at ``items`` (until ``deadline``, a ``time.monotonic()`` value): the items looked
    at, by number; an item missing was not looked at (the time was spent)."""
    # biggest first: they cost most (weights mean headers to read) and, should the time run
    # out, matter most
    order = sorted(range(len(items)), key=lambda i: -items[i].stats.apparent_bytes)
    if not (parallel and 1 < len(order) <= MAX_QUEUE and can_fork()
            and sum(_entries(it) for it in items) >= MIN_ENTRIES):
        queue = iter(order)
        return _look(items, budgets, stats_of, budget_s, deadline, lambda: next(queue, None))
    big = order[0]
    ahead = Explorer(stats_of, budget_s).look_ahead(items[big], budgets[big]) \
        if items[big].is_dir else []
    tr, tw = os.pipe()
    rr, rw = os.pipe()
    mr, mw = os.pipe()
    try:
        _write_all(tw, b"".join(_REC.pack(i) for i in (order[1:] if ahead else order)))
    finally:
        os.close(tw)
    take = _taker(tr)
    parent = os.getpid()
    child = os.fork()
    if child == 0:                                         # the child: look, report, leave
        code = 1
        try:
            os.close(rr)
            os.close(mr)
            die_with_parent(parent)
            if ahead:
                _send(mw, Explorer(stats_of, max(0.0, min(budget_s, deadline - time.monotonic())))
                      .subtrees(items[big], ahead))
            os.close(mw)
            found = _look(items, budgets, stats_of, budget_s, deadline, take)
            _write_all(rw, pickle.dumps(found, pickle.HIGHEST_PROTOCOL))
            code = 0
        finally:
            os._exit(code)
    os.close(rw)
    os.close(mw)
    theirs: Found | None = None
    try:
        mine: Found = {}
        if ahead:
            # the biggest item here, its later subdirectories there meanwhile
            looked = _Received(mr, frozenset(ahead))
            mine = _look(items, budgets, stats_of, budget_s, deadline,
                         iter((big, None)).__next__, looked.get)
        os.close(mr)
        mr = -1
        mine.update(_look(items, budgets, stats_of, budget_s, deadline, take))
        data = _read_all(rr)
        _, status = os.waitpid(child, 0)
        child = 0
        if os.waitstatus_to_exitcode(status) == 0:
            theirs = pickle.loads(data)
    finally:
        os.close(rr)
        os.close(tr)
        if mr >= 0:
            os.close(mr)
        if child:                       # interrupted here (^C, SIGTERM): no child left behind
            try:
                os.kill(child, 9)
            except ProcessLookupError:
                pass
            os.waitpid(child, 0)
    if theirs is None:                  # the child failed: its items again, here
        theirs = {}
        left = iter([i for i in order if i not in mine])
        mine.update(_look(items, budgets, stats_of, budget_s, deadline,
                          lambda: next(left, None)))
    mine.update(theirs)
    return mine


def _entries(it: Item) -> int:
    return it.stats.files + it.stats.dirs if it.is_dir else 1


def _look(items: Sequence[Item], budgets: Sequence[int],
          stats_of: Callable[[str], Stats | None], budget_s: float, deadline: float,
          take: Callable[[], int | None],
          looked: Callable[[str], Subtree | None] | None = None) -> Found:
    ex = Explorer(stats_of, budget_s, looked)
    found: Found = {}
    while (i := take()) is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            continue                    # not looked at: the caller says how many
        ex.budget_s = min(budget_s, left)
        found[i] = ex.item(items[i], budgets[i])
    return found


class _Received:
    """The subtrees the child looked at (:meth:`Explorer.subtrees`), read from ``fd`` when
    first asked for one of ``paths`` (the child sends them all at once; nothing, if it
    failed: then each is looked at here)."""

    def __init__(self, fd: int, paths: frozenset[str]):
        self.fd, self.paths = fd, paths
        self.got: dict[str, Subtree] | None = None

    def get(self, path: str) -> Subtree | None:
        if path not in self.paths:
            return None
        if self.got is None:
            try:
                self.got = pickle.loads(_read_all(self.fd))
            except (pickle.UnpicklingError, EOFError, ValueError):   # the child died midway
                self.got = {}
        return self.got.get(path)


def _send(fd: int, found) -> None:
    """Pickled down ``fd``; a reader that has left (it no longer needs it) is no error."""
    try:
        _write_all(fd, pickle.dumps(found, pickle.HIGHEST_PROTOCOL))
    except BrokenPipeError:
        pass


def _taker(fd: int) -> Callable[[], int | None]:
    def take() -> int | None:
        rec = os.read(fd, _REC.size)   # written at once before the fork: whole records
        return _REC.unpack(rec)[0] if len(rec) == _REC.size else None
    return take


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
