"""One request answered by a worker forked for it, within bounds: how the ``vacate.volume``
modules run vacate's operations on a target, where Ansible's module process would otherwise
wait as long as the operation does (a walk stuck on a filesystem that does not answer, a
worker stopped with ``SIGSTOP``), and the play with it.

The module's process forks the worker before anything else runs (a process group of its
own, killed with its parent by the kernel: ``die_with_parent``), which answers as the far
worker of ``--host`` does: a heartbeat every :data:`~vacate.observing.worker.BEAT_S` seconds
while it works, naming its phase (:func:`vacate.observing.worker.answering`), then its reply,
framed on a pipe (:mod:`vacate.observing.wire`). This process reads that pipe and waits no
longer than ``deadline_s`` in all, nor ``stall_s`` without a byte (a stopped worker, or one
stuck in the kernel, beats no more). Past either, the worker's whole process group is
``SIGKILL``ed (the worker, its walkers, deleters and the commands it started: nothing is left
running, and a lock it held is let go with its last descriptor), and the answer is an error
naming the bound and what the worker last said it was doing.
Standard library only, CPython 3.8.
"""

from __future__ import annotations

import io
import json
import os
import signal
import time

from vacate.observing import wire, worker


def run(work, what: str, *, deadline_s: float | None = None,
        stall_s: float = worker.STALL_S) -> dict:
    """``work()``'s reply (``{"ok": ...}`` or ``{"error": ...}``), computed in a forked worker
    whose first phase is ``what``; ``{"error": {"kind": "deadline" | "stalled" | "ended",
    ...}}`` where it did not answer within the bounds."""
    until = None if deadline_s is None else time.monotonic() + deadline_s
    read_end, write_end = os.pipe()

    def answer() -> int:
        os.close(read_end)
        _answer(os.fdopen(write_end, "wb"), what, work)
        return 0
    child = worker.fork_group(answer)
    os.close(write_end)
    said = {"doing": f"answering {what}"}
    stream = io.BufferedReader(wire.Deadlined(read_end, stall_s, until), 1 << 16)
    restore = _ending(child)
    try:
        return _reply(stream, said)
    except wire.Silent:
        worker.kill_group(child)
        return {"error": _cut(said, deadline_s, stall_s, until)}
    except (wire.Ended, wire.Damaged, ValueError) as e:
        return {"error": {"kind": "ended", "message": f"vacate's worker ended before it "
                          f"answered, while {said['doing']} ({_reap(child) or e})"}}
    finally:
        stream.close()
        os.close(read_end)                  # (the raw stream does not own it)
        _reap(child)
        restore()


def _answer(stream, what: str, work) -> None:
    """In the worker: ``work()`` answered on ``stream``, with its heartbeats before it."""
    out = worker.Framed(stream)
    worker.notes_to(out)

    def guarded() -> dict:
        try:
            return work()
        except Exception as e:      # noqa: BLE001  (every error goes back framed)
            return {"error": worker.error_of(e)}
    out.send(worker.answering(out, what, guarded))


def _reply(stream, said: dict) -> dict:
    """The worker's reply read off ``stream``; its heartbeats noted in ``said`` meanwhile."""
    while True:
        reply = json.loads(wire.read_frame(stream.readline, wire.REPLY).decode("ascii"))
        if not (isinstance(reply, dict) and "note" in reply):
            return reply
        note = reply["note"]
        if isinstance(note, dict) and isinstance(note.get("beat"), dict):
            said.update(note["beat"])
            said["doing"] = str(note["beat"].get("doing") or said["doing"])


def _cut(said: dict, deadline_s: float | None, stall_s: float, until: float | None) -> dict:
    """The error of a worker cut off: its deadline passed, or it fell silent."""
    counts = ""
    entries, nbytes = said.get("entries") or 0, said.get("bytes") or 0
    if entries or nbytes:
        counts = f" ({entries:,} entries, {nbytes:,} bytes so far)"
    late = until is not None and time.monotonic() >= until
    if late:
        text = f"vacate's deadline of {deadline_s:g} s passed"
    else:
        text = f"nothing came from vacate's worker for {stall_s:g} s"
    return {"kind": "deadline" if late else "stalled", "doing": said["doing"],
            "deadline_s": deadline_s, "stall_s": stall_s,
            "message": f"{text} while {said['doing']}{counts}: it was ended there, with "
                       "every process it started",
            "hint": "a worker stopped or stuck (a filesystem that does not answer): the "
                    "task's deadline and stall_timeout options wait longer"}


def _ending(child: int):
    """Until the returned function is called: this process ended by SIGHUP, SIGTERM or
    SIGINT (Ansible's connection gone, a timeout) kills the worker's group first."""
    def ended(*_):
        worker.kill_group(child)
        os._exit(1)

    before = {sig: signal.signal(sig, ended)
              for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)}
    return lambda: [signal.signal(sig, h) for sig, h in before.items()]


def _reap(child: int) -> str:
    """Wait for the worker's end (:data:`~vacate.observing.worker.GRACE_S` at most, then it
    is killed; one stuck in the kernel is left to init), kill what it may have left in its
    group, and say how it ended ("" where that is not known)."""
    end, killed, how = time.monotonic() + worker.GRACE_S, False, ""
    while True:
        try:
            pid, status = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            how = f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) \
                else f"exit {os.WEXITSTATUS(status)}"
            break
        if time.monotonic() > end:
            if killed:
                break
            worker.kill_group(child)
            killed, end = True, time.monotonic() + worker.GRACE_S
        time.sleep(0.02)
    worker.kill_group(child)
    return how
