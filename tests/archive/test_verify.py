"""``vacate verify``: reads everything back; every kind of damage is named, exit 1."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest
from harness.archives import make_awkward_tree, needs_tools, run, vacate

pytestmark = needs_tools("zstd", "tar", "sha256sum")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("verify")
    src = make_awkward_tree(str(root), big_mb=2)
    r = vacate("archive", src, "--to", str(root / "b"), "--part-size", "256K", "--json")
    assert r.returncode == 0, r.stderr.decode()
    return src, str(root / "b" / "src"), json.loads(r.stdout)


@pytest.fixture
def copy(pristine, tmp_path):
    src, adir, doc = pristine
    dst = str(tmp_path / "src")
    shutil.copytree(adir, dst)
    return src, dst, doc


def _verify(adir, *extra):
    r = vacate("verify", adir, "--json", *extra)
    return r.returncode, json.loads(r.stdout) if r.stdout else None, r.stderr.decode()


def _codes(doc):
    return {f["code"] for f in doc["findings"]}


def _part_holding(adir, path: bytes) -> str:
    with open(os.path.join(adir, "MANIFEST.jsonl"), "rb") as f:
        lines = f.read().splitlines()[1:]
    for line in lines:
        e = json.loads(line)
        if os.fsencode(e["path"]) == path:
            return e["part"]
    raise KeyError(path)


def test_intact_archive_verifies_against_its_source(copy):
    src, adir, _ = copy
    rc, doc, _err = _verify(adir, "--against", src)
    assert rc == 0, doc
    assert doc["schema"] == "vacate.verify/1" and doc["ok"] is True
    with open(os.path.join(adir, "MANIFEST.jsonl")) as f:
        files = [e for e in map(json.loads, f.read().splitlines()[1:]) if e["type"] == "file"]
    assert doc["files_checked"] == len(files) == len(set(_regular_inodes(src)))
    assert doc["sources_checked"] > 0


def _regular_inodes(src):
    for d, _, files in os.walk(os.fsencode(src)):
        for n in files:
            st = os.lstat(os.path.join(d, n))
            if stat.S_ISREG(st.st_mode):
                yield st.st_ino


def test_flipped_byte_is_named(copy):
    _, adir, _ = copy
    part = _part_holding(adir, b"src/weights.bin")
    p = os.path.join(adir, part)
    with open(p, "r+b") as f:
        f.seek(os.path.getsize(p) // 2)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x20]))
    rc, doc, _ = _verify(adir)
    assert rc == 1
    assert _codes(doc) & {"part-corrupt", "part-checksum"}
    bad = [f for f in doc["findings"] if f["part"] == part]
    assert bad and all(f["part"] == part for f in doc["findings"])   # only that part
    assert any(f["path"] == "src/weights.bin" for f in bad)
    # stock sha256sum agrees that this part is damaged
    assert run("sha256sum", "-c", "PARTS.SHA256SUMS", cwd=adir, check=False).returncode != 0


def test_truncated_part_is_named(copy):
    _, adir, doc0 = copy
    part = doc0["parts"][-1]["name"]
    p = os.path.join(adir, part)
    os.truncate(p, os.path.getsize(p) // 2)
    rc, doc, _ = _verify(adir)
    assert rc == 1
    assert "part-truncated" in _codes(doc)
    assert any(f["part"] == part and f["code"] == "part-truncated" for f in doc["findings"])


def test_missing_part_names_the_files_lost(copy):
    _, adir, _doc0 = copy
    part = _part_holding(adir, b"src/sub/deep/rec010.json")
    os.unlink(os.path.join(adir, part))
    rc, doc, _ = _verify(adir)
    assert rc == 1
    assert "part-missing" in _codes(doc)
    lost = {f["path"] for f in doc["findings"] if f["code"] == "member-missing"}
    assert "src/sub/deep/rec010.json" in lost


def test_changed_source_is_named(copy, tmp_path):
    src, adir, _ = copy
    mine = str(tmp_path / "srccopy" / "src")
    os.makedirs(os.path.dirname(mine))
    run("cp", "-a", src, mine)
    target = os.path.join(mine, "sub", "deep", "rec020.json")
    os.chmod(os.path.dirname(target), 0o755)
    st = os.stat(target)
    with open(target, "r+b") as f:          # same size, same mtime: only the content differs
        b = f.read(1)
        f.seek(0)
        f.write(bytes([b[0] ^ 1]))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.unlink(os.path.join(mine, "zero-length"))
    with open(os.path.join(mine, "new-file"), "w") as f:
        f.write("x")
    rc, doc, _ = _verify(adir, "--against", mine)
    assert rc == 1
    by = {(f["code"], os.path.basename(f["path"] or "")) for f in doc["findings"]}
    assert ("source-changed", "rec020.json") in by
    assert ("source-missing", "zero-length") in by
    assert ("source-extra", "new-file") in by


def test_tampered_manifest_or_sums(copy):
    _, adir, _ = copy
    with open(os.path.join(adir, "SHA256SUMS"), "ab") as f:
        f.write(b"0" * 64 + b"  src/invented\n")
    rc, doc, _ = _verify(adir)
    assert rc == 1 and "sums-mismatch" in _codes(doc)


def test_not_an_archive_is_a_usage_error(tmp_path):
    rc, _doc, err = _verify(str(tmp_path))
    assert rc == 2 and "no vacate archive" in err
