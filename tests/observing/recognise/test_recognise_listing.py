"""The recognisers' directory listing: the C loop (``_fastwalk.entries``) and the Python one
(``base._list_py``, used where the extension is not built) list the same entries with the same
sizes, times and link flags, in the same order, stop at the same cap and spend the same entry
budget; a whole recognising run says the same either way. Nothing here needs root."""

from __future__ import annotations

import os

import pytest

from vacate.observing.collectors import walk
from vacate.observing.model.inventory import Item
from vacate.observing.recognise import annotate, base
from vacate.observing.recognise.read import Reader

needs_c = pytest.mark.skipif(base._entries is None, reason="the C loop is not built")


def awkward_dir(root: str) -> str:
    d = os.path.join(root, "d")
    os.makedirs(os.path.join(d, "sub", "deeper"))
    os.mkdir(os.path.join(d, "empty"))
    for i in range(40):
        with open(os.path.join(d, f"f{i:02d}.txt"), "wb") as f:
            f.write(b"x" * (i * 97))
    with open(os.path.join(d, "sparse.safetensors"), "wb") as f:
        f.truncate(5 << 30)
    os.symlink("f01.txt", os.path.join(d, "link"))
    os.symlink("nowhere", os.path.join(d, "dangling"))
    os.symlink("sub", os.path.join(d, "dirlink"))          # a link to a directory: a file here
    os.mkfifo(os.path.join(d, "fifo"))
    os.link(os.path.join(d, "f03.txt"), os.path.join(d, "hard"))
    os.utime(os.path.join(d, "f05.txt"), ns=(1_234_567_891_123_456_789, 987_654_321_987_654_321))
    for name in (b"new\nline", b"latin-\xe9", b"sp ace", b"\xff\xfe"):
        with open(os.path.join(os.fsencode(d), name), "wb") as f:
            f.write(name)
    return d


def listing(path: str, loop, entries: int = 20_000):
    r = Reader(10.0, entries)
    saved = base._entries
    base._entries = loop
    try:
        lst = base.list_dir(path, r)
    finally:
        base._entries = saved
    return lst, r.entries_left, r.problems


@needs_c
@pytest.mark.parametrize("entries", [20_000, 64, 30])
def test_c_and_python_listings_agree(tmp_path, entries):
    d = awkward_dir(str(tmp_path))
    c = listing(d, base._entries, entries)
    py = listing(d, None, entries)
    assert c == py
    lst, left, problems = c
    assert list(lst.files) == list(py[0].files)             # the same order, too
    assert not problems
    total = len(os.listdir(d))
    if entries >= total:
        assert not lst.truncated and left == entries - total
        assert set(lst.dirs) == {"sub", "empty"}
        assert lst.files["link"].is_link and lst.files["dirlink"].is_link
        # what a reader may skip asking the disk again: links, the FIFO are not regular files
        assert [n for n in ("link", "dangling", "dirlink", "fifo") if lst.files[n].regular] == []
        assert lst.files["f05.txt"].regular and lst.files["hard"].regular
        assert lst.files["f05.txt"].mtime == os.lstat(os.path.join(d, "f05.txt")).st_mtime
        assert lst.files["sparse.safetensors"].size == 5 << 30
        assert lst.files["sparse.safetensors"].disk < 1 << 20
        assert os.fsdecode(b"latin-\xe9") in lst.files and "new\nline" in lst.files
    else:                            # at most max(entries, 64) entries are listed, the rest not
        cap = max(entries, 64)
        assert lst.truncated == (total > cap)


@needs_c
def test_recognising_is_the_same_with_either_loop(tmp_path, monkeypatch):
    from harness.model_trees import side_by_side_tree

    side_by_side_tree(str(tmp_path / "vol"))
    awkward_dir(str(tmp_path / "vol"))
    w = walk.walk(str(tmp_path / "vol"))
    items = tuple(Item("item:" + os.path.relpath(p, tmp_path / "vol"), p, None, dd, s)
                  for p, dd, s in w.top)
    c = annotate(items, w.dirs, parallel=False)
    monkeypatch.setattr(base, "_entries", None)
    assert annotate(items, w.dirs, parallel=False) == c
    kinds = {os.path.basename(i.path): i.classification.kind for i in c[0] if i.parent is None}
    assert kinds["big-model"] == "model"
