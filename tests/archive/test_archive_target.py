"""The local target's sink: parts written with O_DIRECT where the filesystem allows it, through
the page cache where it does not, hold the same bytes; an archive whose parts are big enough to
go the O_DIRECT way restores with stock zstd/tar and checks with stock sha256sum."""

from __future__ import annotations

import hashlib
import os
import random

import pytest
from harness.archives import needs_tools, run, sha256sum_check, stock_restore, vacate
from harness.volumes import can_loop_mount, make_volume

from vacate.archive import compress, gather
from vacate.archive.target import LocalTarget
from vacate.archive.writer import _Lane

pytestmark = needs_tools("zstd", "tar", "sha256sum")

SIZES = (0, 1, 4095, 4096, 8 << 20, (8 << 20) + 1, (19 << 20) + 12345)


def _write(target: LocalTarget, name: str, data: bytes, rnd: random.Random,
           buffered: bool = False, fall_back_after: int | None = None):
    s = target.create(name)
    if buffered:
        s.buffered_from_now()
    i = 0
    while i < len(data):
        k = rnd.choice((1, 3, 511, 4096, 128 << 10, 1 << 20, 3 << 20))
        s.write(memoryview(data)[i:i + k] if k % 2 else data[i:i + k])
        i += k
        if fall_back_after is not None and i >= fall_back_after and s.direct:
            s.buffered_from_now()         # what a refused O_DIRECT write leads to
    s.commit()
    return s


@pytest.mark.parametrize("mode", ["direct-if-allowed", "buffered", "direct-then-buffered"])
def test_sink_writes_exactly_the_bytes_given(tmp_path, mode):
    rnd = random.Random(7)
    t = LocalTarget(str(tmp_path / "t"))
    for n in SIZES:
        data = rnd.randbytes(n)
        s = _write(t, f"f{n}", data, rnd, buffered=mode == "buffered",
                   fall_back_after=(9 << 20) if mode == "direct-then-buffered" else None)
        with open(tmp_path / "t" / f"f{n}", "rb") as f:
            assert f.read() == data, (mode, n, s.direct)
    assert not [x for x in os.listdir(tmp_path / "t") if x.startswith(".tmp-")]


@pytest.mark.parametrize("buffered", [False, True])
def test_stager_gathers_the_exact_stream_and_its_sha256(tmp_path, buffered):
    """What the writer hands over (compressed bytes, unframed data for raw blocks) reaches
    the file framed and in order, whole buffers the O_DIRECT way, and the part's sha256 and
    size are those of the file."""
    rnd = random.Random(11)
    t = LocalTarget(str(tmp_path / "t"))
    sink = t.create("p")
    if buffered:
        sink.buffered_from_now()
    lane, wlane = _Lane(), _Lane()
    st = gather.Stager(sink, lane, wlane, gather.pool())
    want = []
    try:
        for _ in range(40):
            k = rnd.choice((3, 511, 128 << 10, (128 << 10) + 1, 2 << 20, 5 << 20))
            data = rnd.randbytes(k)
            if rnd.random() < 0.5:
                st.write_raw(memoryview(bytearray(data)))
                want.append(compress.raw_blocks(data))
            else:
                st.write(data)
                want.append(data)
        st.close()
        lane.drain()
        wlane.drain()
    finally:
        lane.close()
        wlane.close()
    sink.commit()
    blob = b"".join(want)
    assert (tmp_path / "t" / "p").read_bytes() == blob
    assert st.n == len(blob) and st.h.hexdigest() == hashlib.sha256(blob).hexdigest()


def test_stager_reads_files_straight_into_raw_blocks(tmp_path):
    """``read_raw``: file data read into its raw-block slots across buffer boundaries; the
    slots hold the file's bytes (its hash); a file that ends early gives zeros, and says so."""
    rnd = random.Random(13)
    src = tmp_path / "w.bin"
    data = rnd.randbytes((21 << 20) + 777)
    src.write_bytes(data)
    t = LocalTarget(str(tmp_path / "t"))
    sink = t.create("p")
    lane, wlane = _Lane(), _Lane()
    st = gather.Stager(sink, lane, wlane, gather.pool())
    want, got_file, ended = [], [], []
    fd = os.open(src, os.O_RDONLY)
    try:
        pos = 0
        for k in (3 << 20, 1, 2 << 20, (5 << 20) + 3, 12 << 20):   # the last runs past the end
            st.write(b"hdr%d" % k)
            want.append(b"hdr%d" % k)
            slots, holds, short = st.read_raw(fd, k)
            h = hashlib.sha256()
            lane.call(gather.hash_slices, h, slots, holds)
            lane.drain()
            piece = data[pos:pos + k].ljust(k, b"\0")
            got_file.append(h.digest() == hashlib.sha256(piece).digest())
            ended.append(short)
            want.append(compress.raw_blocks(piece))
            pos += k
        st.close()
        lane.drain()
        wlane.drain()
    finally:
        os.close(fd)
        lane.close()
        wlane.close()
    sink.commit()
    assert got_file == [True] * 5
    assert ended == [False, False, False, False, True]
    blob = b"".join(want)
    assert (tmp_path / "t" / "p").read_bytes() == blob
    assert st.h.hexdigest() == hashlib.sha256(blob).hexdigest()


def _tree(root: str) -> str:
    src = os.path.join(root, "src")
    os.makedirs(os.path.join(src, "w"))
    rnd = random.Random(3)
    with open(os.path.join(src, "w", "shard.bin"), "wb") as f:
        f.write(rnd.randbytes(21 << 20))               # stored (raw) frames
    with open(os.path.join(src, "text.jsonl"), "w") as f:
        f.writelines(f'{{"i": {i}, "t": "{"ab" * rnd.randint(1, 60)}"}}\n'
                     for i in range(60000))             # compressed frames
    for i in range(50):
        with open(os.path.join(src, f"small-{i}.json"), "w") as f:
            f.write(f'{{"n": {i}}}')
    return src


def _check_archive(src: str, dest: str, out: str) -> None:
    r = vacate("archive", src, "--to", dest, "--name", "a", "--part-size", "12M",
               "--no-progress")
    assert r.returncode == 0, r.stderr.decode()
    adir = os.path.join(dest, "a")
    parts = sorted(p for p in os.listdir(adir) if p.endswith(".tar.zst"))
    assert len(parts) >= 2
    assert max(os.path.getsize(os.path.join(adir, p)) for p in parts) > 8 << 20
    assert run("sha256sum", "--strict", "-c", "PARTS.SHA256SUMS", cwd=adir,
               check=False).returncode == 0
    stock_restore(adir, out)
    assert sha256sum_check(adir, out).returncode == 0
    for rel in ("w/shard.bin", "text.jsonl", "small-7.json"):
        with open(os.path.join(src, rel), "rb") as a, open(os.path.join(out, "src", rel),
                                                             "rb") as b:
            assert hashlib.sha256(a.read()).digest() == hashlib.sha256(b.read()).digest()


def test_big_parts_restore_with_stock_tools(tmp_path):
    src = _tree(str(tmp_path))
    _check_archive(src, str(tmp_path / "dest"), str(tmp_path / "out"))


@pytest.mark.root
@pytest.mark.skipif(not can_loop_mount(), reason="needs loop devices")
@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_big_parts_on_a_backup_filesystem(tmp_path, fstype):
    src = _tree(str(tmp_path))
    vol = make_volume(fstype, size_mb=400)
    try:
        _check_archive(src, os.path.join(vol.mountpoint, "dest"), str(tmp_path / "out"))
    finally:
        vol.close()
