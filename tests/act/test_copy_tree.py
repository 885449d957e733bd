"""The migrate copy on real files: metadata kept (sparse holes, hardlinks, xattrs, symlinks,
mode, owner, times), a second pass copies only what changed (inode, size, mtime_ns,
ctime_ns), a ``kill -9`` mid-copy resumes without starting over, and the read-back from the
disk names a file whose bytes differ."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import sys
import threading
import time

import pytest
from harness.volumes import can_loop_mount, make_volume

from vacate.act import copy_hash, copy_tree


@pytest.fixture(params=["serial", "pipelined"])
def hashing(request, monkeypatch):
    """Both ways a large file is hashed: in the copying thread (a machine of few CPUs, as
    this one may be), and in a second thread (one of ``PIPELINE_CPUS`` or more)."""
    if request.param == "pipelined":
        monkeypatch.setattr(copy_hash, "PIPELINE_CPUS", 1)
    return request.param


def threads_hashing() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "vacate-hash"]


def make_tree(root: str) -> None:
    os.makedirs(f"{root}/sub")
    with open(f"{root}/weights.bin", "wb") as f:
        f.write(os.urandom(1 << 20))
    with open(f"{root}/sparse.bin", "wb") as f:
        f.truncate(64 << 20)
        f.seek(32 << 20)
        f.write(b"x" * 4096)
    with open(f"{root}/config.json", "w") as f:
        f.write("{}\n")
    os.link(f"{root}/config.json", f"{root}/sub/config.json")
    os.symlink("weights.bin", f"{root}/latest")
    os.chmod(f"{root}/weights.bin", 0o640)
    os.chown(f"{root}/config.json", 1234, 4321)
    os.utime(f"{root}/weights.bin", ns=(1_600_000_000_123_456_789, 1_500_000_000_987_654_321))
    try:
        os.setxattr(f"{root}/weights.bin", "user.origin", b"hf")
    except OSError:
        pass


def same(a: str, b: str) -> None:
    for dirpath, dirs, files in os.walk(a):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            q = os.path.join(b, os.path.relpath(p, a))
            sa, sb = os.lstat(p), os.lstat(q)
            assert (sa.st_mode, sa.st_uid, sa.st_gid) == (sb.st_mode, sb.st_uid, sb.st_gid), p
            assert sa.st_mtime_ns == sb.st_mtime_ns, p
            if stat.S_ISREG(sa.st_mode):
                with open(p, "rb") as f, open(q, "rb") as g:
                    assert f.read() == g.read(), p
            if stat.S_ISLNK(sa.st_mode):
                assert os.readlink(p) == os.readlink(q)


def test_metadata_holes_and_hardlinks_are_kept_and_a_second_pass_copies_only_changes(tmp_path):
    src, dst = f"{tmp_path}/src", f"{tmp_path}/dest/src"
    make_tree(src)
    r = copy_tree.copy_pass(src, dst)
    assert r.files == 4 and r.linked == 1
    same(src, dst)
    assert os.stat(f"{dst}/sparse.bin").st_blocks * 512 < 1 << 20        # holes stayed holes
    assert os.stat(f"{dst}/config.json").st_ino == os.stat(f"{dst}/sub/config.json").st_ino
    if "user.origin" in os.listxattr(f"{src}/weights.bin"):
        assert os.getxattr(f"{dst}/weights.bin", "user.origin") == b"hf"
    assert copy_tree.unchanged(src, dst) == []
    # nothing changed: nothing copied; a chmod changes ctime only: that file is copied again
    assert copy_tree.copy_pass(src, dst).copied == 0
    os.chmod(f"{src}/weights.bin", 0o600)
    assert copy_tree.unchanged(src, dst) == ["weights.bin"]
    again = copy_tree.copy_pass(src, dst)
    assert again.copied == 1 and stat.S_IMODE(os.stat(f"{dst}/weights.bin").st_mode) == 0o600
    # a file gone from the source goes from the copy (the copy is vacate's own)
    os.unlink(f"{src}/latest")
    assert copy_tree.copy_pass(src, dst).removed == 1 and not os.path.lexists(f"{dst}/latest")


@pytest.mark.parametrize("fstype", ["xfs", "btrfs"])
def test_on_one_filesystem_that_can_the_copy_is_a_reflink_and_still_hashed(fstype):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    vol = make_volume(fstype)
    try:
        src, dst = f"{vol.mountpoint}/src", f"{vol.mountpoint}/dest/src"
        make_tree(src)
        r = copy_tree.copy_pass(src, dst)
        assert r.reflinked == 3 and r.bytes_copied > 1 << 20     # read for the hash
        same(src, dst)
        assert not copy_tree.read_back(src, dst).mismatches
    finally:
        vol.close()


@pytest.mark.parametrize("change", ["shrinks", "is rewritten"])
def test_a_large_file_that_changes_while_copied_is_not_recorded(tmp_path, change, hashing):
    src, dst = f"{tmp_path}/src", f"{tmp_path}/dest/src"
    os.makedirs(src)
    with open(f"{src}/shard.bin", "wb") as f:
        f.write(os.urandom(copy_hash.PIPELINED_BYTES + (8 << 20)))

    seen = []

    def meddle(_n):                                   # after the first chunk was copied
        seen.append(threads_hashing())
        with open(f"{src}/shard.bin", "r+b") as f:
            if change == "shrinks":
                f.truncate(4 << 20)
            else:
                f.seek(1 << 20)
                f.write(b"changed")

    with pytest.raises(OSError) as e:
        copy_tree.copy_pass(src, dst, tell=meddle)
    assert e.value.errno == errno.ESTALE and f"{src}/shard.bin" in str(e.value)
    assert bool(seen[0]) == (hashing == "pipelined")
    assert threads_hashing() == []
    assert copy_tree.unchanged(src, dst) == ["nothing was copied yet"]
    copy_tree.copy_pass(src, dst)                     # the source is still now: copied
    same(src, dst)
    assert not copy_tree.read_back(src, dst).mismatches


def test_an_error_while_hashing_in_the_second_thread_stops_the_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(copy_hash, "PIPELINE_CPUS", 1)
    src, dst = f"{tmp_path}/src", f"{tmp_path}/dest/src"
    make_tree(src)                                    # sparse.bin: hashed in a second thread

    def failing(_h, _n):
        raise MemoryError("no memory for the zeros")

    monkeypatch.setattr(copy_hash, "zeros_into", failing)
    with pytest.raises(MemoryError):
        copy_tree.copy_pass(src, dst)
    assert threads_hashing() == []
    monkeypatch.undo()
    copy_tree.copy_pass(src, dst)
    same(src, dst)
    assert not copy_tree.read_back(src, dst).mismatches


@pytest.mark.parametrize("algo", ["xxh128", "blake3", "blake2b"])
def test_read_back_names_a_file_whose_bytes_differ_on_the_disk(tmp_path, monkeypatch, algo,
                                                               hashing):
    # the hash taken is the first whose module is installed: a far host's bare python3
    # has neither xxhash nor blake3, and checks its copies with hashlib's BLAKE2b
    for missing in copy_hash.ALGOS[:copy_hash.ALGOS.index(algo)]:
        monkeypatch.setitem(sys.modules, {"xxh128": "xxhash"}.get(missing, missing), None)
    src, dst = f"{tmp_path}/src", f"{tmp_path}/dest/src"
    make_tree(src)
    copy_tree.copy_pass(src, dst)
    with open(copy_tree.state_path(dst)) as f:
        recorded = json.load(f)["entries"]["weights.bin"]
    assert algo in recorded

    def flip(d):              # a small file and a large one (hashed in a second thread)
        for name, at in (("weights.bin", 100), ("sparse.bin", (32 << 20) + 100)):
            fd = os.open(f"{d}/{name}", os.O_RDWR)
            try:
                b = os.pread(fd, 1, at)
                os.pwrite(fd, bytes([b[0] ^ 1]), at)
                os.fsync(fd)
            finally:
                os.close(fd)

    r = copy_tree.read_back(src, dst, hook=flip)
    assert [p for p, _why in r.mismatches] == [f"{dst}/sparse.bin", f"{dst}/weights.bin"]
    assert algo.upper() in r.mismatches[0][1]
    assert not copy_tree.all_read_back(src, dst)
    assert r.files > 2                  # the others were read back and matched


def test_a_kill_9_mid_copy_resumes_without_starting_over(tmp_path, monkeypatch):
    src, dst = f"{tmp_path}/src", f"{tmp_path}/dest/src"
    os.makedirs(src)
    for i in range(60):
        with open(f"{src}/shard-{i:03d}.bin", "wb") as f:
            f.write(os.urandom(64 << 10))
    monkeypatch.setattr(copy_tree, "FLUSH_S", 0.0)
    real = copy_tree._copy_file

    def slow(*a, **k):
        time.sleep(0.02)
        return real(*a, **k)

    monkeypatch.setattr(copy_tree, "_copy_file", slow)
    pid = os.fork()
    if pid == 0:                                      # the copy, killed part way
        try:
            copy_tree.copy_pass(src, dst)
        finally:
            os._exit(0)
    state = copy_tree.state_path(dst)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            if os.path.getsize(state) > 2000:
                break
        except OSError:
            pass
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    monkeypatch.setattr(copy_tree, "_copy_file", real)
    r = copy_tree.copy_pass(src, dst)
    assert 0 < r.copied < 60                          # what was recorded is not copied again
    assert copy_tree.unchanged(src, dst) == []
    same(src, dst)
    assert copy_tree.read_back(src, dst).mismatches == []
    assert copy_tree.all_read_back(src, dst)


def test_where_the_kernel_cannot_copy_between_the_files_the_bytes_are_read_and_written(
        tmp_path, monkeypatch, hashing):
    # sendfile refuses some pairs (EINVAL from a filesystem without splice, EXDEV): the
    # kernel's refusal, as it gives it
    def refused(*_a):
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "sendfile", refused)
    src, dst = f"{tmp_path}/src", f"{tmp_path}/dest/src"
    make_tree(src)
    r = copy_tree.copy_pass(src, dst)
    same(src, dst)
    assert r.bytes_copied >= (1 << 20) + 4096
    assert not copy_tree.read_back(src, dst).mismatches
