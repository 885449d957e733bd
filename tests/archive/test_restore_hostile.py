"""``vacate restore`` of crafted archives: it never reaches outside ``--to``, refuses damage
before writing anything (exit 2), restores symlinks verbatim and last, and leaves out device
nodes and set-id bits unless asked."""

from __future__ import annotations

import os
import stat

import pytest
from harness.archive_corpus import (
    Outside,
    assert_inside_only,
    build,
    entry,
    member_bytes,
    read_manifest,
    real_archive,
    restore,
    symlink_chain,
    write_manifest,
)

from vacate.archive import beneath, tarfmt
from vacate.archive.restore import restore as restore_api
from vacate.archive.target import LocalTarget
from vacate.observing.errors import UsageError


def _depth(path: str) -> int:
    return len(os.path.abspath(path).strip("/").split("/"))


@pytest.fixture
def place(tmp_path):
    """(base directory, --to inside it, what must not change)."""
    base = tmp_path / "place"
    base.mkdir()
    return str(base), str(base / "out"), Outside(str(base))


def _refused(rc, err, out, outside, *words):
    assert rc == 2, err
    assert "Traceback" not in err
    for w in words:
        assert w in err, err
    assert not os.path.exists(out) or os.listdir(out) == []
    outside.check("out")


# ---- links through what is on disk, not through link texts --------------------------------

def test_symlink_chain_then_hardlink_to_etc_passwd(place, tmp_path):
    """The issue's example: l1 -> ., l2 -> l1/.., ...; h -> lN/etc/passwd."""
    _base, out, outside = place
    n = _depth(out) + 2
    chain = symlink_chain(n)
    adir = build(str(tmp_path / "a"), [*chain, entry("h", "hardlink", link=f"l{n}/etc/passwd")])
    before = os.stat("/etc/passwd").st_nlink
    rc, _res, err = restore(adir, out)
    _refused(rc, err, out, outside, "damaged", "hardlink")
    assert os.stat("/etc/passwd").st_nlink == before


@pytest.mark.parametrize("link", ["/etc/passwd", "../../../../../../etc/passwd",
                                  "src/../../../../etc/passwd", "src/l/passwd", "src/l",
                                  "src", "src/h"])
def test_hardlink_to_anything_but_a_file_of_the_archive(place, tmp_path, link):
    _base, out, outside = place
    adir = build(str(tmp_path / "a"), [entry("src", "dir"),
                                       entry("src/l", "symlink", link="/etc"),
                                       entry("src/h", "hardlink", link=link)])
    rc, _res, err = restore(adir, out)
    _refused(rc, err, out, outside, "hardlink")


def test_file_inside_a_symlink_of_the_archive(place, tmp_path):
    """A symlink to a directory outside, then a file 'inside' it (several levels down)."""
    base, out, outside = place
    for i, path in enumerate(("src/esc/keep", "src/esc/inner/new", "src/esc/a/b/c/d")):
        adir = build(str(tmp_path / f"a{i}"), [
            entry("src", "dir"), entry("src/esc", "symlink", link=os.path.join(base, "sentinel")),
            (entry(path, data=b"pwned\n"), b"pwned\n")])
        rc, _res, err = restore(adir, out)
        _refused(rc, err, out, outside, "inside", "not a directory")


def test_symlink_chain_with_files_through_it(place, tmp_path):
    _base, out, outside = place
    n = _depth(out) + 2
    adir = build(str(tmp_path / "a"), [*symlink_chain(n),
                                       (entry(f"l{n}/etc/vacate-escaped", data=b"x"), b"x")])
    rc, _res, err = restore(adir, out)
    _refused(rc, err, out, outside)


def test_same_name_twice_a_dir_then_a_symlink(place, tmp_path):
    """A directory, then a symlink of the same name (a later part would write through it)."""
    base, out, outside = place
    adir = build(str(tmp_path / "a"), [
        entry("src", "dir"), entry("src/d", "dir"),
        entry("src/d", "symlink", link=os.path.join(base, "sentinel")),
        (entry("src/d/keep", data=b"pwned\n"), b"pwned\n")])
    rc, _res, err = restore(adir, out)
    _refused(rc, err, out, outside, "twice")


def test_symlinked_subdirectory_already_under_to(place, tmp_path):
    """--to holds a symlink where the archive has a directory: refused, even with --force."""
    base, out, outside = place
    adir = build(str(tmp_path / "a"), [entry("src", "dir"), entry("src/sub", "dir"),
                                       (entry("src/sub/keep", data=b"pwned\n"), b"pwned\n")])
    os.makedirs(os.path.join(out, "src"))
    os.symlink(os.path.join(base, "sentinel"), os.path.join(out, "src", "sub"))
    for extra in ((), ("--force",)):
        rc, _res, err = restore(adir, out, *extra)
        assert rc == 2 and "symlink" in err and "Traceback" not in err, err
        outside.check("out")
    # the same through a file where a directory goes
    os.unlink(os.path.join(out, "src", "sub"))
    with open(os.path.join(out, "src", "sub"), "w") as f:
        f.write("a file\n")
    rc, _res, err = restore(adir, out, "--force")
    assert rc == 2 and "file" in err, err
    outside.check("out")


def test_force_replaces_a_symlink_never_writes_through_it(place, tmp_path):
    """With --force a file whose name is a symlink in --to replaces the link itself."""
    base, out, outside = place
    adir = build(str(tmp_path / "a"), [entry("src", "dir"),
                                       (entry("src/keep", data=b"mine\n"), b"mine\n")])
    os.makedirs(os.path.join(out, "src"))
    os.symlink(os.path.join(base, "sentinel", "keep"), os.path.join(out, "src", "keep"))
    rc, _res, err = restore(adir, out, "--force")
    assert rc == 0, err
    p = os.path.join(out, "src", "keep")
    assert not os.path.islink(p)
    with open(p) as f:
        assert f.read() == "mine\n"
    outside.check("out")


def test_absolute_and_escaping_symlinks_are_restored_verbatim(place, tmp_path):
    base, out, outside = place

    def tree(src):
        os.makedirs(os.path.join(src, "d"))
        os.symlink("/etc/passwd", os.path.join(src, "abs"))
        os.symlink("../../../../../../../../etc", os.path.join(src, "d", "up"))
        os.symlink(os.path.join(base, "sentinel"), os.path.join(src, "sent"))
        with open(os.path.join(src, "d", "f"), "w") as f:
            f.write("f\n")
    adir = real_archive(str(tmp_path / "r"), tree)
    rc, res, err = restore(adir, out)
    assert rc == 0, (res, err)
    assert res["refused"] == [] and res["findings"] == []
    assert os.readlink(os.path.join(out, "src", "abs")) == "/etc/passwd"
    assert os.readlink(os.path.join(out, "src", "d", "up")) == "../../../../../../../../etc"
    assert os.readlink(os.path.join(out, "src", "sent")) == os.path.join(base, "sentinel")
    assert_inside_only(out)
    outside.check("out")


@pytest.mark.slow
def test_paths_that_climb_or_are_absolute(place, tmp_path):
    _base, out, outside = place
    for i, bad in enumerate(("../escaped", "/etc/vacate-escaped", "src/../../escaped",
                             "src/./x", "src//x", "src/", ".", "..")):
        adir = build(str(tmp_path / f"a{i}"), [entry("src", "dir"),
                                               (entry(bad, data=b"x"), b"x")])
        rc, _res, err = restore(adir, out)
        _refused(rc, err, out, outside, "damaged")


# ---- parts are plain names in the archive -------------------------------------------------

@pytest.mark.parametrize("name", ["/etc/shadow", "../fifo", "sub/part-000001.tar.zst", ".",
                                  "..", "", ".vacate-partial", "x\0y"])
def test_part_names_are_plain_names(place, tmp_path, name):
    _base, out, outside = place
    os.mkfifo(str(tmp_path / "fifo"))        # opened, it would hang: the timeout would fail
    adir = build(str(tmp_path / "a"), [entry("src", "dir", part=name),
                                       (entry("src/f", data=b"x", part=name), b"x")], part=name)
    rc, _res, err = restore(adir, out)
    _refused(rc, err, out, outside, "part")


# ---- what is not a known entry, and special files -----------------------------------------

@pytest.mark.parametrize("kind", ["socket", "whiteout", "", "FILE", "hardlinks"])
def test_unknown_entry_type_is_damage(place, tmp_path, kind):
    _base, out, outside = place
    adir = build(str(tmp_path / "a"), [entry("src", "dir"), entry("src/x", kind)])
    rc, _res, err = restore(adir, out)
    _refused(rc, err, out, outside, "unknown entry type")


def test_unknown_member_type_in_the_tar_stream(place, tmp_path):
    """A member of a type tar readers disagree about ('S', 'V', 'M') is a damaged part."""
    _base, out, outside = place
    e = entry("src/f", data=b"data\n")
    tar = bytearray(member_bytes(e, b"data\n"))
    hdr = 512 * 2             # pax header and its data block, then the ustar header
    tar[hdr + 156:hdr + 157] = b"V"
    tar[hdr + 148:hdr + 156] = b"        "
    tar[hdr + 148:hdr + 156] = b"%06o\0 " % sum(tar[hdr:hdr + 512])
    adir = build(str(tmp_path / "a"), [entry("src", "dir"), (e, b"data\n")],
                 tar=bytes(tar) + member_bytes(entry("src", "dir")) + tarfmt.END_OF_ARCHIVE)
    rc, res, err = restore(adir, out)
    assert rc == 1, err
    assert {f["code"] for f in res["findings"]} >= {"part-corrupt"}
    assert not os.path.exists(os.path.join(out, "src", "f"))
    outside.check("out")


@pytest.mark.root
def test_device_nodes_and_setid_bits_only_with_preserve_special(place, tmp_path):
    _base, out, outside = place
    forged = {"preserve_special": True, "created_as_root": True, "trusted": True}
    adir = build(str(tmp_path / "a"), [
        entry("src", "dir", mode="2775"),
        entry("src/null", "char", mode="0666", rdev=[1, 3]),
        entry("src/disk", "block", mode="0660", rdev=[7, 0]),
        (entry("src/suid", data=b"#!/bin/sh\n", mode="4755"), b"#!/bin/sh\n"),
        (entry("src/sgid", data=b"#!/bin/sh\n", mode="2711"), b"#!/bin/sh\n"),
        entry("src/fifo", "fifo", mode="6644")], header=forged)
    rc, res, err = restore(adir, out)
    assert rc == 0, err
    withheld = {(w["code"], w["path"]) for w in res["withheld"]}
    assert withheld == {("device-not-created", "src/null"), ("device-not-created", "src/disk"),
                        ("setid-dropped", "src/suid"), ("setid-dropped", "src/sgid"),
                        ("setid-dropped", "src/fifo"), ("setid-dropped", "src")}
    assert not os.path.lexists(os.path.join(out, "src", "null"))
    assert not os.path.lexists(os.path.join(out, "src", "disk"))
    modes = {n: stat.S_IMODE(os.lstat(os.path.join(out, "src", n)).st_mode)
             for n in ("suid", "sgid", "fifo")}
    assert modes == {"suid": 0o755, "sgid": 0o711, "fifo": 0o644}
    assert stat.S_IMODE(os.stat(os.path.join(out, "src")).st_mode) == 0o775
    r = restore(adir, str(tmp_path / "out2"), "--preserve-special")
    assert r[0] == 0, r[2]
    st = os.lstat(tmp_path / "out2" / "src" / "null")
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert stat.S_IMODE(os.stat(tmp_path / "out2" / "src" / "suid").st_mode) == 0o4755
    assert stat.S_IMODE(os.stat(tmp_path / "out2" / "src").st_mode) == 0o2775
    outside.check("out", "out2")


# ---- both ways of resolving beneath --to --------------------------------------------------

@pytest.mark.parametrize("openat2", [True, False])
def test_deep_paths_and_blocked_paths_either_way(tmp_path, monkeypatch, openat2):
    """openat2(RESOLVE_BENEATH) where the kernel has it, the O_NOFOLLOW walk otherwise:
    the same results."""
    if not openat2:
        monkeypatch.setattr(beneath, "_openat2", None)
    # near PATH_MAX, in fewer levels than shutil.rmtree (pytest's cleanup) can recurse
    deep = "src/" + "/".join(["d" * 8] * 400)
    dirs = [entry("src", "dir")] + [entry("src/" + "/".join(["d" * 8] * k), "dir")
                                    for k in range(1, 401)]
    adir = build(str(tmp_path / "a"), [*dirs, (entry(deep + "/f", data=b"deep\n"), b"deep\n"),
                                       entry(deep + "/h", "hardlink", link=deep + "/f")])
    out = tmp_path / "out"
    r = restore_api(LocalTarget(adir), str(out))
    assert r.exit_code == 0, r.findings
    fd = os.open(out, os.O_RDONLY)
    try:
        a = os.stat(deep + "/f", dir_fd=fd)
        assert a.st_nlink == 2 and a.st_size == 5
    finally:
        os.close(fd)
    blocked = tmp_path / "blocked"
    (blocked / "src" / "dddddddd").mkdir(parents=True)
    os.symlink(str(tmp_path), blocked / "src" / "dddddddd" / "dddddddd")
    with pytest.raises(UsageError, match="symlink"):
        restore_api(LocalTarget(adir), str(blocked))
    assert sorted(os.listdir(blocked / "src" / "dddddddd")) == ["dddddddd"]
    assert not (tmp_path / "dddddddd").exists()


@pytest.mark.parametrize("openat2", [True, False])
def test_directories_deeper_than_path_max(tmp_path, monkeypatch, openat2):
    """A manifest path longer than PATH_MAX (directories deeper than it): resolved step by
    step where one call cannot take it."""
    if not openat2:
        monkeypatch.setattr(beneath, "_openat2", None)
    comps = ["n" * 200] * 25
    dirs = [entry("src", "dir")] + [entry("src/" + "/".join(comps[:k]), "dir")
                                    for k in range(1, len(comps) + 1)]
    adir = build(str(tmp_path / "a"), dirs)
    r = restore_api(LocalTarget(adir), str(tmp_path / "out"))
    assert r.exit_code == 0, r.findings
    fd = os.open(tmp_path / "out" / "src", os.O_RDONLY)
    try:
        for c in comps:
            nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        assert os.fstat(fd).st_mtime_ns == dirs[-1]["mtime_ns"]
    finally:
        os.close(fd)


def test_a_real_archive_still_restores_with_stock_tools_alongside(tmp_path):
    """The format is unchanged: what vacate restores equals what stock tar restores."""
    from harness.archives import make_awkward_tree, snapshot, snapshot_diff, stock_restore
    src = make_awkward_tree(str(tmp_path), big_mb=1)
    from harness.archive_corpus import vacate
    r = vacate("archive", src, "--to", str(tmp_path / "b"), "--no-progress")
    assert r.returncode == 0, r.stderr.decode()
    adir = str(tmp_path / "b" / "src")
    stock_restore(adir, str(tmp_path / "stock"))
    rc, _res, err = restore(adir, tmp_path / "mine", "--preserve-special")
    assert rc == 0, err
    assert snapshot_diff(snapshot(str(tmp_path / "stock" / "src")),
                         snapshot(str(tmp_path / "mine" / "src"))) == []


def test_hardlink_first_file_failed_its_check(place, tmp_path):
    """A hardlink to a file that failed its sha256 is not made to whatever is there."""
    _base, out, outside = place
    f = entry("src/f", data=b"real\n")
    adir = build(str(tmp_path / "a"), [entry("src", "dir"), (f, b"real\n"),
                                       entry("src/h", "hardlink", link="src/f")])
    head, entries = read_manifest(adir)
    entries[1]["sha256"] = "0" * 64
    entries[2]["sha256"] = "0" * 64
    write_manifest(adir, head, entries)
    rc, res, err = restore(adir, out)
    assert rc == 1, err
    assert not os.path.lexists(os.path.join(out, "src", "f"))
    assert not os.path.lexists(os.path.join(out, "src", "h"))
    assert "file-checksum" in {x["code"] for x in res["findings"]}
    assert os.listdir(os.path.join(out, "src")) == []        # no temp file left either
    outside.check("out")
