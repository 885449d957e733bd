"""A directory of a hundred thousand files, listed (``vacate observe --files``) and browsed:
opening it makes its files' columns, not a Python record per file, and sorting by name,
size and time, finding the selection again and marking a single file still work there. A
listing of the first format (``vacate.files/1``) is still read."""

from __future__ import annotations

import json
import os
import tracemalloc
import zlib
from array import array

import pytest
from harness.retire import cli
from harness.volumes import can_loop_mount, make_volume

from vacate.browse.model import View, Volume
from vacate.cli.browse_cmd import _files_beside
from vacate.observing.model.observation import Observation
from vacate.output import files_listing

N = 100_000


@pytest.fixture(scope="module")
def flat(tmp_path_factory):
    """A real ext4 volume (inodes enough) with ``flat/`` of N files: apparent sizes
    ``i % 997`` bytes (sparse: nothing on disk) but every 1000th file written, 8 kB on disk,
    and times one second apart, f0 newest; ``some/``: 2000 files of ``i % 7`` bytes (kept
    compressed in the listing, its orders stored); observed with ``--files``."""
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4", size_mb=2048)
    try:
        d = os.path.join(v.mountpoint, "flat")
        os.mkdir(d)
        for i in range(N):
            p = os.path.join(d, f"f{i:06d}")
            fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
            if i % 1000 == 0:
                os.write(fd, b"x" * 8000)
            else:
                os.ftruncate(fd, i % 997)
            os.close(fd)
            os.utime(p, ns=(0, (2_000_000_000 - i) * 10**9))
        os.mkdir(os.path.join(v.mountpoint, "some"))
        for i in range(2000):
            with open(os.path.join(v.mountpoint, "some", f"s{i:04d}"), "wb") as f:
                f.write(b"y" * (i % 7))
        obs = str(tmp_path_factory.mktemp("obs") / "obs.json")
        rc, _, err = cli("observe", v.mountpoint, "-o", obs, "--files")
        assert rc == 0, err
        yield v.mountpoint, obs
    finally:
        v.close()


def _volume(obs: str) -> Volume:
    files, said = _files_beside(obs)
    assert files is not None, said
    with open(obs) as f:
        return Volume(Observation.loads(f.read()), archive_to="/mnt/backup", files=files)


@pytest.mark.slow
def test_a_directory_of_100000_files_is_columns_and_sorts_and_marks(flat):
    root, obs = flat
    vol = _volume(obs)
    d = f"{root}/flat"
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        by_size = vol.listing(d, View())
        first = by_size[:24]                     # the rows of a screen
        grown = tracemalloc.take_snapshot().compare_to(before, "filename")
    finally:
        tracemalloc.stop()
    # a few arrays and the rows read; records would be N blocks or more
    assert sum(s.count_diff for s in grown) < 2000
    assert len(by_size) == N
    # largest on disk first (the written ones), equal sizes in name order
    assert [e.name for e in first[:3]] == ["f000000", "f001000", "f002000"]
    assert all(e.kind == "file" and e.markable for e in first)
    assert first[0].disk_bytes >= 8000 and first[0].apparent_bytes == 8000
    app = vol.listing(d, View(apparent=True))
    sizes = [app[i].apparent_bytes for i in range(0, N, 997)]
    assert sizes == sorted(sizes, reverse=True) and app[0].name == "f000000"
    assert app[99].name == "f099000"                 # the written ones, 8000 bytes each
    assert app[100].name == "f000996" and app[101].name == "f001993"    # 996 bytes, by name
    names = vol.listing(d, View(sort="name"))
    assert [names[i].name for i in (0, 1, N - 1)] == ["f000000", "f000001", f"f{N - 1:06d}"]
    newest = vol.listing(d, View(sort="mtime"))
    assert newest[0].name == "f000000" and newest[N - 1].name == f"f{N - 1:06d}"
    assert newest[0].newest_mtime == 2_000_000_000
    # the selection found again in each order (as a sort keeps it)
    for lst in (by_size, app, names, newest):
        for at in (0, 1, 4321, N - 1):
            assert lst.index_of(lst[at].path) == at
    some = vol.listing(f"{root}/some", View(apparent=True))
    assert [e.name for e in some[:3]] == ["s0006", "s0013", "s0020"]     # 6 bytes, by name
    assert some.index_of(f"{root}/some/s0001") == sum(i % 7 > 1 for i in range(2000))
    # a single file marked: the plan takes it as an override
    one = f"{d}/f012345"
    vol.mark(one, "delete")
    assert vol.overrides() == [("delete", "flat/f012345")]
    item = vol.plan_items[one]
    assert item.action == "delete" and item.apparent_bytes == 12345 % 997 and item.files == 1


def _v1(path: str, lst: files_listing.Listing) -> None:
    """``lst`` written again in the first format: per directory the count, the numbers and
    the names joined by NUL, all compressed; index entries of three."""
    blobs, index, at = [], [], 0
    for d in lst:
        f = lst.get(d)
        n = len(f)
        names = "\0".join(f.name(k) for k in range(n)).encode("utf-8", "surrogateescape")
        nums = array("q", list(f.apparent) + list(f.disk) + list(f.mtime))
        blob = zlib.compress(n.to_bytes(4, "little") + nums.tobytes() + names)
        index.append([d, at, len(blob)])
        blobs.append(blob)
        at += len(blob)
    head = json.dumps(dict(lst.head, schema="vacate.files/1")).encode() + b"\n"
    idx = zlib.compress(json.dumps(index).encode())
    with open(path, "wb") as out:
        out.write(b"".join([head, *blobs, idx,
                            b"vacate.files index %016d %016d\n" % (len(head) + at, len(idx))]))


def test_a_listing_of_the_first_format_is_read(flat, tmp_path):
    root, obs = flat
    with open(obs, "rb") as f:
        sha = files_listing.digest(f.read())
    new = files_listing.Listing(obs + ".files", sha)
    old_path = str(tmp_path / "old.files")
    _v1(old_path, new)
    old = files_listing.Listing(old_path, sha)
    d = f"{root}/flat"
    a, b = new.get(d), old.get(d)
    assert len(a) == len(b) == N
    assert [a.row(k) for k in range(0, N, 999)] == [b.row(k) for k in range(0, N, 999)]
    assert list(a.order("disk")) == list(b.order("disk"))     # sorted when first asked
    assert b.find("f054321") == 54321 and b.find("nothing") is None
    new.close()
    old.close()
