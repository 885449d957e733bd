"""The far side of a remote run: answers framed requests on stdin with framed replies on
stdout until it is told ``bye`` or stdin ends.

Two processes, and no thread in either (a process that forks must run no other thread: a
lock another thread holds is copied held, and the child waits on it forever):

- the **supervisor** (:func:`serve`, the process ssh started) forks the worker before
  anything else runs, then only relays bytes between ssh and the worker with ``poll``. When
  stdin ends without a ``bye`` (the connection dropped, or the asking side gave up on a
  stall) it sends the worker's process group ``SIGKILL``: the worker, its walkers and every
  command it started end at once, as after a ``kill -9``, even a worker stopped with
  ``SIGSTOP`` (which no other signal ends). What an apply was doing is then found by the
  rerun, as after a crash;
- the **worker** (:func:`main`) leads a process group of its own, reads requests in its one
  thread, and so may fork its walkers, recognisers and deleters. Its code is the
  supervisor's, copied by the fork: nothing is written to the far disk.

While it answers a request, the worker sends a heartbeat every :data:`BEAT_S` seconds (a
timer's signal, handled between two bytecodes of its one thread), and one at once whenever
its phase changes: ``{"note": {"beat":
{"doing", "entries", "bytes"}}}`` (:mod:`vacate.observing.beat`). Silence therefore means the
worker is not running (stopped, stuck in the kernel on a dead filesystem, or gone), which
the asking side calls a stall (``--stall-timeout``).

Each request is ``{"op": NAME, "args": {...}}`` (:data:`vacate.observing.ops.OPS`, and the
acting half's operations where the bootstrap was sent them); each reply
``{"ok": VALUE}`` with the value as the model's JSON, or ``{"error": {...}}`` carrying a
:class:`~vacate.observing.errors.VacateError`'s message, hint and exit code, or an
unexpected exception's type and traceback. Its own stderr is closed to the stream (a
pseudo-terminal merges it into stdout); what would have gone there goes into the error
replies. While a request is answered, :func:`note` may send ``{"note": VALUE}`` frames before
its reply (the progress of a long step). Standard library only; started by the bootstrap
(``vacate.remote.bootstrap``) from memory.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback

from vacate.observing import beat, wire
from vacate.observing.errors import VacateError
from vacate.observing.host import Host


def encode(value):
    """A reply value as JSON values: an entry list as its own document, a model value as the
    codec writes it, plain values as they are."""
    from vacate.observing.model import codec

    to_json = getattr(value, "to_json", None)       # EntryList
    return to_json() if to_json is not None else codec.encode(value)


def error_of(e: BaseException) -> dict:
    if isinstance(e, VacateError):
        out = {"kind": type(e).__name__, "message": e.message, "hint": e.hint,
               "exit_code": e.exit_code}
        target = getattr(e, "target", None)
        if target is not None:
            from vacate.observing.model import codec

            out["target"] = codec.encode(target)
        return out
    return {"kind": "internal", "message": f"{type(e).__name__}: {e}",
            "traceback": traceback.format_exc(limit=8)}


BEAT_S = 2.0        # a heartbeat this often while a request is answered
STALL_S = 30.0      # the asking side's default: no byte for this long is a stall
BYE = wire.frame(wire.REQUEST, b'{"op":"bye"}').split(b"\n", 1)[0]   # its header line
GRACE_S = 10.0      # after bye: how long the worker has to end before it is killed


class Framed:
    """The worker's stdout: whole frames, never one inside another (a heartbeat comes from a
    signal handler, which may run while a reply is being written: that beat is skipped)."""

    def __init__(self, stream):
        self.stream = stream
        self.busy = False
        self.answering = False

    def send(self, value) -> None:
        self.busy = True
        try:
            text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
            for piece in wire.pieces(wire.REPLY, text.encode("ascii")):
                self.stream.write(piece)
            self.stream.flush()
        finally:
            self.busy = False

    def beat(self, *_) -> None:
        if self.answering and not self.busy:
            try:
                self.send({"note": {"beat": beat.now()}})
            except OSError:
                pass            # the connection is gone: the supervisor ends us


_out: list = []                      # the Framed of the request being answered


def notes_to(out: Framed) -> None:
    """Send what :func:`note` is given on ``out`` from now on (a process that answers one
    request and ends)."""
    _out.append(out)


def note(value) -> None:
    """Send ``value`` to the side that asked, ahead of the reply it waits for (the progress
    of a long operation); nothing where no request is being answered."""
    if _out and _out[-1].answering:
        _out[-1].send({"note": value})


def answer(host: Host, request, ops=None) -> dict:
    """The reply to one decoded request (``ops``: the operations answered, by name)."""
    if ops is None:
        from vacate.observing.ops import OPS as ops

    try:
        if not isinstance(request, dict) or request.get("op") not in ops or \
                not isinstance(request.get("args", {}), dict):
            raise VacateError(f"not a request this worker answers: {str(request)[:200]}")
        return {"ok": encode(ops[request["op"]](host, **request.get("args", {})))}
    except Exception as e:                  # noqa: BLE001  (every error goes back framed)
        return {"error": error_of(e)}


def main(stdin=None, stdout=None, ops=None) -> int:
    """Answer requests read from ``stdin`` until ``bye`` or its end, in this thread alone;
    ``ops`` adds operations to :data:`vacate.observing.ops.OPS`."""
    from vacate.observing.ops import OPS

    table = dict(OPS)
    table.update(ops or {})
    out = Framed(stdout or sys.stdout.buffer)
    readline = (stdin or sys.stdin.buffer).readline
    host = Host.local()
    _out.append(out)
    try:
        while True:
            try:
                body = wire.read_frame(readline, wire.REQUEST)
            except wire.Damaged as e:
                out.send({"error": {"kind": "damaged",
                                    "message": f"the request arrived damaged: {e}"}})
                continue
            except (wire.Ended, OSError, ValueError):
                return 0
            try:
                request = json.loads(body.decode("utf-8", "surrogateescape"))
            except ValueError as e:
                out.send({"error": {"kind": "damaged", "message": f"not a JSON request: {e}"}})
                continue
            if isinstance(request, dict) and request.get("op") == "bye":
                return 0
            what = str(request.get("op", "")) if isinstance(request, dict) else ""
            out.send(answering(out, what, lambda r=request: answer(host, r, table)))
    finally:
        _out.pop()


def answering(out: Framed, what: str, work) -> dict:
    """``work()`` (a reply), a heartbeat sent on ``out`` every :data:`BEAT_S` seconds while
    it runs and one at once whenever its phase changes; ``what``: its first phase."""
    timed = hasattr(signal, "setitimer")
    beat.begin(what)
    out.answering = True
    beat.tell(out.beat)                     # a new phase is said at once
    if timed:
        signal.signal(signal.SIGALRM, out.beat)
        signal.setitimer(signal.ITIMER_REAL, BEAT_S, BEAT_S)
    try:
        return work()
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
        beat.tell(None)
        out.answering = False


def serve(ops=None, rest: bytes = b"") -> int:
    """The far side's process (the bootstrap calls it, with ``rest``: what it read of stdin past
    the payload): fork the worker now, while this process runs no other thread, then relay
    between ssh and it (:func:`_relay`) until both are done."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)                     # a pty would mix our stderr into the replies
    os.close(devnull)
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()

    def work() -> int:
        os.dup2(req_r, 0)
        os.dup2(rep_w, 1)
        for fd in (req_r, req_w, rep_r, rep_w):
            os.close(fd)
        return main(os.fdopen(0, "rb"), os.fdopen(1, "wb"), ops)
    child = fork_group(work)
    os.close(req_r)
    os.close(rep_w)
    return _relay(child, req_w, rep_r, rest)


def fork_group(body) -> int:
    """Fork a child that leads a process group of its own (so that its whole group can be
    killed: :func:`kill_group`), is killed by the kernel when this process dies, runs
    ``body()`` and ends with the exit code it returns; the child's pid."""
    from vacate.observing.collectors.forking import die_with_parent

    me = os.getpid()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.setpgid(0, 0)
            die_with_parent(me)
            code = body()
        finally:
            os._exit(code)
    try:
        os.setpgid(child, child)            # (also here: whichever runs first)
    except OSError:
        pass
    return child


def kill_group(child: int) -> None:
    """The worker's whole process group ``SIGKILL``ed (a stopped worker too)."""
    for kill in (lambda: os.killpg(child, signal.SIGKILL),
                 lambda: os.kill(child, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass


def _relay(child: int, to_worker: int, from_worker: int, rest: bytes) -> int:
    """Bytes from stdin to the worker and from the worker to stdout, with ``poll``, in small
    writes that never block (at most ``PIPE_BUF`` once ``poll`` says there is room), so
    neither direction waits on the other. Stdin's end without a ``bye`` kills the worker; the
    worker's end ends this process once what it said is out."""
    import select

    def ended(*_):
        kill_group(child)
        os._exit(1)

    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, ended)
    inbox, outbox = bytearray(rest), bytearray()
    bye = BYE in inbox
    tail = bytes(inbox[-len(BYE):])
    stdin_open, worker_open = True, True
    deadline = None
    while worker_open or outbox:
        poll = select.poll()
        if stdin_open:
            poll.register(0, select.POLLIN)
        if worker_open:
            poll.register(from_worker, select.POLLIN)
        if inbox and to_worker >= 0:
            poll.register(to_worker, select.POLLOUT)
        if outbox:
            poll.register(1, select.POLLOUT)
        wait = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
        events = poll.poll(wait)
        if not events and deadline is not None and time.monotonic() >= deadline:
            kill_group(child)              # said bye but did not end
            break
        for fd, ev in events:
            try:
                if fd == 0:
                    data = os.read(0, 65536)
                    if not data:
                        stdin_open = False
                        if not bye:
                            ended()
                        deadline = time.monotonic() + GRACE_S
                    else:
                        inbox += data
                        if not bye:
                            bye = BYE in tail + data
                            tail = (tail + data)[-len(BYE):]
                elif fd == from_worker:
                    data = os.read(from_worker, 65536)
                    if data:
                        outbox += data
                    else:
                        worker_open = False
                elif fd == to_worker:
                    if ev & (select.POLLERR | select.POLLHUP):
                        raise BrokenPipeError()
                    del inbox[:os.write(to_worker, inbox[:select.PIPE_BUF])]
                elif fd == 1:
                    del outbox[:os.write(1, outbox[:select.PIPE_BUF])]
            except OSError:
                if fd != to_worker:
                    ended()                      # the connection is gone
                inbox.clear()                    # the worker is gone: its end is read next
        if not stdin_open and not inbox and to_worker >= 0:
            os.close(to_worker)                  # all of it passed on: the worker sees its end
            to_worker = -1
    try:
        os.waitpid(child, 0)
    except ChildProcessError:
        pass
    kill_group(child)                          # what it may have left in its group
    return 0
