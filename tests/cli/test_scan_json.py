"""`vacate scan --json`: the document is written in pieces (its drill-down encoded while the
recognisers' other processes look), and is the JSON that encoding it whole gives (byte for byte
unless the drill-down was ASCII: then orjson wrote it without spaces). Nothing here needs
root."""

from __future__ import annotations

import io
import json
import os

import pytest
from harness.model_trees import small_model

from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.recognise import sidebyside
from vacate.observing.scan import scan
from vacate.output import jsonfmt


def odd_tree(root: str) -> str:
    """Items of several kinds, names that are not UTF-8 or hold a newline, and problems."""
    broot = os.fsencode(root)
    for name in (b"caf\xe9-\xff", b"two\nlines", "ünïcode-名前".encode()):
        os.makedirs(os.path.join(broot, name, b"sub"))
        with open(os.path.join(broot, name, b"sub", b"f\xfe.bin"), "wb") as f:
            f.write(b"x" * 5000)
    small_model(os.path.join(root, "model"))
    os.makedirs(os.path.join(root, "bad-model"))
    with open(os.path.join(root, "bad-model", "config.json"), "w") as f:
        f.write("{not json")                                  # a warning
    with open(os.path.join(root, "bad-model", "model.safetensors"), "wb") as f:
        f.write(b"\0" * 100)                                  # another
    with open(os.path.join(root, "requirements.txt"), "w") as f:
        f.write("torch==2.5.1\n")
    return root


def _children() -> list[str]:
    """This process's children (running or not yet waited for), from /proc."""
    pid = os.getpid()
    out: list[str] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            out += f.read().split()
    return out


def test_pieces_are_the_whole_document(tmp_path):
    root = odd_tree(str(tmp_path / "vol"))
    r = scan(root)
    whole = json.dumps(jsonfmt.scan_doc(r), ensure_ascii=True)
    assert jsonfmt.scan_json(r) == whole
    assert jsonfmt.scan_json(r, jsonfmt.dir_table_json(r.dirs)) == whole
    doc = json.loads(whole)
    assert doc["warnings"] and len(doc["dirs"]["rows"]) == 9     # there was something to say
    paths = {os.fsencode(row[0]) for row in doc["dirs"]["rows"]}
    assert os.path.join(os.fsencode(root), b"caf\xe9-\xff", b"sub") in paths


def test_ascii_drill_down_is_the_same_json(tmp_path):
    """Where every path is ASCII the drill-down is written by orjson, without spaces: the
    same values, one ASCII line; where a name is not (above), byte for byte as json."""
    root = str(tmp_path / "vol")
    small_model(os.path.join(root, "model"))
    for i in range(5):
        os.makedirs(os.path.join(root, "data", f"d{i}", "deeper"))
    r = scan(root)
    fast = jsonfmt.dir_table_json(r.dirs)
    assert " " not in fast and fast.isascii()
    assert json.loads(fast) == json.loads(json.dumps(jsonfmt.dir_table(r.dirs)))
    text = jsonfmt.scan_json(r, fast)
    assert json.loads(text) == json.loads(json.dumps(jsonfmt.scan_doc(r), ensure_ascii=True))
    assert text.isascii() and "\n" not in text


@pytest.mark.parametrize("side_by_side", [False, True])
def test_cli_writes_what_the_scan_found(tmp_path, monkeypatch, side_by_side):
    root = odd_tree(str(tmp_path / "vol"))
    if side_by_side:
        monkeypatch.setattr(sidebyside, "MIN_ENTRIES", 0)   # side by side even on a small tree
    out, err = io.StringIO(), io.StringIO()
    assert main(["scan", "--json", root], Env(stdout=out, stderr=err)) == 0, err.getvalue()
    got = json.loads(out.getvalue())
    want = json.loads(json.dumps(jsonfmt.scan_doc(scan(root)), ensure_ascii=True))
    for doc in (got, want):
        doc.pop("elapsed_s")
        for k in ("used_bytes", "avail_bytes"):   # the root filesystem others write to
            doc["target"].pop(k)
    assert got == want
    assert out.getvalue().count("\n") == 1                    # one line


@pytest.mark.parametrize("how", ["side by side", "one process", "sizes only"])
def test_meanwhile_is_called_once_while_the_others_look(tmp_path, monkeypatch, how):
    root = odd_tree(str(tmp_path / "vol"))
    monkeypatch.setattr(sidebyside, "MIN_ENTRIES", 0 if how == "side by side" else 10**9)
    calls: list[tuple] = []
    r = scan(root, recognise_items=how != "sizes only",
             meanwhile=lambda dirs: calls.append((os.getpid(), len(dirs), _children())))
    assert len(calls) == 1
    pid, ndirs, kids = calls[0]
    assert pid == os.getpid() and ndirs == len(r.dirs)
    if how == "side by side":
        assert kids                  # called before the recognisers' children were waited for
    assert not _children()           # and none is left behind
