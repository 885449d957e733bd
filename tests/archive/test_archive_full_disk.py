"""A disk that fills while finished parts are still being committed: the run fails with the
write error and leaves no temp part behind, whichever part the disk ran out under (the one
being committed, the ones queued behind it, the one being written)."""

from __future__ import annotations

import errno
import glob
import os
import threading
import time

import pytest
from harness.archives import needs_tools, sha256sum_check, stock_restore
from harness.volumes import make_volume

from vacate.archive import writer
from vacate.archive.target import LocalTarget, WriteError

pytestmark = needs_tools("zstd", "tar", "sha256sum")


def _fill(path: str) -> None:
    """Write zeros to ``path`` until the filesystem is full."""
    buf = bytes(1 << 20)
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(buf)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
        try:
            while True:
                f.write(buf[:4096])
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise


def _tmp_files(root: str) -> list[str]:
    return [os.path.join(d, n) for d, _, ns in os.walk(root) for n in ns
            if n.startswith(".tmp-")]


@pytest.mark.root
def test_disk_full_while_a_finished_part_commits_leaves_no_temp_part(tmp_path, monkeypatch):
    """The first part's commit waits until the second part is finished and queued behind it
    and the third is being written, then the disk fills: the commit fails with "No space
    left", and neither the queued part nor the one being written stays as a temp file (or
    keeps its space). With the space back, the same archive resumes and restores."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"f{i}.bin").write_bytes(os.urandom(10 << 20))
    v = make_volume("ext4", 64)
    filler = os.path.join(v.mountpoint, "filler")
    commit = writer._Writer._commit

    def commit_when_the_disk_is_full(self, sink, info, inodes, entries):
        if info.name == "part-000001.tar.zst":
            deadline = time.monotonic() + 60
            while not glob.glob(os.path.join(v.mountpoint, "src", ".tmp-*-part-000003.*")):
                assert time.monotonic() < deadline, "the third part was never started"
                time.sleep(0.005)
            _fill(filler)
        return commit(self, sink, info, inodes, entries)

    try:
        free0 = os.statvfs(v.mountpoint).f_bfree
        monkeypatch.setattr(writer._Writer, "_commit", commit_when_the_disk_is_full)
        target = LocalTarget(os.path.join(v.mountpoint, "src"))
        with pytest.raises(WriteError, match="No space left"):
            writer.archive([str(src)], target, "src", part_size=8 << 20)
        assert _tmp_files(v.mountpoint) == []
        os.unlink(filler)
        assert os.statvfs(v.mountpoint).f_bfree >= free0 - 16

        monkeypatch.setattr(writer._Writer, "_commit", commit)
        r = writer.archive([str(src)], target, "src", part_size=8 << 20)
        assert r.files == 3
        assert _tmp_files(v.mountpoint) == []
        out = str(tmp_path / "out")
        stock_restore(target.root, out)
        assert sha256sum_check(target.root, out).returncode == 0
    finally:
        v.close()


def test_calls_queued_behind_a_failed_one_are_undone_not_made():
    """The finisher lane's rule: the calls queued behind one that fails are not made; each
    runs its ``undo`` instead (a finished part's sink is aborted), and the error is raised."""
    lane = writer._Lane()
    go = threading.Event()
    made, undone = [], []

    def fails():
        go.wait(10)
        raise OSError(errno.ENOSPC, "No space left on device")

    try:
        lane.call(fails)
        for i in range(3):
            lane.call(made.append, i, undo=lambda i=i: undone.append(i))
        go.set()
        with pytest.raises(OSError, match="No space left"):
            lane.drain()
        assert (made, undone) == ([], [0, 1, 2])
        with pytest.raises(OSError, match="No space left"):
            lane.call(made.append, 3, undo=lambda: undone.append(3))   # not queued at all
        assert undone == [0, 1, 2]
    finally:
        lane.close()
