"""``vacate restore``: whole or partial, checked as written, safe against hostile archives."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from harness.archives import make_awkward_tree, needs_tools, snapshot, snapshot_diff, vacate

pytestmark = needs_tools("zstd", "tar", "sha256sum")


@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    root = tmp_path_factory.mktemp("restore")
    src = make_awkward_tree(str(root), big_mb=2)
    r = vacate("archive", src, "--to", str(root / "b"), "--part-size", "256K", "--json")
    assert r.returncode == 0, r.stderr.decode()
    return src, str(root / "b" / "src"), json.loads(r.stdout), snapshot(src)


def _restore(adir, dest, *args):
    r = vacate("restore", adir, *args, "--to", str(dest), "--json")
    return r.returncode, json.loads(r.stdout) if r.stdout else None, r.stderr.decode()


def test_whole_restore_is_exact(archived, tmp_path):
    _src, adir, _doc, before = archived
    rc, res, err = _restore(adir, tmp_path / "out", "--preserve-special")
    assert res["schema"] == "vacate.restore/1"
    assert rc == 0, (res, err)
    assert res["withheld"] == []
    assert snapshot_diff(before, snapshot(str(tmp_path / "out" / "src"))) == []


def test_by_default_no_device_nodes_and_no_setid_bits(archived, tmp_path):
    _src, adir, _doc, before = archived
    rc, res, err = _restore(adir, tmp_path / "out")
    assert rc == 0, (res, err)
    diff = dict(snapshot_diff(before, snapshot(str(tmp_path / "out" / "src"))))
    withheld = {(w["code"], w["path"]) for w in res["withheld"]}
    assert ("setid-dropped", "src/sub/deep/rec003.json") in withheld
    assert diff.pop(b"sub/deep/rec003.json") == {"mode": (0o104755, 0o100755)}
    if os.geteuid() == 0:
        assert ("device-not-created", "src/null-dev") in withheld
        assert b"null-dev" in diff and diff.pop(b"null-dev")["mode"][1] is None
    assert diff == {}


def test_partial_restore_reads_only_the_parts_it_needs(archived, tmp_path):
    _, adir, doc, before = archived
    rc, res, err = _restore(adir, tmp_path / "out", "src/sub/deep/rec01*")
    assert rc == 0, err
    got = sorted(os.listdir(tmp_path / "out" / "src" / "sub" / "deep"))
    assert got == [f"rec01{i}.json" for i in range(10)]
    assert len(res["parts_read"]) < len(doc["parts"])
    with open(os.path.join(adir, "MANIFEST.jsonl")) as f:
        manifest = [json.loads(x) for x in f][1:]
    need = {e["part"] for e in manifest if e["path"].startswith("src/sub/deep/rec01")
            and e["type"] == "file"}
    assert set(res["parts_read"]) == need
    for n in got:
        rel = b"sub/deep/" + n.encode()
        assert before["entries"][rel]["sha"] == snapshot(str(tmp_path / "out" / "src"))[
            "entries"][rel]["sha"]


def test_hardlink_restored_without_its_first_file(archived, tmp_path):
    _, adir, _, _before = archived
    rc, _res, err = _restore(adir, tmp_path / "out", "src/sub/hardlink.bin",
                            "src/sub/hard\nlink2")
    assert rc == 0, err
    a = os.stat(tmp_path / "out" / "src" / "sub" / "hardlink.bin")
    b = os.stat(os.fsencode(str(tmp_path / "out" / "src" / "sub")) + b"/hard\nlink2")
    assert a.st_ino == b.st_ino and a.st_size == 2 << 20
    assert not (tmp_path / "out" / "src" / "weights.bin").exists()


def test_no_overwrite_without_force(archived, tmp_path):
    _, adir, _, _ = archived
    out = tmp_path / "out"
    (out / "src" / "sub" / "deep").mkdir(parents=True)
    victim = out / "src" / "sub" / "deep" / "rec001.json"
    victim.write_text("mine")
    rc, _res, err = _restore(adir, out, "src/sub/deep")
    assert rc == 2 and "already exist" in err
    assert victim.read_text() == "mine"
    assert sorted(os.listdir(out / "src" / "sub" / "deep")) == ["rec001.json"]
    rc, _res, err = _restore(adir, out, "src/sub/deep", "--force")
    assert rc == 0, err
    assert victim.read_text() != "mine"


def _tamper_manifest(adir, dst, edit):
    shutil.copytree(adir, dst)
    p = os.path.join(dst, "MANIFEST.jsonl")
    with open(p) as f:
        lines = f.read().splitlines()
    out = [lines[0]] + [json.dumps(edit(json.loads(x))) for x in lines[1:]]
    with open(p, "w") as f:
        f.write("\n".join(out) + "\n")


def test_traversal_and_absolute_paths_refuse_the_restore(archived, tmp_path):
    _, adir, _, _ = archived
    for i, bad in enumerate(("../escaped", "/etc/vacate-escaped", "src/../../escaped")):
        evil = str(tmp_path / f"evil{i}")
        _tamper_manifest(adir, evil, lambda e, bad=bad: {**e, "path": bad}
                         if e["path"] == "src/zero-length" else e)
        out = tmp_path / f"out{i}"
        rc, _res, err = _restore(evil, out)
        assert rc == 2 and "unsafe" in err, err
        assert not os.path.exists("/etc/vacate-escaped")
        assert not (tmp_path / "escaped").exists()
        assert not out.exists() or not any(out.iterdir())


def test_links_pointing_outside_are_restored_verbatim(archived, tmp_path):
    """Symlinks are data (as tar restores them); nothing is written through them."""
    _, adir, _, _ = archived
    evil = str(tmp_path / "evil")

    def edit(e):
        if e["path"] == "src/sub/rel-link":
            return {**e, "link": "../../../../etc/passwd"}
        if e["path"] == "src/sub/odd-link":
            return {**e, "link": "/etc/shadow"}
        return e
    _tamper_manifest(adir, evil, edit)
    # the tar members still hold the old targets: put them right, as a crafted archive would
    out = tmp_path / "out"
    rc, res, _err = _restore(evil, out, "src/sub")
    assert rc == 0, res
    assert res["refused"] == []
    assert os.readlink(out / "src" / "sub" / "rel-link") == "../../../../etc/passwd"
    assert os.readlink(out / "src" / "sub" / "odd-link") == "/etc/shadow"
    assert (out / "src" / "sub" / "hardlink.bin").exists()      # the rest was restored


def test_corrupt_file_is_not_left_behind(archived, tmp_path):
    """A member whose bytes do not match the manifest's sha256 is not restored."""
    _, adir, _, _ = archived
    evil = str(tmp_path / "evil")
    _tamper_manifest(adir, evil, lambda e: {**e, "sha256": "0" * 64}
                     if e["path"] == "src/sub/deep/rec007.json" else e)
    out = tmp_path / "out"
    rc, res, _err = _restore(evil, out, "src/sub/deep")
    assert rc == 1
    assert [f["code"] for f in res["findings"]] == ["file-checksum"]
    assert not (out / "src" / "sub" / "deep" / "rec007.json").exists()
    assert not [n for n in os.listdir(out / "src" / "sub" / "deep") if "vacate-tmp" in n]
    assert (out / "src" / "sub" / "deep" / "rec008.json").exists()
