"""The last look of a retirement: the volume is looked for by its device number and its
filesystem type in every mount namespace, so a device number handed to a filesystem of
another type since (an anonymous device of tmpfs, btrfs or FUSE, a loop device attached to
another image) is not the volume still mounted."""

import os
import subprocess

import pytest

from vacate.act.check_step import _mounts_of
from vacate.observing.host import Host

pytestmark = pytest.mark.root


@pytest.fixture
def tmpfs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount")
    mp = tmp_path / "mnt"
    mp.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mp)], check=True)
    try:
        yield str(mp)
    finally:
        subprocess.run(["umount", str(mp)], check=True)


def test_a_device_number_now_of_another_type_is_not_the_volume(tmpfs):
    st = os.stat(tmpfs).st_dev
    dev = f"{os.major(st)}:{os.minor(st)}"
    host = Host.local()
    assert tmpfs in [mp for _ns, mp in _mounts_of(dev, host, "tmpfs")]
    assert tmpfs in [mp for _ns, mp in _mounts_of(dev, host)]
    assert not _mounts_of(dev, host, "ext4")       # the retired volume was ext4
