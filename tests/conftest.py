import os

import pytest

# vacate forks its walkers, recognisers and deleters only while the process runs no other
# thread (observing/collectors/forking.py counts them in /proc/self/task); numpy, which some
# tests import, starts an OpenBLAS thread at import unless told not to, and the in-process
# walks of every later test would then run in one process
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from harness.volumes import can_loop_mount, make_volume


def pytest_collection_modifyitems(config, items):
    if can_loop_mount():
        return
    skip = pytest.mark.skip(reason="needs root and losetup for real volumes")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _every_decision_is_the_same_from_a_saved_observation(monkeypatch):
    """Wherever a test decides on an observation in this process (``vacate check``, the
    demo, ...), deciding on that observation after a trip through its JSON document gives
    the same ``vacate.check/1`` document."""
    from vacate.decide import verdict
    from vacate.observing.model.observation import Observation
    from vacate.output import jsonfmt

    real = verdict.check

    def checked(obs):
        direct = real(obs)
        text = obs.dumps()
        again = real(Observation.loads(text))
        assert jsonfmt.dumps(jsonfmt.check_doc(direct)) == \
            jsonfmt.dumps(jsonfmt.check_doc(again)), "a saved observation decides differently"
        assert Observation.loads(text).dumps() == text, "the observation does not round-trip"
        return direct

    monkeypatch.setattr(verdict, "check", checked)


@pytest.fixture(params=["ext4", "xfs", "btrfs"])
def volume(request):
    """A fresh real loop-mounted volume of each filesystem type."""
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume(request.param)
    yield v
    v.close()


@pytest.fixture
def ext4_volume():
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4")
    yield v
    v.close()


@pytest.fixture
def pool():
    """A real ZFS pool (zfs-fuse) on a sparse file."""
    from harness.zfs_pool import make_pool, zfs_available
    if not zfs_available():
        pytest.skip("needs root, /dev/fuse and zfs-fuse")
    p = make_pool()
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def lxc_boxes():
    """A list the test appends the real LXC containers it makes to (harness/lxc_box.py);
    each closed after."""
    from harness.lxc_box import why_not
    if why := why_not():
        pytest.skip(why)
    made = []
    yield made
    for b in made:
        b.close()


@pytest.fixture
def lazyfs(tmp_path):
    """The LazyFS-like test filesystem (harness/lazyfs.py) over an empty backing directory:
    ``lazyfs.mountpoint`` to write in, ``lazyfs.cut()`` the crash, ``lazyfs.backing`` (what
    was durable, once the test ends)."""
    from harness.lazyfs import LazyFS, can_fuse
    if not can_fuse():
        pytest.skip("needs root, /dev/fuse, fusermount and mfusepy")
    (tmp_path / "backing").mkdir()
    (tmp_path / "mnt").mkdir()
    with LazyFS(str(tmp_path / "backing"), str(tmp_path / "mnt")) as fs:
        yield fs
