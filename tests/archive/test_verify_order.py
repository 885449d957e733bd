"""A part whose members are not in the manifest's order (vacate writes them in that order;
another tool, or damage, may not): verify and restore match each member by its name all the
same, and still name what is missing or there twice."""

from __future__ import annotations

import os
import subprocess

from harness.archive_corpus import build, entry, member_bytes, restore, verify

from vacate.archive import tarfmt

FILES = [(entry(f"src/d{i % 3}/f{i:02d}", data=b"data %d\n" % i), b"data %d\n" % i)
         for i in range(30)]
DIRS = [entry("src", "dir")] + [entry(f"src/d{i}", "dir") for i in range(3)]


def _tar(pairs) -> bytes:
    return b"".join(member_bytes(e, d) for e, d in pairs) + tarfmt.END_OF_ARCHIVE


def test_members_in_another_order_verify_and_restore(tmp_path):
    shuffled = FILES[::-1][:10] + FILES[:20][::2] + FILES[1:20][::2]
    assert sorted(e["path"] for e, _ in shuffled) == sorted(e["path"] for e, _ in FILES)
    adir = build(str(tmp_path / "a"), DIRS + FILES,
                 tar=_tar([(e, b"") for e in DIRS] + shuffled))
    rc, doc, err = verify(adir)
    assert rc == 0 and doc["findings"] == [], (doc, err)
    rc, doc, err = restore(adir, tmp_path / "out")
    assert rc == 0, (doc, err)
    with open(tmp_path / "out" / "src" / "d2" / "f29", "rb") as f:
        assert f.read() == b"data 29\n"
    assert len(os.listdir(tmp_path / "out" / "src" / "d0")) == 10


def test_out_of_order_with_one_missing_and_one_twice_names_both(tmp_path):
    members = FILES[::-1]
    members = [m for m in members if m[0]["path"] != "src/d1/f07"] + [FILES[3]]
    adir = build(str(tmp_path / "a"), DIRS + FILES,
                 tar=_tar([(e, b"") for e in DIRS] + members))
    rc, doc, err = verify(adir)
    assert rc == 1, (doc, err)
    found = sorted((f["code"], f["path"]) for f in doc["findings"])
    assert found == [("member-missing", "src/d1/f07"), ("member-unexpected", "src/d0/f03")]


def test_a_catalog_left_by_a_killed_verify_is_removed_by_the_next(tmp_path):
    """verify killed while it reads leaves its catalog in $TMPDIR; the next one removes it
    (its process is gone), and leaves none of its own."""
    adir = build(str(tmp_path / "a"), DIRS + FILES, tar=_tar([(e, b"") for e in DIRS] + FILES))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    gone = subprocess.Popen(["true"])
    gone.wait()
    left = tmp / f"vacate-catalog-{gone.pid}-x"
    left.mkdir()
    (left / "catalog.db").write_bytes(b"left behind")
    rc, doc, err = verify(adir, env=env)
    assert rc == 0, (doc, err)
    assert os.listdir(tmp) == []
