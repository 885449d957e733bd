"""``scan --json`` writes the drill-down rows in two halves (a forked child encodes one): the
document must be exactly what one ``json.dumps`` of the scan gives."""

from __future__ import annotations

import io
import json
import os

from vacate import forkjob
from vacate.core.scan import scan
from vacate.output import jsonfmt, scan_json


def make_tree(root: str) -> None:
    for i in range(30):
        d = os.path.join(root, f"d{i:02d}", "sub")
        os.makedirs(d)
        with open(os.path.join(d, "f.bin"), "wb") as f:
            f.write(b"x" * i)
    odd = os.path.join(os.fsencode(root), b"odd-\xff\nname")
    os.mkdir(odd)
    with open(os.path.join(odd, b"caf\xe9"), "wb") as f:
        f.write(b"y")


def test_split_rows_give_the_same_document(tmp_path, monkeypatch):
    make_tree(str(tmp_path))
    result = scan(str(tmp_path), recognise_items=False)
    expect = json.loads(json.dumps(jsonfmt.scan_doc(result), ensure_ascii=True))
    assert len(expect["dirs"]["rows"]) == 62
    jobs = []
    start = forkjob.start

    def recording_start(*args):
        jobs.append(start(*args))
        return jobs[-1]

    monkeypatch.setattr(forkjob, "start", recording_start)
    for split in (2, 10**9):       # forked halves; one process
        monkeypatch.setattr(scan_json, "SPLIT_ROWS", split)
        out = io.StringIO()
        scan_json.write(result, out)
        assert len(jobs) == 1 and (jobs[0] is not None or forkjob.threaded())
        text = out.getvalue()
        assert text.endswith("}\n") and text.count("\n") == 1 and text.isascii()
        assert json.loads(text) == expect
    names = {os.fsencode(r[0]) for r in expect["dirs"]["rows"]}
    assert os.path.join(os.fsencode(str(tmp_path)), b"odd-\xff\nname") in names


def test_no_rows_and_one_row(tmp_path, monkeypatch):
    monkeypatch.setattr(scan_json, "SPLIT_ROWS", 0)
    f = tmp_path / "one-file"
    f.write_bytes(b"abc")
    out = io.StringIO()
    scan_json.write(scan(str(f), recognise_items=False), out)
    doc = json.loads(out.getvalue())
    assert doc["dirs"] == {"columns": list(jsonfmt.DIR_COLUMNS), "rows": []}
    assert doc["totals"]["apparent_bytes"] == 3
    out = io.StringIO()
    scan_json.write(scan(str(tmp_path), recognise_items=False), out)
    assert [r[0] for r in json.loads(out.getvalue())["dirs"]["rows"]] == [str(tmp_path)]
