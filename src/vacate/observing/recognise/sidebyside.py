"""Looking at the top-level items side by side: this process and a few forked children take
the items one at a time, biggest first, from a shared queue (a pipe of item numbers), so that
a single huge item does not leave the other CPUs idle while the small ones queue behind it.
The biggest item is split as well: while this process looks at its first subdirectories, each
child looks at a later run of them (:meth:`~vacate.observing.recognise.explore.Explorer.look_ahead`),
and this process takes those over in order. How many look depends on what the walk met
(:func:`processes`): on a cold cache the looking waits on the disk (a hub cache's snapshot
links and shard heads are a read each), so more processes than CPUs, and the biggest item's
hub repos read ahead all at once first (:func:`~vacate.observing.recognise.hub_cache.read_ahead`);
warm, one per CPU (more only share the CPUs and cost more in all). Meanwhile (``spare``) this
process does its caller's work that does not depend on the result when it would wait.

Each item is looked at with the entry budget fixed for it beforehand
(:func:`~vacate.observing.recognise.explore.entry_budgets`), by its own :class:`Explorer` state, so the
result does not depend on which process took it or when; a subdirectory looked at elsewhere is
taken over only where looking at it here would have listed and counted the same
(:meth:`~vacate.observing.recognise.explore.Explorer.subtree`). The children send what they found back
pickled; if one fails, whatever it had taken is looked at again here.
"""

from __future__ import annotations

import os
import pickle
import struct
import time
from collections.abc import Callable, Sequence

from vacate.observing.collectors.forking import can_fork, cpus, die_with_parent
from vacate.observing.compat import exit_code, widen_pipe
from vacate.observing.model.inventory import Item, Stats
from vacate.observing.recognise import hub_cache
from vacate.observing.recognise.explore import Explorer, Subtree

Found = "dict[int, tuple]"        # item number -> (Classification, sub-items, problems)
_REC = struct.Struct("=I")
MIN_ENTRIES = 20_000               # below this many entries in all, one process is quicker
MAX_QUEUE = 16_000                 # item numbers a pipe holds without a reader (64 KiB)


def processes(cpu_bound: bool = False) -> int:
    """How many look side by side. Where it only computes (``cpu_bound``: a warm cache), one
    per CPU, 2 to 8: more just share the CPUs and cost more in all (a 1M-entry tree, warm, 2
    CPUs: 1.4 CPU-s and 0.8 s with 2, 1.8 CPU-s and 1.0 s with 8). Where looking waits on the
    disk (a cold cache), two per CPU, 4 to 8, to keep it busy: with the biggest item's hub
    repos read ahead first (:func:`~vacate.observing.recognise.hub_cache.read_ahead`), 4 are quicker
    than 8 right after a cold walk (1.04-1.09 s against 1.17-1.37 s, 1.5 against 1.8-2.3
    CPU-s), and 2 leave the disk idle. Not more than 8, whatever the CPUs: each child dirties
    ~10-20 MB of pages."""
    n = cpus()
    return max(2, min(8, n)) if cpu_bound else max(4, min(8, 2 * n))


def look_all(items: Sequence[Item], budgets: Sequence[int],
             stats_of: Callable[[str], Stats | None], budget_s: float, deadline: float,
             parallel: bool = True, cpu_bound: bool = False,
             spare: Callable[[], object] | None = None) -> Found:
    """Look at ``items`` (until ``deadline``, a ``time.monotonic()`` value): the items looked
    at, by number; an item missing was not looked at (the time was spent). ``cpu_bound``:
    looking is expected to wait on nothing (see :func:`processes`). ``spare`` is called once,
    when this process has nothing left to look at but the children may still be looking (or
    at the end, with no children): work of the caller's that does not depend on the result
    (the scan encodes its drill-down), done while this process would otherwise wait."""
    # biggest first: they cost most (weights mean headers to read) and, should the time run
    # out, matter most
    order = sorted(range(len(items)), key=lambda i: -items[i].stats.apparent_bytes)
    if not (parallel and 1 < len(order) <= MAX_QUEUE and can_fork()
            and sum(_entries(it) for it in items) >= MIN_ENTRIES):
        queue = iter(order)
        found = _look(items, budgets, stats_of, budget_s, deadline, lambda: next(queue, None))
        if spare is not None:
            spare()
        return found
    nproc = processes(cpu_bound)
    big = order[0]
    ex = Explorer(stats_of, budget_s)
    reach = ex.reach(items[big], budgets[big]) if items[big].is_dir else []
    runs = ex.look_ahead(items[big], budgets[big], nproc, reach) if reach else []
    if not cpu_bound:
        # waiting on the disk: what looking at the biggest item will read, asked for at once
        # (a hub cache: each repo's links, refs and blob heads), before any process reads
        hub_cache.read_ahead(p for p, _ in reach)
    tr, tw = os.pipe()
    try:
        _write_all(tw, b"".join(_REC.pack(i) for i in (order[1:] if runs else order)))
    finally:
        os.close(tw)
    take = _taker(tr)
    parent = os.getpid()
    kids: list[tuple[int, int, int]] = []          # (pid, found read fd, subtrees read fd)
    mine: Found = {}
    theirs: Found = {}
    failed = False
    try:
        for k in range(nproc - 1):
            rr, rw = os.pipe()
            mr, mw = os.pipe()
            _widen(mw)
            try:
                child = os.fork()
            except OSError:                 # no more processes (EAGAIN, ENOMEM): with fewer
                for fd in (rr, rw, mr, mw):
                    os.close(fd)
                break
            if child == 0:                                 # a child: look, report, leave
                code = 1
                try:
                    for fd in (rr, mr, *(fd for _, r, m in kids for fd in (r, m))):
                        os.close(fd)
                    die_with_parent(parent)
                    if k < len(runs):
                        left = max(0.0, min(budget_s, deadline - time.monotonic()))
                        _send(mw, Explorer(stats_of, left).subtrees(items[big], runs[k]))
                    os.close(mw)
                    found = _look(items, budgets, stats_of, budget_s, deadline, take)
                    _write_all(rw, pickle.dumps(found, pickle.HIGHEST_PROTOCOL))
                    code = 0
                finally:
                    os._exit(code)
            os.close(rw)
            os.close(mw)
            kids.append((child, rr, mr))
        if runs:
            # the biggest item here, the later runs of its subdirectories there meanwhile
            looked = _Received({p: kids[k][2] for k, run in enumerate(runs[:len(kids)])
                                for p in run})
            mine = _look(items, budgets, stats_of, budget_s, deadline,
                         iter((big, None)).__next__, looked.get)
        for _, _, mr in kids:
            os.close(mr)
        kids = [(pid, rr, -1) for pid, rr, _ in kids]
        mine.update(_look(items, budgets, stats_of, budget_s, deadline, take))
        if spare is not None:
            spare()
        while kids:
            pid, rr, _ = kids[0]
            data = _read_all(rr)
            _, status = os.waitpid(pid, 0)
            os.close(rr)
            kids.pop(0)
            if exit_code(status) == 0:
                theirs.update(pickle.loads(data))
            else:
                failed = True
    finally:
        os.close(tr)
        for pid, rr, mr in kids:        # interrupted here (^C, SIGTERM): no child left behind
            for fd in (rr, mr):
                if fd >= 0:
                    os.close(fd)
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
    mine.update(theirs)
    if failed:                          # a child failed: its items again, here
        left = iter([i for i in order if i not in mine])
        mine.update(_look(items, budgets, stats_of, budget_s, deadline,
                          lambda: next(left, None)))
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
    """The subtrees the children looked at (:meth:`Explorer.subtrees`): ``fds`` maps each
    path to the pipe of the child that has it, read when first asked for (a child sends its
    run all at once; nothing, if it failed: then each is looked at here)."""

    def __init__(self, fds: dict[str, int]):
        self.fds = fds
        self.got: dict[int, dict[str, Subtree]] = {}

    def get(self, path: str) -> Subtree | None:
        fd = self.fds.get(path)
        if fd is None:
            return None
        if fd not in self.got:
            try:
                self.got[fd] = pickle.loads(_read_all(fd))
            except (pickle.UnpicklingError, EOFError, ValueError):   # the child died midway
                self.got[fd] = {}
        return self.got[fd].get(path)


PIPE_WANTED = 4 << 20     # what a child's subtrees take pickled (a hub's 272 repos: 180 kB)


def _widen(fd: int) -> None:
    """Let the pipe ``fd`` hold what a child sends of its subtrees without a reader: the
    parent reads them only when it comes to them, and a child whose write blocks until then
    looks at nothing meanwhile (64 kB, the default, holds a quarter of a 272-repo hub's; its
    child waits ~0.17 s). Beyond what the system lets, the child waits for the reader."""
    widen_pipe(fd, PIPE_WANTED)


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
