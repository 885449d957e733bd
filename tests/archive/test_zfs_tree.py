"""The tree a native archive records (archive/zfs_tree.py) and the manifest's record of it
(archive/zfs_names.py), without ZFS: a tree walked, written and read back gives the same
entries and digest as the walk; any byte of a path survives; a tree file that is not the one
the manifest records, or a line that is not an entry, is refused; a manifest without a tree
(written before trees were recorded) loads as one."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from vacate.archive import zfs_names as zn
from vacate.archive import zfs_tree
from vacate.archive.target import LocalTarget
from vacate.archive.tree_compare import compare_with, digest, entries


def _tree(root) -> None:
    os.makedirs(root / "d" / "e")
    (root / "d" / "a.txt").write_bytes(b"hello")
    (root / os.fsdecode(b"bad-\xff-name")).write_bytes(b"x")
    os.symlink(os.fsdecode(b"../t\xfe"), root / "d" / "link")
    os.utime(root / "d" / "a.txt", ns=(0, -86400_500000000))        # before 1970


def _record(src, adir) -> zn.Tree:
    """What the archive's recorder writes, without its clone: the walk into the file."""
    target = LocalTarget(str(adir))
    sink = target.create(zn.TREE)
    data = b"".join(zfs_tree.line(p, f) for p, f in entries(os.fsencode(str(src))))
    sink.write(data)
    sink.commit()
    d = digest(str(src))
    return zn.Tree(zn.TREE, len(data), hashlib.sha256(data).hexdigest(), d.digest, d.entries,
                   d.bytes)


def test_a_recorded_tree_reads_back_as_walked_and_compares_equal(tmp_path):
    src = tmp_path / "src"
    _tree(src)
    tree = _record(src, tmp_path / "a")
    got = list(zfs_tree.recorded(LocalTarget(str(tmp_path / "a")), tree))
    assert got == list(entries(os.fsencode(str(src))))
    assert b"bad-\xff-name" in [p for p, _ in got]
    # each entry below the top names its inode (what the streams' data are compared by)
    assert [f[8] for _, f in got] == [0] + [
        os.lstat(os.path.join(os.fsencode(str(src)), p)).st_ino for p, _ in got[1:]]
    c = compare_with(zfs_tree.recorded(LocalTarget(str(tmp_path / "a")), tree), str(src))
    assert c.differences == () and c.digest == tree.digest and c.entries == tree.entries


def test_a_tree_file_not_the_one_recorded_is_refused(tmp_path):
    src = tmp_path / "src"
    _tree(src)
    tree = _record(src, tmp_path / "a")
    target = LocalTarget(str(tmp_path / "a"))
    path = tmp_path / "a" / zn.TREE
    data = path.read_bytes()
    path.write_bytes(data.replace(b"\"file\"", b"\"fifo\"", 1))
    with pytest.raises(zn.Damaged, match="sha256 is not the one"):
        zfs_tree.recorded(target, tree)
    path.write_bytes(data + b"\n")
    with pytest.raises(zn.Damaged, match="missing or not"):
        zfs_tree.recorded(target, tree)


@pytest.mark.parametrize("raw, words", [
    (b"{}", "not an entry"),
    (b"[1]", "not an entry"),
    (b'["a", "file", 1, 420, 0, 0, 0, 1, "", 7, 8]', "not an entry"),
    (b'["", "file", 1, 420, 0, 0, 0, 1, "", 7]', "not of their types"),
    (b'["a", "door", 1, 420, 0, 0, 0, 1, "", 7]', "not of their types"),
    (b'["a", "file", -1, 420, 0, 0, 0, 1, "", 7]', "not of their types"),
    (b'["a", "file", true, 420, 0, 0, 0, 1, "", 7]', "not of their types"),
    (b'["a", "file", 1, 420, 0, 0, 0, 1, "", "abc"]', "not of their types"),
    (b'["a", "file", 1, 420, 0, 0, 0, 1, "", -7]', "not of their types"),
    (b'["\\ud800", "file", 1, 420, 0, 0, 0, 1, "", 7]', "not one vacate writes"),
    (b"[" * 100000, "not JSON"),
])
def test_a_line_that_is_not_an_entry_is_refused(raw, words):
    with pytest.raises(zn.Damaged, match=words):
        zfs_tree.parse(raw)


def _manifest(**tree) -> dict:
    m = {"schema": zn.SCHEMA, "name": "ct", "created": "now", "tool": "vacate",
         "dataset": "p/d", "snapshot": "s", "guid": 1, "createtxg": 1, "creation": 1,
         "referenced": 1, "toguid": 1, "send_flags": ["-p"], "stream_bytes": 1,
         "compression": {"format": "zstd", "level": 3}, "props_local": [], "layout": {},
         "parts": [{"name": "ct.zfs.zst.000000", "bytes": 1, "sha256": "a" * 64}]}
    if tree:
        m["tree"] = tree
    return m


def test_the_manifest_records_the_tree_and_an_older_one_loads_without():
    assert zn.loads(json.dumps(_manifest()).encode()).tree is None
    t = {"name": zn.TREE, "bytes": 9, "sha256": "b" * 64, "digest": "c" * 64,
         "entries": 3, "content_bytes": 5}
    m = zn.loads(json.dumps(_manifest(**t)).encode())
    assert m.tree == zn.Tree(zn.TREE, 9, "b" * 64, "c" * 64, 3, 5)
    assert zn.loads(m.dumps()) == m
    for bad, words in [({"name": "../x"}, "other than"), ({"sha256": "x"}, "not a sha256"),
                       ({"entries": -1}, "out of range")]:
        with pytest.raises(zn.Damaged, match=words):
            zn.loads(json.dumps(_manifest(**(t | bad))).encode())
