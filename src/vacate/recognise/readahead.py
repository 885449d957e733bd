"""Reading ahead on a cold cache with helper processes.

A look-ahead (``base.LOOKAHEAD``) starts the reads a recogniser will soon make: configs and
weight headers reached through the hub cache's snapshot links. Run inline, its reads still
wait one at a time where the kernel has no read-ahead to offer: a symlink whose target is
too long for its inode (every ``../../blobs/<sha256>`` link of a hub cache) is a disk read
of its own. So once a reader finds the cache cold (:attr:`Reader.cold`), look-aheads go to a
few forked helpers, each following links and asking for heads on its own: the disk gets
many requests at once. The helpers only warm the page cache, which is the kernel's and
shared; they report nothing, so the result cannot depend on them. On a warm cache none is
started.
"""

from __future__ import annotations

import os
import signal
import struct
from collections.abc import Callable

from vacate.collectors.forking import can_fork, die_with_parent
from vacate.recognise import base
from vacate.recognise.read import Reader

HELPERS = 8
_REC = 4096                     # one record per write: a pipe writes this much atomically
_HEAD = struct.Struct("=HH")    # look-ahead number, path length


class Ahead:
    """Runs the explorer's look-aheads: inline, or through helpers once the cache is cold."""

    def __init__(self, helpers: int = HELPERS):
        self.n = helpers
        self.pids: list[int] = []
        self.pipe = -1
        self.failed = False

    def __call__(self, fn: Callable[[str, Reader], None], path: str, reader: Reader) -> None:
        if reader.warm:
            return
        if reader.cold and not self.pids and not self.failed:
            self._start()
        if self.pids and self._send(fn, path):
            return
        fn(path, reader)

    def _send(self, fn: Callable[[str, Reader], None], path: str) -> bool:
        raw = os.fsencode(path)
        if len(raw) > _REC - _HEAD.size or fn not in base.LOOKAHEAD:
            return False
        rec = _HEAD.pack(base.LOOKAHEAD.index(fn), len(raw)) + raw
        try:
            os.write(self.pipe, rec.ljust(_REC, b"\0"))
        except BlockingIOError:
            return False                # all busy and the pipe full: inline, then
        return True

    def _start(self) -> None:
        if not can_fork():
            self.failed = True
            return
        r, w = os.pipe()
        parent = os.getpid()
        for _ in range(self.n):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    os.close(w)
                    die_with_parent(parent)
                    _serve(r)
                    code = 0
                finally:
                    os._exit(code)
            self.pids.append(pid)
        os.close(r)
        os.set_blocking(w, False)
        self.pipe = w

    def close(self) -> None:
        """Stop the helpers (what they were reading ahead is of no use any more)."""
        if self.pipe >= 0:
            os.close(self.pipe)
            self.pipe = -1
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
        self.pids = []


def _serve(r: int) -> None:
    reader = Reader(budget_s=3600.0, entries=1 << 30)
    reader.force_cold()
    while True:
        rec = os.read(r, _REC)
        if len(rec) < _REC:
            return                      # the explorer is done
        i, n = _HEAD.unpack_from(rec)
        try:
            base.LOOKAHEAD[i](os.fsdecode(rec[_HEAD.size:_HEAD.size + n]), reader)
        except OSError:
            pass
