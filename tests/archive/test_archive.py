"""``vacate archive``: round trips through stock zstd + tar + sha256sum on real filesystems."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from harness.archives import (
    make_awkward_tree,
    needs_tools,
    run,
    sha256sum_check,
    snapshot,
    snapshot_diff,
    stock_restore,
    vacate,
)

from vacate.archive import sums

pytestmark = needs_tools("zstd", "tar", "sha256sum")


def _archive(src: str, dest: str, *extra: str) -> dict:
    r = vacate("archive", src, "--to", dest, "--json", *extra)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


@pytest.mark.root
def test_round_trip_on_real_volume_restored_by_stock_tools(volume, tmp_path):
    """Every awkward case survives `zstd -dc | tar -xpf -` and `sha256sum -c` passes."""
    src = make_awkward_tree(volume.mountpoint)
    before = snapshot(src)
    doc = _archive(src, str(tmp_path / "backup"), "--part-size", "1M")
    assert doc["schema"] == "vacate.archive/1"
    adir = str(tmp_path / "backup" / "src")
    assert len(doc["parts"]) >= 2     # split at 1 MiB (the 3 MiB file goes whole into one)
    names = sorted(os.listdir(adir))
    assert {"MANIFEST.jsonl", "SHA256SUMS", "PARTS.SHA256SUMS", "README"} <= set(names)
    assert not [n for n in names if n.startswith(".")]   # no temp or state files left
    # the parts' own checksums, by stock sha256sum
    assert run("sha256sum", "--strict", "-c", "PARTS.SHA256SUMS", cwd=adir).returncode == 0
    out = str(tmp_path / "out")
    stock_restore(adir, out)
    chk = sha256sum_check(adir, out)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    assert snapshot_diff(before, snapshot(os.path.join(out, "src"))) == []
    # sparse files came back sparse, and did not balloon the archive
    st = os.stat(os.path.join(out, "src", "sparse.img"))
    assert st.st_size == 64 << 20 and st.st_blocks * 512 < 4 << 20
    assert doc["bytes_written"] < 8 << 20
    # the README tells the same restore loop
    with open(os.path.join(adir, "README")) as f:
        readme = f.read()
    assert 'for p in *.tar.zst; do zstd -dc "$p" | tar -xpf - -C OUT; done' in readme


def test_manifest_lists_every_entry_with_its_part(tmp_path):
    src = make_awkward_tree(str(tmp_path))
    _archive(src, str(tmp_path / "b"), "--part-size", "512K")
    adir = tmp_path / "b" / "src"
    lines = (adir / "MANIFEST.jsonl").read_bytes().splitlines()
    head = json.loads(lines[0])
    entries = [json.loads(x) for x in lines[1:]]
    assert head["schema"] == "vacate.archive-manifest/1"
    assert head["entries"] == len(entries)
    paths = {os.fsencode(e["path"]) for e in entries}
    on_disk = {os.path.relpath(os.path.join(d, n), os.fsencode(str(tmp_path)))
               for d, ds, fs in os.walk(os.fsencode(src)) for n in ds + fs}
    assert paths == on_disk | {b"src"}
    parts = {p["name"] for p in head["parts"]}
    by_path = {os.fsencode(e["path"]): e for e in entries}
    for e in entries:
        assert e["part"] in parts
        assert {"type", "size", "mode", "uid", "gid", "mtime_ns"} <= set(e)
    assert by_path[b"src/sub/rel-link"]["link"] == "../weights.bin"
    hl = by_path[b"src/sub/hardlink.bin"]
    assert hl["type"] == "hardlink" and hl["link"] == "src/weights.bin"
    assert hl["hardlink_group"] == by_path[b"src/weights.bin"]["hardlink_group"]
    assert hl["sha256"] == by_path[b"src/weights.bin"]["sha256"]
    assert by_path[b"src/sparse.img"]["sparse"] is True
    # directories are all in the last part (so later parts cannot disturb their mtimes)
    last = head["parts"][-1]["name"]
    assert all(e["part"] == last for e in entries if e["type"] == "dir")


def test_sha256sums_lines_match_coreutils_for_awkward_names(tmp_path):
    """Our SHA256SUMS lines are byte-identical to what sha256sum itself writes."""
    d = tmp_path / "names"
    d.mkdir()
    names = [b"plain", b"new\nline", b"back\\slash", b"car\rriage", b"bad\xffbyte",
             b" lead", b"both\\and\nnew"]
    for n in names:
        with open(os.fsencode(str(d)) + b"/" + n, "wb") as f:
            f.write(n * 3)
    import hashlib
    for n in names:
        real = run("sha256sum", "--", n, cwd=str(d)).stdout
        ours = sums.line(hashlib.sha256(n * 3).hexdigest(), n)
        assert ours == real
        assert sums.parse(ours) == [(hashlib.sha256(n * 3).hexdigest(), n)]


def test_existing_archive_is_not_overwritten(tmp_path):
    src = make_awkward_tree(str(tmp_path), big_mb=1)
    _archive(src, str(tmp_path / "b"))
    before = (tmp_path / "b" / "src" / "MANIFEST.jsonl").read_bytes()
    r = vacate("archive", src, "--to", str(tmp_path / "b"))     # the same sources: up to date
    assert r.returncode == 0 and b"up to date" in r.stdout
    assert (tmp_path / "b" / "src" / "MANIFEST.jsonl").read_bytes() == before
    other = tmp_path / "other" / "src"
    other.mkdir(parents=True)
    r = vacate("archive", str(other), "--to", str(tmp_path / "b"))
    assert r.returncode == 2
    assert b"already holds a complete archive" in r.stderr
    assert (tmp_path / "b" / "src" / "MANIFEST.jsonl").read_bytes() == before


def test_usage_errors_exit_2(tmp_path):
    r = vacate("archive", str(tmp_path / "nope"), "--to", str(tmp_path / "b"))
    assert r.returncode == 2 and b"no such file" in r.stderr
    r = vacate("archive", str(tmp_path), "--to", str(tmp_path / "b"), "--part-size", "lots")
    assert r.returncode == 2
    assert not (tmp_path / "b").exists()


def test_file_changing_while_read_is_reported(tmp_path):
    """A file appended to during the archive is named, and the exit code says so."""
    src = tmp_path / "src"
    src.mkdir()
    grow = src / "growing.log"
    grow.write_bytes(os.urandom(48 << 20))
    writer = subprocess.Popen(
        ["sh", "-c", f'while :; do echo more >> "{grow}"; sleep 0.002; done'])
    try:
        r = vacate("archive", str(src), "--to", str(tmp_path / "b"), "--json",
                   "--level", "9")
    finally:
        writer.kill()
        writer.wait()
    assert r.returncode == 1, r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["changed_while_read"] == [str(grow)]
    assert any(w["code"] == "changed-while-read" for w in doc["warnings"])
    m = (tmp_path / "b" / "src" / "MANIFEST.jsonl").read_text()
    assert '"changed_while_read": true' in m


@pytest.mark.root
def test_other_filesystems_below_the_source_are_not_entered(ext4_volume, tmp_path):
    src = make_awkward_tree(ext4_volume.mountpoint, big_mb=1)
    nested = ext4_volume.mount_tmpfs("src/nested-mount")
    with open(os.path.join(nested, "not-mine.txt"), "w") as f:
        f.write("other fs")
    doc = _archive(src, str(tmp_path / "b"))
    assert any(w["code"] == "other-filesystem" for w in doc["warnings"])
    m = (tmp_path / "b" / "src" / "MANIFEST.jsonl").read_text()
    assert "not-mine.txt" not in m


def test_archive_written_inside_its_source_does_not_archive_itself(tmp_path):
    src = make_awkward_tree(str(tmp_path), big_mb=1)
    doc = _archive(src, os.path.join(src, "backups"))
    assert any(w["code"] == "excluded" for w in doc["warnings"])
    m = (tmp_path / "src" / "backups" / "src" / "MANIFEST.jsonl").read_text()
    assert "part-000001" not in "".join(json.loads(x)["path"] for x in m.splitlines()[1:])
    assert vacate("verify", os.path.join(src, "backups", "src")).returncode == 0


@pytest.mark.slow
def test_zstd_child_process_compressor_writes_the_same_format(tmp_path):
    """With VACATE_ZSTD=process a zstd child compresses; stock tools restore the result all
    the same."""
    src = make_awkward_tree(str(tmp_path), big_mb=1)
    before = snapshot(src)
    env = dict(os.environ, VACATE_ZSTD="process")
    r = vacate("archive", src, "--to", str(tmp_path / "b"), "--part-size", "256K", env=env)
    assert r.returncode == 0, r.stderr.decode()
    adir = str(tmp_path / "b" / "src")
    out = str(tmp_path / "out")
    stock_restore(adir, out)
    assert sha256sum_check(adir, out).returncode == 0
    assert snapshot_diff(before, snapshot(os.path.join(out, "src"))) == []
    assert vacate("verify", adir, "--against", src).returncode == 0
