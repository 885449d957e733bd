"""The rules of the test filesystem's model (harness/lazyfs_model.py), without a mount: which
sync makes a rename, a link or a new directory durable, and what a cut leaves."""

from __future__ import annotations

import errno

import pytest
from harness.lazyfs_model import ROOT, State


def names(s: State, path: str = "/") -> list[str]:
    return sorted(s.live[s.lookup(path)].entries)


def state_with(*files: str) -> State:
    """Directories ``a`` and ``b`` and the given files (b"x" each), all durable."""
    s = State()
    for d in ("/a", "/b"):
        s.mkdir(d, 0o755, 0, 0)
    for f in files:
        s.write(s.create(f, 0o644, 0, 0), 0, b"x")
        s.sync_file(s.lookup(f))
    for d in ("/", "/a", "/b"):
        s.sync_dir(s.lookup(d))
    assert s.pending() == []
    return s


def test_a_directory_renamed_across_has_one_durable_name_whichever_side_is_synced():
    s = state_with("/a/d-file")
    s.mkdir("/a/sub", 0o755, 0, 0)
    s.sync_dir(s.lookup("/a"))
    s.rename("/a/sub", "/b/sub")
    s.sync_dir(s.lookup("/a"))            # source only: sub keeps its old durable name
    s.cut()
    assert names(s, "/a") == ["d-file", "sub"] and names(s, "/b") == []
    s.rename("/a/sub", "/b/sub")
    s.sync_dir(s.lookup("/b"))            # destination: the old name goes too
    s.cut()
    assert names(s, "/a") == ["d-file"] and names(s, "/b") == ["sub"]


def test_a_hard_link_keeps_the_other_name_when_one_is_removed():
    s = state_with("/a/f")
    s.link("/a/f", "/b/g")
    s.sync_dir(s.lookup("/b"))
    s.unlink("/a/f")
    s.sync_dir(s.lookup("/a"))
    s.cut()
    assert names(s, "/a") == [] and names(s, "/b") == ["g"]
    assert s.read(s.lookup("/b/g"), 10, 0) == b"x"


def test_a_name_synced_before_its_data_is_an_empty_file():
    s = state_with()
    ino = s.create("/a/new", 0o644, 0, 0)
    s.write(ino, 0, b"data")
    s.sync_dir(s.lookup("/a"))
    s.cut()
    assert s.read(s.lookup("/a/new"), 10, 0) == b""


def test_a_handle_on_an_inode_a_cut_dropped_fails_with_eio():
    s = state_with()
    fh = s.open(s.create("/a/f", 0o644, 0, 0), 0)
    s.cut()
    with pytest.raises(OSError) as e:
        s.handle(fh)
    assert e.value.errno == errno.EIO
    s.release(fh)
    assert sorted(s.live) == sorted([ROOT, s.lookup("/a"), s.lookup("/b")])


def test_rename_refuses_what_posix_refuses():
    s = state_with("/a/f")
    s.mkdir("/b/full", 0o755, 0, 0)
    s.create("/b/full/x", 0o644, 0, 0)
    for old, new, code in (("/a", "/b/full", errno.ENOTEMPTY), ("/a", "/a/f", errno.ENOTDIR),
                           ("/a/f", "/b", errno.EISDIR), ("/a/none", "/b/x", errno.ENOENT)):
        with pytest.raises(OSError) as e:
            s.rename(old, new)
        assert e.value.errno == code, (old, new)
