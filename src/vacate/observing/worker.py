"""The far side of a remote run: answers framed requests on stdin with framed replies on
stdout until it is told ``bye`` or stdin ends. It never outlives the session that started it:
stdin is read by a thread of its own even while a request is being answered, and when it ends
without a ``bye`` (the connection dropped) the worker kills its whole process group at once,
itself and every command it started, as a ``kill -9`` would. What an apply was doing is then
found by the rerun, as after a crash.

Each request is ``{"op": NAME, "args": {...}}`` (:data:`vacate.observing.ops.OPS`, and the
acting half's operations where the stage was sent them); each reply
``{"ok": VALUE}`` with the value as the model's JSON, or ``{"error": {...}}`` carrying a
:class:`~vacate.observing.errors.VacateError`'s message, hint and exit code, or an
unexpected exception's type and traceback. Its own stderr is closed to the stream (a
pseudo-terminal merges it into stdout); what would have gone there goes into the error
replies. While a request is answered, :func:`note` may send ``{"note": VALUE}`` frames before
its reply (the progress of a long step). Standard library only; started by the stage
(``vacate.remote.stage``) from memory.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import threading
import traceback

from vacate.observing import wire
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


_notes = []                          # (stdout, lock) of the request being answered


def note(value) -> None:
    """Send ``value`` to the side that asked, ahead of the reply it waits for (the progress
    of a long operation); nothing where no request is being answered."""
    if not _notes:
        return
    out, lock = _notes[-1]
    text = json.dumps({"note": value}, ensure_ascii=True, separators=(",", ":"))
    with lock:
        out.write(wire.frame(wire.REPLY, text.encode("ascii")))
        out.flush()


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


_ENDED = object()


def _reader(stdin, on_end) -> queue.Queue:
    """Frames read from ``stdin`` by a thread of their own, onto a queue; ``on_end()`` when
    stdin ends."""
    q: queue.Queue = queue.Queue()

    def pump():
        while True:
            try:
                q.put(wire.read_frame(stdin.readline, wire.REQUEST))
            except wire.Damaged as e:
                q.put(e)
            except (wire.Ended, OSError, ValueError):
                q.put(_ENDED)
                on_end()
                return

    threading.Thread(target=pump, name="vacate-stdin", daemon=True).start()
    return q


def _own_group() -> None:
    """Lead a process group of its own (where stdin is no terminal: a terminal's
    foreground group must stay the login's), so that ending it ends what it started."""
    if not os.isatty(0):
        try:
            os.setpgid(0, 0)
        except OSError:
            pass                            # a session leader already leads its group


def main(stdin=None, stdout=None, ops=None) -> int:
    """Answer requests until ``bye`` or the end of stdin; ``ops`` adds operations to
    :data:`vacate.observing.ops.OPS`."""
    from vacate.observing.ops import OPS

    table = dict(OPS)
    table.update(ops or {})
    far = stdin is None
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    if stdout is sys.stdout.buffer:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)                 # a pty would mix our stderr into the replies
        os.close(devnull)
    said_bye = threading.Event()

    def on_end():
        if far and not said_bye.is_set():   # the connection dropped: end all we started
            os.killpg(os.getpgrp(), signal.SIGKILL)

    if far:
        _own_group()
    frames = _reader(stdin, on_end)
    host = Host.local()
    lock = threading.Lock()
    while True:
        body = frames.get()
        if body is _ENDED:
            return 0
        if isinstance(body, wire.Damaged):
            reply = {"error": {"kind": "damaged",
                               "message": f"the request arrived damaged: {body}"}}
        else:
            try:
                request = json.loads(body.decode("utf-8", "surrogateescape"))
            except ValueError as e:
                request = None
                reply = {"error": {"kind": "damaged", "message": f"not a JSON request: {e}"}}
            else:
                if isinstance(request, dict) and request.get("op") == "bye":
                    said_bye.set()
                    return 0
                _notes.append((stdout, lock))
                try:
                    reply = answer(host, request, table)
                finally:
                    _notes.pop()
        text = json.dumps(reply, ensure_ascii=True, separators=(",", ":"))
        with lock:
            stdout.write(wire.frame(wire.REPLY, text.encode("ascii")))
            stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
