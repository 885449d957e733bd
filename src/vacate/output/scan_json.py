"""``scan --json``: the document on one line, written quickly.

A scan of millions of files has a drill-down row per directory (tens of thousands), and
encoding them is the largest step left after the walk, done while every walker is finished
and the other CPUs idle. So the rows are encoded in two halves at once: a forked child
(:mod:`vacate.forkjob`) encodes the second half while this process encodes the first. The
table is written last in the document; the output is the same JSON as
``json.dumps(jsonfmt.scan_doc(result))`` (key order apart).
"""

from __future__ import annotations

import json
from typing import TextIO

from vacate import forkjob
from vacate.output.jsonfmt import scan_doc

SPLIT_ROWS = 20_000     # below this, one process encodes it all (a fork costs ~10 ms)


def _rows_json(rows: list) -> bytes:
    """The rows as JSON, without the list's brackets."""
    return json.dumps(rows, ensure_ascii=True)[1:-1].encode("ascii")


def write(result, out: TextIO) -> None:
    doc = scan_doc(result)
    table = doc.pop("dirs")
    rows = table["rows"]
    head = json.dumps(doc, ensure_ascii=True)[:-1]
    cols = json.dumps(table["columns"])
    half = len(rows) // 2 if len(rows) >= max(2, SPLIT_ROWS) else len(rows)
    job = forkjob.start(_rows_json, rows[half:]) if half < len(rows) else None
    try:
        out.write(f'{head}, "dirs": {{"columns": {cols}, "rows": [')
        out.write(_rows_json(rows[:half]).decode("ascii"))
        if half < len(rows):
            second, job = (forkjob.join(job) if job is not None else None), None
            if second is None:      # no child, or it failed: encode it here
                second = _rows_json(rows[half:])
            out.write("," + second.decode("ascii"))
        out.write("]}}\n")
    finally:
        if job is not None:         # interrupted before its result was read
            forkjob.discard(job)
