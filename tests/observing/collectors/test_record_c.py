"""The record of an item to delete walked in C (``_fastwalk.record``) and in Python: the
same entries file, byte for byte, the same totals, digest and problems, on real volumes
holding what a record must get right (odd names, a nested mount, a bind of the same
filesystem, a btrfs subvolume, links, a fifo, a wide directory, paths past PATH_MAX)."""

import io
import os
import subprocess

import pytest
from harness.delete_trees import (
    ODD,
    make_item,
    put,
    put_deep,
)

from vacate.observing import entries
from vacate.observing.collectors import walk_descent

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(walk_descent.fastwalk is None, reason="the C loop was not built")]


def both(monkeypatch, item, dev):
    """The entries file's bytes and the Recorded, from the C walk and from the Python one."""
    out = []
    for loop in (walk_descent.fastwalk, None):
        monkeypatch.setattr(walk_descent, "fastwalk", loop)
        buf = io.BytesIO()
        rec = entries.record_item(item, dev=dev, out=buf)
        out.append((buf.getvalue(), rec, entries.record_item(item, dev=dev)))
    return out


def test_the_c_record_writes_the_file_the_python_one_does(vol, monkeypatch):
    base = make_item(vol)
    bbase = os.fsencode(base)
    for n in ODD + [b'quo"te', b"ctl-\x01\x7f", b"\xed\xa0\x80-surrogate", b"z" * 255]:
        os.makedirs(bbase + b"/odd/" + n)
        put(os.fsdecode(bbase + b"/odd/" + n + b"/" + n), n)
    os.makedirs(f"{base}/wide")
    for i in range(3000):
        put(f"{base}/wide/f{i:05d}-{'x' * (i % 40)}", b"w" * (i % 7))
    vol.mount_tmpfs("item/a/cache")
    put(os.path.join(vol.mountpoint, "elsewhere/file.txt"), b"bound in")
    vol.bind(os.path.join(vol.mountpoint, "elsewhere"), f"{base}/bound")
    if vol.fstype == "btrfs":
        subprocess.run(["btrfs", "subvolume", "create", f"{base}/sv"], check=True,
                       capture_output=True)
        put(f"{base}/sv/inside/w.bin", b"in a subvolume")
    put_deep(base)
    (c_file, c_rec, c_bare), (py_file, py_rec, py_bare) = both(
        monkeypatch, base, os.stat(vol.mountpoint).st_dev)
    assert c_file == py_file
    assert c_rec == py_rec and c_bare == py_bare
    assert c_rec.digest == c_bare.digest
    listed = entries.record_entries(base, dev=os.stat(vol.mountpoint).st_dev)
    assert c_rec.digest == listed.digest() and c_rec.entries == len(listed)
    kinds = {e.path: e.kind for e in listed.entries()}
    assert kinds["a/cache"] == kinds["bound"] == "mountpoint"
    if vol.fstype == "btrfs":
        assert kinds["sv"] == "subvolume"


def test_an_item_changed_between_the_walks_differs_in_both(vol, monkeypatch):
    base = make_item(vol)
    dev = os.stat(vol.mountpoint).st_dev
    (_, c1, _), (_, p1, _) = both(monkeypatch, base, dev)
    put(f"{base}/a/b/late.txt", b"written after")
    (_, c2, _), (_, p2, _) = both(monkeypatch, base, dev)
    assert c1.digest == p1.digest != c2.digest == p2.digest
    assert (c2.entries, c2.files) == (c1.entries + 1, c1.files + 1)
