"""The native archive (``vacate archive --zfs``) on real ZFS (zfs-fuse, tests/harness/
zfs_pool.py): send → parts → verify (received, and the weaker parse) → restore, byte for
byte; damage and forged sums caught; kill -9 at every phase then a rerun that ends as an
uninterrupted run; the README's stock restore; hostile manifests refused, nothing changed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest
from harness.archives import make_awkward_tree, run, snapshot, snapshot_diff, vacate

pytestmark = [pytest.mark.root, pytest.mark.slow]

DS = "ct-1.x:y_z"           # a dataset name with every kind of character ZFS allows


def _mk(pool, tmp_path) -> tuple[str, str]:
    """A dataset with the awkward tree and its snapshot @s1; returns (dataset, mountpoint)."""
    mnt = pool.create(DS)
    make_awkward_tree(mnt, big_mb=2)
    os.makedirs(os.path.join(mnt, "src", "modes"))
    os.chmod(os.path.join(mnt, "src", "modes"), 0o2751)
    run("zfs", "snapshot", f"{pool.name}/{DS}@s1")
    return f"{pool.name}/{DS}", mnt


def _archive(origin: str, to: str, *extra: str) -> subprocess.CompletedProcess:
    return vacate("archive", "--zfs", origin, "--to", str(to), "--name", "ct",
                  "--part-size", "1M", *extra)


def _json(r: subprocess.CompletedProcess) -> dict:
    return json.loads(r.stdout)


def _guid(name: str) -> int:
    return int(run("zfs", "get", "-Hp", "-o", "value", "guid", name).stdout)


def _datasets(pool, tree_clone: bool = False) -> list[str]:
    """The pool's datasets and snapshots; the clone an archive read its tree from left out
    (unless ``tree_clone``): zfs-fuse may keep it busy a while, and verify destroys it then."""
    return [d for d in run("zfs", "list", "-H", "-o", "name", "-t", "all", "-r", pool.name
                           ).stdout.decode().split()
            if tree_clone or "/vacate-tree-" not in d]


def _mountpoint(name: str) -> str:
    return run("zfs", "get", "-Hp", "-o", "value", "mountpoint", name).stdout.decode().strip()


def test_round_trip_byte_for_byte(pool, tmp_path):
    ds, mnt = _mk(pool, tmp_path)
    before = snapshot(mnt)
    r = _archive(f"{ds}@s1", tmp_path)
    assert r.returncode == 0, r.stderr
    adir = tmp_path / "ct"
    m = json.loads((adir / "ZFS-MANIFEST.json").read_text())
    assert m["schema"] == "vacate.zfs-archive/1" and m["dataset"] == ds
    assert m["guid"] == m["toguid"] == _guid(f"{ds}@s1") and m["send_flags"] == ["-p"]
    assert len(m["parts"]) >= 2 and m["receive"].endswith("zfs receive POOL/NAME")
    assert run("sha256sum", "-c", "SHA256SUMS", cwd=adir).returncode == 0
    tree = (adir / "ZFS-TREE.jsonl").read_bytes()
    assert m["tree"]["sha256"] == hashlib.sha256(tree).hexdigest()
    assert m["tree"]["entries"] == len(tree.splitlines()) > 50
    r = vacate("restore", str(adir), "--into", f"{pool.name}/back", "--json")
    assert r.returncode == 0, r.stderr
    assert _json(r)["snapshot"] == f"{pool.name}/back@s1"
    assert _guid(f"{pool.name}/back@s1") == m["guid"]
    assert snapshot_diff(before, snapshot(_mountpoint(f"{pool.name}/back"))) == []
    again = vacate("restore", str(adir), "--into", f"{pool.name}/back")
    assert again.returncode == 2 and b"exists" in again.stderr


def test_verify_received_and_the_weaker_parse(pool, tmp_path):
    ds, _ = _mk(pool, tmp_path)
    assert _archive(f"{ds}@s1", tmp_path).returncode == 0
    before = _datasets(pool)
    r = vacate("verify", str(tmp_path / "ct"), "--verify-pool", pool.name, "--json")
    doc = _json(r)
    assert r.returncode == 0, r.stdout
    assert doc["strength"] == "received" and doc["allows_freeing"] and doc["ok"]
    assert doc["compared"]["entries"] > 50
    m = json.loads((tmp_path / "ct" / "ZFS-MANIFEST.json").read_text())
    assert doc["compared"]["digest"] == m["tree"]["digest"]
    assert doc["compared"]["against"] == "recorded"
    assert _datasets(pool, tree_clone=True) == before   # the archive's clone too
    assert doc["compared"]["entries"] == m["tree"]["entries"]
    assert _datasets(pool) == before               # the scratch destroyed
    r = vacate("verify", str(tmp_path / "ct"), "--json")
    doc = _json(r)
    assert r.returncode == 0 and doc["strength"] == "parsed" and not doc["allows_freeing"]
    text = vacate("verify", str(tmp_path / "ct")).stdout.decode()
    assert "weaker check" in text
    # a scratch pool that compresses: the referenced bytes differ and are said not compared,
    # the tree still is
    run("zfs", "set", "compression=on", pool.name)
    r = vacate("verify", str(tmp_path / "ct"), "--verify-pool", pool.name, "--json")
    doc = _json(r)
    assert r.returncode == 0 and doc["allows_freeing"], r.stdout
    assert any("referenced bytes not compared" in n for n in doc["notes"])


def test_a_received_tree_that_differs_from_the_source_is_named(pool, tmp_path):
    """The source snapshot's tree is what the received one is compared with: a manifest
    whose dataset is another one with a snapshot of that name is not the source."""
    ds, _ = _mk(pool, tmp_path)
    assert _archive(f"{ds}@s1", tmp_path).returncode == 0
    other = pool.create("other")
    with open(os.path.join(other, "x"), "w") as f:
        f.write("x")
    run("zfs", "snapshot", f"{pool.name}/other@s1")
    mpath = tmp_path / "ct" / "ZFS-MANIFEST.json"
    m = json.loads(mpath.read_text())
    m["dataset"] = f"{pool.name}/other"
    mpath.write_text(json.dumps(m))
    before = _datasets(pool)
    r = vacate("verify", str(tmp_path / "ct"), "--verify-pool", pool.name, "--json")
    assert r.returncode == 1
    assert any("not the snapshot archived" in f["message"] for f in _json(r)["findings"])
    assert _datasets(pool) == before               # nothing cloned, the scratch gone


def _forge_tree(adir, change) -> None:
    """``change`` the tree file's lines (a list of JSON arrays), then write the manifest's
    record of it to match (its size and sha256; its digest too where ``change`` returns
    True): a forger's whole job, SHA256SUMS (the parts') untouched because it is right."""
    path = adir / "ZFS-TREE.jsonl"
    lines = [json.loads(x) for x in path.read_bytes().splitlines()]
    new_digest = change(lines)
    data = b"".join(json.dumps(x, separators=(",", ":")).encode() + b"\n" for x in lines)
    path.write_bytes(data)
    m = json.loads((adir / "ZFS-MANIFEST.json").read_text())
    m["tree"].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    if new_digest:
        from vacate.archive.tree_compare import digest_line
        from vacate.archive.zfs_tree import parse
        h = hashlib.sha256()
        for raw in data.splitlines():
            h.update(digest_line(*parse(raw)))
        m["tree"]["digest"] = h.hexdigest()
    (adir / "ZFS-MANIFEST.json").write_text(json.dumps(m))


def _mtime_changed(lines) -> bool:
    e = max((x for x in lines if x[1] == "file"), key=lambda x: x[2])    # the big file
    e[6] += 1
    return True


@pytest.mark.parametrize("how, code, words", [
    ("digest", "received-mismatch", "is not the one recorded when it was archived"),
    ("entry", "received-mismatch", "mtime_ns differ"),
    ("entry-digest-kept", "received-mismatch", "mtime_ns differ"),
    ("extra", "received-mismatch", "in the source, not received"),
    ("file", "tree-damaged", "sha256 is not the one the manifest records"),
    ("missing", "tree-damaged", "is missing"),
    ("not-json", "tree-damaged", "a line is not JSON"),
])
def test_a_recorded_tree_forged_or_damaged_fails_verify(pool, tmp_path, how, code, words):
    """Verify reads the source once, at archive time: what it recorded (the tree file, its
    sha256 and the tree's digest in the manifest) is what the received tree must equal. A
    changed digest, a changed entry (with the manifest re-forged to match it, digest and
    all), an entry added, a tree file damaged or gone: each fails verify, and does not allow
    freeing."""
    ds, _ = _mk(pool, tmp_path)
    assert _archive(f"{ds}@s1", tmp_path).returncode == 0
    adir = tmp_path / "ct"
    mpath = adir / "ZFS-MANIFEST.json"
    if how == "digest":
        m = json.loads(mpath.read_text())
        m["tree"]["digest"] = hashlib.sha256(b"forged").hexdigest()
        mpath.write_text(json.dumps(m))
    elif how == "entry":
        _forge_tree(adir, _mtime_changed)
    elif how == "entry-digest-kept":
        _forge_tree(adir, lambda lines: not _mtime_changed(lines))
    elif how == "extra":
        _forge_tree(adir, lambda lines: lines.append(
            ["zzz-forged", "file", 1, 420, 0, 0, 0, 1, "", 99999]) or True)
    elif how == "file":
        with open(adir / "ZFS-TREE.jsonl", "r+b") as f:
            f.seek(10)
            f.write(b"X")
    elif how == "missing":
        os.unlink(adir / "ZFS-TREE.jsonl")
    else:
        _forge_tree(adir, lambda lines: False)
        data = (adir / "ZFS-TREE.jsonl").read_bytes().replace(b"]\n", b"\n", 1)
        (adir / "ZFS-TREE.jsonl").write_bytes(data)
        m = json.loads(mpath.read_text())
        m["tree"].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
        mpath.write_text(json.dumps(m))
    before = _datasets(pool)
    r = vacate("verify", str(adir), "--verify-pool", pool.name, "--json")
    doc = _json(r)
    assert r.returncode == 1 and not doc["allows_freeing"], r.stdout
    assert any(f["code"] == code and words in f["message"] for f in doc["findings"]), \
        doc["findings"]
    assert _datasets(pool) == before               # the scratch destroyed


def test_an_older_manifest_without_a_tree_verifies_against_the_source(pool, tmp_path):
    """An archive written before trees were recorded (no ``tree`` in its manifest, no tree
    file) is verified as it was: the source snapshot's tree read (through a clone, zfs-fuse
    has no .zfs/snapshot) and compared with the received one."""
    ds, _ = _mk(pool, tmp_path)
    assert _archive(f"{ds}@s1", tmp_path).returncode == 0
    adir = tmp_path / "ct"
    m = json.loads((adir / "ZFS-MANIFEST.json").read_text())
    recorded = m.pop("tree")
    (adir / "ZFS-MANIFEST.json").write_text(json.dumps(m))
    os.unlink(adir / "ZFS-TREE.jsonl")
    before = _datasets(pool)
    r = vacate("verify", str(adir), "--verify-pool", pool.name, "--json")
    doc = _json(r)
    assert r.returncode == 0 and doc["allows_freeing"], r.stdout
    assert doc["compared"]["against"] == "source"
    assert doc["compared"]["digest"] == recorded["digest"]     # the same digest, either way
    assert _datasets(pool) == before               # the scratch and the clone destroyed
    # and the source snapshot gone: the received tree only digested, said so
    run("zfs", "destroy", f"{ds}@s1")
    r = vacate("verify", str(adir), "--verify-pool", pool.name, "--json")
    doc = _json(r)
    assert r.returncode == 0 and doc["compared"]["against"] is None, r.stdout
    assert any("is gone" in n for n in doc["notes"])


def test_a_tree_that_cannot_be_read_leaves_verify_to_read_the_source(pool, tmp_path,
                                                                    monkeypatch):
    """The tree is read beside the send; where it cannot be (no clone can be made, say) the
    archive stands, says so, and records no tree: verify reads the source, as for an older
    archive."""
    from vacate.archive import zfs_tool, zfs_tree
    from vacate.archive.target import LocalTarget
    from vacate.archive.zfs_write import write_native
    ds, _ = _mk(pool, tmp_path)

    def refused(*a):
        raise zfs_tool.ZfsError("`zfs clone` failed: refused here")

    monkeypatch.setattr(zfs_tree, "source_tree", refused)
    r = write_native(ds, "s1", LocalTarget(str(tmp_path / "ct")), "ct", part_size=10**6)
    monkeypatch.undo()
    assert r.manifest.tree is None and any("not recorded" in n for n in r.notes), r.notes
    assert "ZFS-TREE.jsonl" not in os.listdir(tmp_path / "ct")
    v = vacate("verify", str(tmp_path / "ct"), "--verify-pool", pool.name, "--json")
    assert v.returncode == 0 and _json(v)["compared"]["against"] == "source", v.stdout


def test_a_corrupt_part_is_caught(pool, tmp_path):
    ds, _ = _mk(pool, tmp_path)
    assert _archive(f"{ds}@s1", tmp_path).returncode == 0
    part = tmp_path / "ct" / "ct.zfs.zst.000001"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    for extra in ([], ["--verify-pool", pool.name]):
        r = vacate("verify", str(tmp_path / "ct"), "--json", *extra)
        assert r.returncode == 1
        codes = {f["code"] for f in _json(r)["findings"]}
        assert "part-checksum" in codes, codes
    before = _datasets(pool)
    r = vacate("restore", str(tmp_path / "ct"), "--into", f"{pool.name}/back")
    assert r.returncode == 1 and _datasets(pool) == before


def _forge(adir, stream: bytes) -> None:
    """Replace the parts with one part of ``stream`` and write sums and manifest to match."""
    import hashlib
    m = json.loads((adir / "ZFS-MANIFEST.json").read_text())
    for p in m["parts"]:
        os.unlink(adir / p["name"])
    z = subprocess.run(["zstd", "-q", "-c"], input=stream, capture_output=True, check=True)
    name = "ct.zfs.zst.000000"
    (adir / name).write_bytes(z.stdout)
    sha = hashlib.sha256(z.stdout).hexdigest()
    (adir / "SHA256SUMS").write_text(f"{sha}  {name}\n")
    m["parts"] = [{"name": name, "bytes": len(z.stdout), "sha256": sha}]
    (adir / "ZFS-MANIFEST.json").write_text(json.dumps(m))


@pytest.mark.parametrize("how", ["cut", "changed"])
def test_a_stream_changed_inside_with_forged_sums_is_caught(pool, tmp_path, how):
    ds, _ = _mk(pool, tmp_path)
    assert _archive(f"{ds}@s1", tmp_path).returncode == 0
    adir = tmp_path / "ct"
    stream = run("zfs", "send", "-p", f"{ds}@s1").stdout
    if how == "cut":
        bad = stream[:len(stream) - 1000]
    else:                       # a byte of file data in the middle: the stream's checksum
        b = bytearray(stream)
        b[len(b) // 2] ^= 0x55
        bad = bytes(b)
    _forge(adir, bad)
    before = _datasets(pool)
    r = vacate("verify", str(adir), "--verify-pool", pool.name, "--json")
    assert r.returncode == 1, r.stdout
    assert "stream-damaged" in {f["code"] for f in _json(r)["findings"]}
    assert _datasets(pool) == before
    if how == "cut":            # the weaker check tells a stream cut short too
        r = vacate("verify", str(adir), "--json")
        assert r.returncode == 1
        assert any("cut short" in f["message"] for f in _json(r)["findings"])


CHILD = textwrap.dedent("""
    import os, signal, sys
    from vacate.archive.target import LocalTarget
    from vacate.archive.zfs_write import write_native
    dataset, dest, phase, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    seen = {}
    def progress(p, n):
        seen[p] = seen.get(p, 0) + 1
        if p == phase and seen[p] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
    write_native(dataset, "s2", LocalTarget(os.path.join(dest, "ct")), "ct",
                 part_size=10**6, take_snapshot=True, progress=progress)
""")

PHASES = [("snapshot", 1), ("send", 1), ("part-writing", 1), ("part", 1), ("part-writing", 2),
          ("part", 2), ("tree", 1), ("sums", 1), ("readme", 1), ("manifest", 1)]


def _files(adir) -> dict:
    """The archive's files, the time it was written left out."""
    out = {}
    for n in sorted(os.listdir(adir)):
        if n != "ZFS-MANIFEST.json":
            out[n] = re.sub(rb" on \d{4}-\d\d-\d\dT[\d:]+Z:", b"", (adir / n).read_bytes())
    m = json.loads((adir / "ZFS-MANIFEST.json").read_text())
    m.pop("created")
    return out | {"manifest": m}


def test_kill_9_at_every_phase_then_a_rerun_ends_as_an_uninterrupted_run(pool, tmp_path):
    ds, _ = _mk(pool, tmp_path)
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    ref = tmp_path / "ref"
    for phase, nth in PHASES:
        dest = tmp_path / f"{phase}-{nth}"
        p = subprocess.run([sys.executable, str(child), ds, str(dest), phase, str(nth)],
                           capture_output=True, check=False)
        assert p.returncode == -signal.SIGKILL, (phase, p.stderr)
        adir = dest / "ct"
        finished = (adir / "ZFS-MANIFEST.json").exists()
        assert finished == (phase == "manifest"), phase
        if not finished and adir.exists() and any(
                n.endswith(".000000") and not n.startswith(".") for n in os.listdir(adir)):
            v = vacate("verify", str(adir))
            assert v.returncode == 2 and b"unfinished" in v.stderr, v.stderr
        r = _archive(f"{ds}@s2", dest, "--take-snapshot")
        assert r.returncode == 0, (phase, r.stderr)
        if not ref.exists():
            assert _archive(f"{ds}@s2", ref).returncode == 0
        assert _files(adir) == _files(ref / "ct"), phase
        assert not [n for n in os.listdir(adir) if n.startswith(".")], phase
    r = vacate("verify", str(tmp_path / "snapshot-1" / "ct"), "--verify-pool", pool.name)
    assert r.returncode == 0, r.stdout
    # the clone the tree was read from: destroyed by the archive, or by verify where
    # zfs-fuse kept it busy a while
    assert _datasets(pool, tree_clone=True) == _datasets(pool)


def test_the_readmes_stock_restore(pool, tmp_path):
    ds, mnt = _mk(pool, tmp_path)
    before = snapshot(mnt)
    assert _archive(f"{ds}@s1", tmp_path).returncode == 0
    adir = tmp_path / "ct"
    readme = (adir / "README").read_text()
    assert "sha256sum -c SHA256SUMS" in readme
    line = next(x.strip() for x in readme.splitlines() if x.strip().startswith("cat "))
    assert line == "cat ct.zfs.zst.* | zstd -dc | zfs receive POOL/NAME"
    run("sha256sum", "-c", "SHA256SUMS", cwd=adir)
    run("sh", "-c", line.replace("POOL/NAME", f"{pool.name}/stock"), cwd=adir)
    assert snapshot_diff(before, snapshot(_mountpoint(f"{pool.name}/stock"))) == []


def test_hostile_manifests_are_refused_and_nothing_changes(pool, tmp_path):
    ds, _ = _mk(pool, tmp_path)
    assert _archive(f"{ds}@s1", tmp_path).returncode == 0
    adir = tmp_path / "ct"
    good = (adir / "ZFS-MANIFEST.json").read_text()
    before = _datasets(pool)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    for change, words in [
        (lambda m: m["parts"][0].update(name="../victim"), b"is named"),
        (lambda m: m.update(name="../x"), b"plain file name"),
        (lambda m: m.update(dataset="pool/a b; rm -rf /"), b"not a ZFS dataset name"),
        (lambda m: m.update(send_flags=["-D"]), b"vacate sends only with"),
        (lambda m: m.update(schema="other/1"), b"not a vacate.zfs-archive/1"),
    ]:
        m = json.loads(good)
        change(m)
        (adir / "ZFS-MANIFEST.json").write_text(json.dumps(m))
        for args in (["verify", str(adir), "--verify-pool", pool.name],
                     ["restore", str(adir), "--into", f"{pool.name}/back"]):
            r = vacate(*args)
            assert r.returncode == 2 and words in r.stderr, (args, r.stderr)
        assert _datasets(pool) == before and victim.read_text() == "keep"
    (adir / "ZFS-MANIFEST.json").write_text(good)
    # an archive of another snapshot there: a rerun for this one is refused, nothing touched
    run("zfs", "snapshot", f"{ds}@s9")
    listing = sorted(os.listdir(adir))
    r = _archive(f"{ds}@s9", tmp_path)
    assert r.returncode == 2 and b"holds a finished archive of" in r.stderr
    assert sorted(os.listdir(adir)) == listing
