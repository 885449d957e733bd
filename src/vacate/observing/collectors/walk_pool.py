"""The walk of a large tree shared among forked walker processes (threads would share one
GIL, which makes them slower than one process). The parent deals out the pending directories
at once; a worker hands half of what it has pending back when another one is idle
(``split``), and sends what it found in pieces while it walks (``part``), which the parent
merges as they come (:class:`~vacate.observing.collectors.walk_finish.Merge`).
Standard library only.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import typing

from vacate.observing.collectors.forking import die_with_parent
from vacate.observing.collectors.walk_finish import Merge
from vacate.observing.collectors.walk_loops import Part, Walker
from vacate.observing.model.common import Problem

ProgressFn = typing.Callable[[int, int], None]   # (typing: run-time alias on 3.8)
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def _worker(cls: type[Walker], conn, root_dev, subvolumes, skip, keep, idle, record, items,
            parent) -> None:
    """A walker process: walks the directories it is sent (``cls``, one walker for its
    life) and sends back what it found, until it is sent None."""
    # the parent handles ^C and SIGTERM and kills its workers; they just die
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)   # blocked while forking
    die_with_parent(parent)
    # one walker for the process's life: its largest-file threshold carries over from task
    # to task (files below it cannot be among the largest any more)
    w = cls(root_dev, subvolumes, skip, keep, conn, idle, record, items)
    try:
        while True:
            tasks = conn.recv()
            if tasks is None:
                return
            w.part = Part()
            w.reported = (0, 0)
            for path, dev, ino in tasks:
                w.subtree(path, dev, ino)
                w.report()
            conn.send(("done", w.part, w.reported))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        return


def pool_walk(w: Walker, merge: Merge, queue: list, nworkers: int,
              progress: ProgressFn | None) -> tuple[list[Problem], int]:
    """Walk the directories in ``queue`` ((path, stat) each) with ``nworkers`` forked
    processes, each a walker of ``w``'s kind and settings, merging what they find into
    ``merge``; the problems of the pool itself (a walker that died) and the workers used."""
    ctx = multiprocessing.get_context("fork")
    idle = ctx.RawValue("i", 0)
    procs, conns = [], []
    problems: list[Problem] = []
    finished = False
    try:
        # a SIGTERM/^C between start() and append() would leave a walker nobody kills:
        # hold those signals until every started walker is on the list (they are delivered
        # right after, inside this try, and the finally below kills the walkers)
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            for _ in range(nworkers):
                a, b = ctx.Pipe()
                p = ctx.Process(target=_worker, daemon=True,
                                args=(type(w), b, w.root_dev, w.subvolumes, w.skip, w.keep,
                                      idle, w.record, w.items, os.getpid()))
                p.start()
                procs.append(p)
                conns.append(a)
                b.close()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        # hand out the frontier, biggest-looking (most subdirectories) first
        pending = [(p, s.st_dev, s.st_ino) for p, s in
                   sorted(queue, key=lambda t: t[1].st_nlink, reverse=True)]
        free = list(conns)
        busy: set = set()
        entries, nbytes = merge.entries, 0

        def dispatch() -> None:
            # everything pending goes out at once, shared among the free workers (dealt
            # round-robin, so each gets big and small directories): a worker never waits on
            # this process while it has work, and round trips are few (they are what costs
            # most when the machine is busy); balance comes from workers splitting their work
            # when another one is idle
            if free and pending:
                n = len(free)
                for i in range(n):
                    c = free.pop()
                    c.send(pending[i::n])
                    busy.add(c)
                pending.clear()
            idle.value = len(free)

        dispatch()
        while busy:
            for c in multiprocessing.connection.wait(list(busy)):
                try:
                    msg = c.recv()
                except EOFError:
                    busy.discard(c)
                    problems.append(Problem("walk-incomplete", "a walker process died; the "
                                            "totals miss part of the tree", None, True))
                    continue
                kind = msg[0]
                if kind == "progress":
                    entries += msg[1]
                    nbytes += msg[2]
                    if progress is not None:
                        progress(entries, nbytes)
                elif kind == "split":
                    pending.extend(msg[1])
                elif kind in ("done", "part"):
                    part, (rep_e, rep_b) = msg[1], msg[2]
                    entries += part.entries - rep_e
                    nbytes += part.nbytes - rep_b
                    merge.add(part)
                    if kind == "done":
                        busy.discard(c)
                        free.append(c)
                    if progress is not None:
                        progress(entries, nbytes)
            dispatch()
        for c in conns:
            c.send(None)
        finished = True
    finally:
        for p in procs:     # only the processes started here
            if not finished:
                p.kill()    # interrupted: no reason to let them finish a walk
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        for c in conns:
            c.close()
    return problems, nworkers
