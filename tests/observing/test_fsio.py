"""observing/fsio.py's crash-safe writers on the cut filesystem (harness/lazyfs.py)."""

from __future__ import annotations

import os

import pytest

from vacate.observing import fsio

pytestmark = pytest.mark.root


@pytest.mark.parametrize("durable", [True, False])
def test_a_file_committed_in_new_directories_survives_a_cut_once_they_are_durable(
        lazyfs, durable):
    m = lazyfs.mountpoint
    deep = os.path.join(m, "backup", "runs", "part")
    if durable:
        fsio.makedirs_durable(deep)
    else:                   # what the archive target did before (issue 34)
        os.makedirs(deep)
    fsio.write_atomic(os.path.join(deep, "SHA256SUMS"), b"ab  f\n")
    lazyfs.cut()
    assert os.path.exists(os.path.join(deep, "SHA256SUMS")) is durable


def test_makedirs_durable_takes_what_is_there(lazyfs):
    m = lazyfs.mountpoint
    os.makedirs(os.path.join(m, "a"))
    fsio.fsync_dir(m)
    fsio.makedirs_durable(os.path.join(m, "a", "b"))
    fsio.makedirs_durable(os.path.join(m, "a", "b"))
    lazyfs.cut()
    assert os.path.isdir(os.path.join(m, "a", "b"))
    with open(os.path.join(m, "f"), "w"):
        pass
    with pytest.raises(FileExistsError):
        fsio.makedirs_durable(os.path.join(m, "f"))
