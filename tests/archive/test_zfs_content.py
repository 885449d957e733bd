"""What a native archive's verify proves of the data (archive/zfs_content.py), on real ZFS
(zfs-fuse): a snapshot's stream digested the same however it is cut into pieces and whether
its zeros are stored as data or as holes; two snapshots that differ in one file differ in
that file's object (its inode) alone; verify compares the received data with the source
snapshot's, or with the archive's own stream once the source is gone; and an archive whose
stream was changed and made whole again (its checksum recomputed, its sums forged) is
received, and still fails verify, naming the file whose data differ."""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
import subprocess
import time

import pytest
from harness.archives import run, vacate

from vacate.archive.zfs_content import Digester, differing

pytestmark = [pytest.mark.root, pytest.mark.slow]

MARK = b"vacate-content-marker-" * 8


def _dataset(pool, name="src") -> tuple[str, str]:
    mnt = pool.create(name)
    rnd = random.Random(7)
    with open(os.path.join(mnt, "weights.bin"), "wb") as f:
        f.write(rnd.randbytes(300_000) + MARK + rnd.randbytes(100_000))
    with open(os.path.join(mnt, "zeros.bin"), "wb") as f:     # written zeros, not a hole
        f.write(bytes(512 << 10) + b"tail")
    os.makedirs(os.path.join(mnt, "d"))
    with open(os.path.join(mnt, "d", "small.txt"), "wb") as f:
        f.write(b"hello\n")
    run("zfs", "snapshot", f"{pool.name}/{name}@s1")
    return f"{pool.name}/{name}", mnt


def _digest(stream: bytes, piece: int = 1 << 20) -> Digester:
    d = Digester()
    for i in range(0, len(stream), piece):
        d.feed(stream[i:i + piece])
    d.content()
    return d


def test_a_stream_digests_the_same_however_cut_and_however_its_zeros_are_stored(pool):
    ds, _ = _dataset(pool)
    stream = run("zfs", "send", f"{ds}@s1").stdout
    whole = _digest(stream).content()
    assert whole.objects >= 3 and whole.bytes >= 400_000
    assert _digest(stream, 997).content() == whole
    # -p (a compound stream: its properties first) carries the same data
    assert _digest(run("zfs", "send", "-p", f"{ds}@s1").stdout).content() == whole
    # received where the pool compresses, the zeros become a hole: the same digest
    run("zfs", "create", "-o", "compression=on", f"{pool.name}/z")
    run("bash", "-c", f"zfs send {ds}@s1 | zfs receive {pool.name}/z/back")
    back = run("zfs", "send", f"{pool.name}/z/back@s1").stdout
    assert back != stream                  # stored otherwise: a FREE where the zeros were
    assert _digest(back).content() == whole


def test_two_snapshots_differ_in_the_changed_files_object_alone(pool):
    ds, mnt = _dataset(pool)
    path = os.path.join(mnt, "weights.bin")
    with open(path, "r+b") as f:
        f.seek(300_005)
        f.write(b"X")
    run("zfs", "snapshot", f"{ds}@s2")
    a = _digest(run("zfs", "send", f"{ds}@s1").stdout)
    b = _digest(run("zfs", "send", f"{ds}@s2").stdout)
    assert a.content().digest != b.content().digest
    assert differing(a, b) == ([os.stat(path).st_ino], 0)


def _json(r: subprocess.CompletedProcess) -> dict:
    return json.loads(r.stdout)


def _datasets(pool) -> list[str]:
    return [d for d in run("zfs", "list", "-H", "-o", "name", "-t", "all", "-r", pool.name
                           ).stdout.decode().split() if "/vacate-tree-" not in d]


def test_verify_compares_the_data_with_the_source_then_with_the_archive(pool, tmp_path):
    ds, _ = _dataset(pool)
    r = vacate("archive", "--zfs", f"{ds}@s1", "--to", str(tmp_path), "--name", "ct")
    assert r.returncode == 0, r.stderr
    source = _digest(run("zfs", "send", f"{ds}@s1").stdout).content()
    run("zfs", "set", "compression=on", pool.name)        # the scratch stores zeros as holes
    r = vacate("verify", str(tmp_path / "ct"), "--verify-pool", pool.name, "--json")
    doc = _json(r)
    assert r.returncode == 0 and doc["allows_freeing"], r.stdout
    assert doc["content"] == {"digest": source.digest, "objects": source.objects,
                              "bytes": source.bytes, "against": "source"}
    text = vacate("verify", str(tmp_path / "ct"), "--verify-pool", pool.name).stdout.decode()
    assert f"digest {source.digest}, compared with the source snapshot's stream" in text
    _destroy(ds)                             # the source gone: the archive's stream it is
    r = vacate("verify", str(tmp_path / "ct"), "--verify-pool", pool.name, "--json")
    doc = _json(r)
    assert r.returncode == 0 and doc["content"]["against"] == "archived", r.stdout
    assert doc["content"]["digest"] == source.digest
    assert doc["compared"]["against"] == "recorded"


def _destroy(name: str) -> None:
    """``zfs destroy -r``, tried again while zfs-fuse says busy (it may for seconds after a
    send or a mount)."""
    deadline = time.monotonic() + 60
    while True:
        r = run("zfs", "destroy", "-r", name, check=False)
        if r.returncode == 0:
            return
        assert time.monotonic() < deadline, r.stderr
        time.sleep(0.5)


def _fletcher4(data: bytes) -> bytes:
    """ZFS's fletcher-4 of ``data`` (little-endian 32-bit words), as a stream's END holds it."""
    a = b = c = d = 0
    m = (1 << 64) - 1
    for (w,) in struct.iter_unpack("<I", data):
        a = (a + w) & m
        b = (b + a) & m
        c = (c + b) & m
        d = (d + c) & m
    return struct.pack("<4Q", a, b, c, d)


def test_a_stream_changed_and_made_whole_again_is_received_and_still_fails(pool, tmp_path):
    """A forger's whole job: one byte of a file's data changed in the stream, its END
    checksum recomputed (so ZFS receives it), the parts, sums and manifest written to match.
    Guid, referenced bytes and the file list all agree; the data do not, and the file is
    named."""
    ds, _ = _dataset(pool)
    r = vacate("archive", "--zfs", f"{ds}@s1", "--to", str(tmp_path), "--name", "ct",
               "--send-flags=")
    assert r.returncode == 0, r.stderr
    adir = tmp_path / "ct"
    stream = bytearray(run("zfs", "send", f"{ds}@s1").stdout)
    at = stream.index(MARK)
    stream[at] ^= 0x01
    stream[-312 + 8:-312 + 40] = _fletcher4(bytes(stream[:-312]))
    m = json.loads((adir / "ZFS-MANIFEST.json").read_text())
    for p in m["parts"]:
        os.unlink(adir / p["name"])
    z = subprocess.run(["zstd", "-q", "-c"], input=bytes(stream), capture_output=True,
                       check=True).stdout
    name = "ct.zfs.zst.000000"
    (adir / name).write_bytes(z)
    sha = hashlib.sha256(z).hexdigest()
    (adir / "SHA256SUMS").write_text(f"{sha}  {name}\n")
    m["parts"] = [{"name": name, "bytes": len(z), "sha256": sha}]
    m["stream_bytes"] = len(stream)
    (adir / "ZFS-MANIFEST.json").write_text(json.dumps(m))
    # ZFS itself takes it: the change is inside a file's data, the checksum whole
    run("bash", "-c", f"zstd -dc {adir}/{name} | zfs receive {pool.name}/taken")
    before = _datasets(pool)
    r = vacate("verify", str(adir), "--verify-pool", pool.name, "--json")
    doc = _json(r)
    assert r.returncode == 1 and not doc["allows_freeing"], r.stdout
    assert [f["message"] for f in doc["findings"]] == [
        "weights.bin: its data differ from the source snapshot's"]
    assert doc["compared"]["against"] == "recorded"       # the file list agreed
    assert _datasets(pool) == before                      # the scratch destroyed
