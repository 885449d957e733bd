"""``scan --json``: the document on one line, written quickly.

A scan of millions of files has a drill-down row per directory (tens of thousands), and
encoding them is the largest step left after the walk, done while every walker is finished
and the other CPUs idle. So the rows are encoded in two halves at once: a forked child
encodes the second half and hands the text back through a pipe while this process encodes
the first. The table is written last in the document; the output is the same JSON as
``json.dumps(jsonfmt.scan_doc(result))`` (key order apart).
"""

from __future__ import annotations

import json
import os
import signal
from typing import TextIO

from vacate.output.jsonfmt import scan_doc

SPLIT_ROWS = 20_000     # below this, one process encodes it all (a fork costs ~10 ms)


def write(result, out: TextIO) -> None:
    doc = scan_doc(result)
    table = doc.pop("dirs")
    rows = table["rows"]
    head = json.dumps(doc, ensure_ascii=True)[:-1]
    cols = json.dumps(table["columns"])
    if not rows:
        out.write(f'{head}, "dirs": {{"columns": {cols}, "rows": []}}}}\n')
        return
    half = len(rows) // 2 if len(rows) >= SPLIT_ROWS else len(rows)
    child = _encode_in_child(rows[half:]) if half < len(rows) else None
    try:
        first = json.dumps(rows[:half], ensure_ascii=True)[1:-1]
        out.write(f'{head}, "dirs": {{"columns": {cols}, "rows": [{first}')
        if half < len(rows):
            second, child = (_collect(child) if child is not None else None), None
            if second is None:      # no child, or it failed: encode it here
                second = json.dumps(rows[half:], ensure_ascii=True)[1:-1]
            out.write("," + second)
        out.write("]}}\n")
    finally:
        if child is not None:       # interrupted before collecting it
            _discard(child)


def _encode_in_child(rows: list) -> tuple[int, int] | None:
    """Fork a child that writes ``rows`` as JSON (without the brackets) to a pipe; (pid, read
    end), or None when no child could be started."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:        # the child: encode, write, leave without running any cleanup
        code = 1
        try:
            os.close(r)
            data = json.dumps(rows, ensure_ascii=True)[1:-1].encode("ascii")
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _discard(child: tuple[int, int]) -> None:
    pid, r = child
    os.close(r)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def _collect(child: tuple[int, int]) -> str | None:
    """The child's text, or None when it did not finish its job."""
    pid, r = child
    chunks = []
    try:
        with os.fdopen(r, "rb") as f:
            while chunk := f.read(1 << 20):
                chunks.append(chunk)
    finally:
        _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return None
    return b"".join(chunks).decode("ascii")
