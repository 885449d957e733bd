"""A manifest with wrong JSON types, missing keys, values out of range or lines of any
length: ``verify`` names the damage (exit 1), ``restore`` refuses (exit 2), never a
traceback, and the time spent is bounded by the bounds on what is parsed."""

from __future__ import annotations

import json
import os
import time

import pytest
from harness.archive_corpus import Outside, build, entry, read_manifest, restore, verify

# (what is changed, on the header or on the file entry)
HEADER_EDITS = {
    "header is a list": lambda h: [h],
    "header is a string": lambda h: "vacate",
    "header is null": lambda h: None,
    "parts is a string": lambda h: {**h, "parts": "part-000001.tar.zst"},
    "parts is missing": lambda h: {k: v for k, v in h.items() if k != "parts"},
    "part is a list": lambda h: {**h, "parts": [list(h["parts"][0].values())]},
    "part bytes is a string": lambda h: {**h, "parts": [{**h["parts"][0], "bytes": "12"}]},
    "part bytes negative": lambda h: {**h, "parts": [{**h["parts"][0], "bytes": -1}]},
    "part sha256 is a number": lambda h: {**h, "parts": [{**h["parts"][0], "sha256": 5}]},
    "part listed twice": lambda h: {**h, "parts": h["parts"] * 2},
    "entries is a string": lambda h: {**h, "entries": "2"},
    "entries is wrong": lambda h: {**h, "entries": 7},
    "entries is a float": lambda h: {**h, "entries": 2.0},
    "schema is missing": lambda h: {k: v for k, v in h.items() if k != "schema"},
    "schema is a list": lambda h: {**h, "schema": ["vacate.archive-manifest/1"]},
    "name is a number": lambda h: {**h, "name": 1},
    "sources is a string": lambda h: {**h, "sources": "/src"},
    "sources holds a number": lambda h: {**h, "sources": [1]},
    "excluded is a string": lambda h: {**h, "excluded": "src/x"},
    "excluded holds a number": lambda h: {**h, "excluded": ["src/x", 3]},
    "excluded holds a lone surrogate": lambda h: {**h, "excluded": ["src/\ud800"]},
}

ENTRY_EDITS = {
    "mode is a number": {"mode": 420},
    "mode is not octal": {"mode": "0999"},
    "mode is too big": {"mode": "177777"},
    "mode is empty": {"mode": ""},
    "size is a string": {"size": "5"},
    "size is negative": {"size": -5},
    "size is a float": {"size": 5.0},
    "size is true": {"size": True},
    "size is huge": {"size": 1 << 70},
    "path is a number": {"path": 5},
    "path is null": {"path": None},
    "path is empty": {"path": ""},
    "path is a list": {"path": ["src", "f"]},
    "path has a lone surrogate": {"path": "src/\ud800"},
    "path has NUL": {"path": "src/f\u0000x"},
    "type is a number": {"type": 0},
    "type is missing": {"type": None},
    "part is a number": {"part": 1},
    "part is unlisted": {"part": "part-000002.tar.zst"},
    "uid is negative": {"uid": -1},
    "uid is huge": {"uid": 1 << 40},
    "gid is a string": {"gid": "0"},
    "mtime is a string": {"mtime_ns": "0"},
    "mtime is a float": {"mtime_ns": 1e18},
    "sha256 is short": {"sha256": "abc"},
    "sha256 is a number": {"sha256": 1},
    "sha256 is uppercase junk": {"sha256": "Z" * 64},
    "sparse is a string": {"sparse": "yes"},
    "hardlink group is a string": {"hardlink_group": "1"},
    "user is a number": {"user": 0},
    "changed flag is a number": {"changed_while_read": 1},
    "link is a number": {"link": 1},
    "rdev on a file is a string": {"rdev": "1,3"},
}

DEVICE_EDITS = {
    "rdev is a string": {"rdev": "1,3"},
    "rdev has one number": {"rdev": [1]},
    "rdev is negative": {"rdev": [-1, 3]},
    "rdev is huge": {"rdev": [1, 1 << 40]},
    "rdev holds strings": {"rdev": ["1", "3"]},
    "rdev is missing": {"rdev": None},
}


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    base = tmp_path_factory.mktemp("damage")
    adir = build(str(base / "good"), [entry("src", "dir"), (entry("src/f", data=b"ok\n"),
                                                            b"ok\n")])
    rc, doc, err = verify(adir)
    assert rc == 0, (doc, err)
    return adir


def _damaged(adir, lines, tmp_path, words=()):
    """Write the manifest ``lines``; verify says manifest-damaged, restore refuses."""
    dst = str(tmp_path / "evil")
    os.makedirs(dst)
    for n in os.listdir(adir):
        if n != "MANIFEST.jsonl":
            os.link(os.path.join(adir, n), os.path.join(dst, n))
    with open(os.path.join(dst, "MANIFEST.jsonl"), "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    rc, doc, err = verify(dst)
    assert rc == 1, (doc, err)
    assert "Traceback" not in err
    assert [f["code"] for f in doc["findings"]] == ["manifest-damaged"], doc
    msg = doc["findings"][0]["message"]
    for w in words:
        assert w in msg, msg
    assert len(msg) < 1000
    outside = Outside(str(tmp_path))
    rc, _res, err = restore(dst, tmp_path / "out")
    assert rc == 2, err
    assert "damaged" in err and "Traceback" not in err, err
    assert len(err) < 2000
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")
    outside.check("out")
    return msg


def _lines(adir):
    head, entries = read_manifest(adir)
    return head, entries


@pytest.mark.slow
@pytest.mark.parametrize("what", sorted(HEADER_EDITS))
def test_header_types(good, tmp_path, what):
    head, entries = _lines(good)
    lines = [json.dumps(HEADER_EDITS[what](head)).encode()] + [
        json.dumps(e).encode() for e in entries]
    _damaged(good, lines, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("what", sorted(ENTRY_EDITS))
def test_entry_types(good, tmp_path, what):
    head, entries = _lines(good)
    e = {**entries[1], **ENTRY_EDITS[what]}
    e = {k: v for k, v in e.items() if v is not None}
    lines = [json.dumps(head).encode(), json.dumps(entries[0]).encode(),
             json.dumps(e).encode()]
    _damaged(good, lines, tmp_path, ["line 3"])


@pytest.mark.slow
@pytest.mark.parametrize("what", sorted(DEVICE_EDITS))
def test_device_numbers(good, tmp_path, what):
    head, entries = _lines(good)
    dev = {**entry("src/null", "char", mode="0666", rdev=[1, 3]), **DEVICE_EDITS[what]}
    dev = {k: v for k, v in dev.items() if v is not None}
    head["entries"] = 3
    lines = [json.dumps(x).encode() for x in (head, *entries, dev)]
    _damaged(good, lines, tmp_path, ["rdev"])


NOT_ENTRIES = {
    "a list": b"[1, 2, 3]", "a string": b'"a string"', "a number": b"42", "null": b"null",
    "not json": b"{not json", "cut short": b'{"path": "src/x", "type": "file"',
    "binary": b"\xff\xfe{}", "not ascii": '{"path": "src/\u00e9"}'.encode(),
    "NaN": b'{"path": "src/x", "type": "file", "size": NaN}',
    "nested deep": b"[" * 30_000 + b"]" * 30_000,
}


@pytest.mark.parametrize("what", sorted(NOT_ENTRIES))
def test_lines_that_are_not_entries(good, tmp_path, what):
    line = NOT_ENTRIES[what]
    head, entries = _lines(good)
    head["entries"] = 3
    lines = [json.dumps(x).encode() for x in (head, *entries)] + [line]
    _damaged(good, lines, tmp_path, ["line 4"])


@pytest.mark.parametrize("missing", ["path", "type", "part"])
def test_missing_keys(good, tmp_path, missing):
    head, entries = _lines(good)
    e = {k: v for k, v in entries[1].items() if k != missing}
    _damaged(good, [json.dumps(x).encode() for x in (head, entries[0], e)], tmp_path,
             [missing])


def test_symlink_without_a_target_and_a_file_without_sha(good, tmp_path):
    head, entries = _lines(good)
    head["entries"] = 3
    link = entry("src/l", "symlink")
    _damaged(good, [json.dumps(x).encode() for x in (head, *entries, link)], tmp_path,
             ["link"])
    f = {k: v for k, v in entries[1].items() if k != "sha256"}
    (tmp_path / "again").mkdir()
    _damaged(good, [json.dumps(x).encode() for x in (head | {"entries": 2}, entries[0], f)],
             tmp_path / "again", ["sha256"])


@pytest.mark.slow
@pytest.mark.parametrize("mb", [1, 4, 50])
def test_oversize_lines_are_damage_and_quick(good, tmp_path, mb):
    """A line of tens of MB (a path, a link, padding in the header) is refused at once: the
    time does not grow with it, and the messages stay short."""
    head, entries = _lines(good)
    n = mb << 20
    cases = {
        "path": [head, entries[0], {**entries[1], "path": "src/" + "a/" * (n // 2)}],
        "link": [head | {"entries": 3}, *entries,
                 entry("src/l", "symlink", link="x" * n)],
        "header": [head | {"padding": "p" * n}, *entries],
        "user": [head, entries[0], {**entries[1], "user": "\\udcff" * (n // 6)}],
    }
    for i, (what, lines) in enumerate(cases.items()):
        raw = [json.dumps(x).encode() for x in lines]
        if what == "user":
            raw[2] = raw[2].replace(b"\\\\udcff", b"\\udcff")
        t0 = time.monotonic()
        d = tmp_path / str(i)
        d.mkdir()
        if what == "header" and n < 64 << 20:
            continue        # a header may be this long (many parts); linear to parse
        msg = _damaged(good, raw, d)
        assert time.monotonic() - t0 < 30, what
        assert "longer than" in msg or "characters long" in msg, msg


@pytest.mark.slow
def test_long_lines_within_the_bound_are_linear(good, tmp_path):
    """A header of many MB (within its bound) and a path as deep as PATH_MAX allows are
    parsed in time proportional to them; messages naming that path stay short."""
    head, entries = _lines(good)
    deep = "src/" + "/".join(["d"] * 2040)
    dst = tmp_path / "x"
    dst.mkdir()
    for n in os.listdir(good):
        if n != "MANIFEST.jsonl":
            os.link(os.path.join(good, n), dst / n)
    lines = [head | {"entries": 3, "padding": "p" * (40 << 20)}, *entries,
             entry(deep, "fifo")]
    with open(dst / "MANIFEST.jsonl", "wb") as f:
        f.write(b"\n".join(json.dumps(x).encode() for x in lines) + b"\n")
    t0 = time.monotonic()
    rc, doc, _err = verify(str(dst))
    assert time.monotonic() - t0 < 30
    assert rc == 1        # the fifo is not in the part
    assert [(f["code"], f["path"]) for f in doc["findings"]] == [("member-missing", deep)]
    assert len(doc["findings"][0]["message"]) < 300


def test_duplicates_and_entries_inside_files(good, tmp_path):
    head, entries = _lines(good)
    cases = [
        ([entries[0], entries[1], entries[1]], "twice"),
        ([entries[0], entries[1], entry("src/f/g", data=b"")], "inside"),
        ([entries[0], entries[1], entry("src/f/g/h/i", "fifo")], "inside"),
        ([entry("src", "symlink", link="/"), entries[1]], "inside"),
    ]
    for i, (es, word) in enumerate(cases):
        d = tmp_path / str(i)
        d.mkdir()
        _damaged(good, [json.dumps(x).encode() for x in (head | {"entries": len(es)}, *es)],
                 d, [word])


def test_a_huge_manifest_file_is_not_read(good, tmp_path):
    """A (sparse) MANIFEST.jsonl larger than any manifest is refused without reading it."""
    dst = tmp_path / "big"
    dst.mkdir()
    for n in os.listdir(good):
        if n != "MANIFEST.jsonl":
            os.link(os.path.join(good, n), dst / n)
    with open(dst / "MANIFEST.jsonl", "wb") as f:
        f.truncate(5 << 30)
    t0 = time.monotonic()
    rc, doc, _err = verify(str(dst))
    assert rc == 1 and "larger than" in doc["findings"][0]["message"]
    rc, _res, err = restore(str(dst), tmp_path / "out")
    assert rc == 2 and "larger than" in err
    assert time.monotonic() - t0 < 20
