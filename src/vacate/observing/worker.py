"""The far side of a remote run: answers framed requests on stdin with framed replies on
stdout until it is told ``bye`` or stdin ends (the connection dropped: it never outlives
the session that started it).

Each request is ``{"op": NAME, "args": {...}}`` (:data:`vacate.observing.ops.OPS`); each reply
``{"ok": VALUE}`` with the value as the model's JSON, or ``{"error": {...}}`` carrying a
:class:`~vacate.observing.errors.VacateError`'s message, hint and exit code, or an
unexpected exception's type and traceback. Its own stderr is closed to the stream (a
pseudo-terminal merges it into stdout); what would have gone there goes into the error
replies. Standard library only; started by the stage (``vacate.remote.stage``) from memory.
"""

from __future__ import annotations

import json
import os
import sys
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


def answer(host: Host, request) -> dict:
    """The reply to one decoded request."""
    from vacate.observing.ops import OPS

    try:
        if not isinstance(request, dict) or request.get("op") not in OPS or \
                not isinstance(request.get("args", {}), dict):
            raise VacateError(f"not a request this worker answers: {str(request)[:200]}")
        return {"ok": encode(OPS[request["op"]](host, **request.get("args", {})))}
    except Exception as e:                  # noqa: BLE001  (every error goes back framed)
        return {"error": error_of(e)}


def main(stdin=None, stdout=None) -> int:
    """Answer requests until ``bye`` or the end of stdin."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    if stdout is sys.stdout.buffer:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)                 # a pty would mix our stderr into the replies
        os.close(devnull)
    host = Host.local()
    while True:
        try:
            body = wire.read_frame(stdin.readline, wire.REQUEST)
        except wire.Ended:
            return 0
        except wire.Damaged as e:
            reply = {"error": {"kind": "damaged", "message": f"the request arrived damaged: {e}"}}
        else:
            try:
                request = json.loads(body.decode("utf-8", "surrogateescape"))
            except ValueError as e:
                request = None
                reply = {"error": {"kind": "damaged", "message": f"not a JSON request: {e}"}}
            else:
                if isinstance(request, dict) and request.get("op") == "bye":
                    return 0
                reply = answer(host, request)
        text = json.dumps(reply, ensure_ascii=True, separators=(",", ":"))
        stdout.write(wire.frame(wire.REPLY, text.encode("ascii")))
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
