"""``guarded``: the path resolution that stops before a filesystem that may not answer, and
the forked helper with a deadline (on real paths and a real child process)."""

import errno
import os
import time

import pytest

from vacate.observing.collectors import guarded


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "remote").mkdir()
    os.symlink("a/b", tmp_path / "rel")
    os.symlink(str(tmp_path / "a"), tmp_path / "abs")
    os.symlink("../remote/x", tmp_path / "a" / "into")
    os.symlink("loop2", tmp_path / "loop1")
    os.symlink("loop1", tmp_path / "loop2")
    return str(tmp_path)


@pytest.mark.parametrize("rel", ["a/b", "rel", "rel/..", "abs/b/../b", "a/./b//", "missing/x",
                                 "rel/missing/../y", "loop1", "."])
def test_realpath_agrees_with_os(tree, rel):
    path = os.path.join(tree, rel)
    risky = (os.path.join(tree, "elsewhere"),)
    assert guarded.realpath(path, risky) == os.path.realpath(path)


@pytest.mark.parametrize("rel", ["remote", "remote/x", "a/into", "abs/into/y"])
def test_realpath_stops_before_a_risky_mount(tree, rel):
    risky = (os.path.join(tree, "remote"),)
    with pytest.raises(guarded.Risky) as e:
        guarded.realpath(os.path.join(tree, rel), risky)
    assert e.value.mountpoint == risky[0]


def test_may_hang():
    assert guarded.may_hang("fuse.sshfs") and guarded.may_hang("nfs4") and guarded.may_hang("fuse")
    assert not guarded.may_hang("ext4") and not guarded.may_hang("fusectl")


def test_run_returns_raises_and_gives_up(tmp_path):
    assert guarded.run(os.path.realpath, str(tmp_path)) == os.path.realpath(tmp_path)
    with pytest.raises(OSError) as e:
        guarded.run(os.lstat, str(tmp_path / "missing"))
    assert e.value.errno == errno.ENOENT
    t0 = time.monotonic()
    with pytest.raises(guarded.NoAnswer):
        guarded.run(time.sleep, 30, deadline=0.3)
    assert time.monotonic() - t0 < 2


def _nap(x):
    time.sleep(x)
    return x


def test_each_goes_on_after_an_item_with_no_answer(tmp_path):
    t0 = time.monotonic()
    got = guarded.each(_nap, [0, 30, 0.01, 30, 0], deadline=0.3)
    assert got == [0, guarded.NO_ANSWER, 0.01, guarded.NO_ANSWER, 0]
    assert time.monotonic() - t0 < 3
    assert guarded.each(os.readlink, [str(tmp_path / "missing")]) == [None]
    assert guarded.each(_nap, []) == []
