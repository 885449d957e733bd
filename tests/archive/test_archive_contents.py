"""What an archive holds is what the scan counts (btrfs subvolumes included, nested mounts
never); what it leaves out is named and makes it exit 1; sockets and mounts are notes;
``--exclude`` is recorded; a rerun onto a complete archive is "up to date" or names what
changed."""

from __future__ import annotations

import json
import os
import socket
import stat as S
import subprocess

import pytest
from harness.archives import (
    needs_tools,
    run,
    sha256sum_check,
    snapshot,
    snapshot_diff,
    stock_restore,
    vacate,
)
from harness.volumes import make_volume

from vacate.archive import writer
from vacate.archive.target import open_target

pytestmark = needs_tools("zstd", "tar", "sha256sum")


def _header(adir) -> dict:
    with open(os.path.join(adir, "MANIFEST.jsonl"), "rb") as f:
        return json.loads(f.readline())


def _paths(adir) -> set[str]:
    with open(os.path.join(adir, "MANIFEST.jsonl"), "rb") as f:
        return {json.loads(x)["path"] for x in f.read().splitlines()[1:]}


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.root
def test_btrfs_subvolumes_are_archived_and_restored(tmp_path):
    """A directory holding a subvolume (and a subvolume inside that): archive holds what the
    scan counts, `vacate restore` and stock zstd | tar both bring the subvolumes' files back,
    and `verify --against` agrees."""
    vol = make_volume("btrfs")
    try:
        _btrfs_round_trip(os.path.join(vol.mountpoint, "data"), tmp_path)
    finally:
        vol.close()


def _btrfs_round_trip(src: str, tmp_path) -> None:
    os.mkdir(src)
    _write(os.path.join(src, "top.txt"), b"on the top subvolume\n")
    run("btrfs", "subvolume", "create", os.path.join(src, "sub"))
    _write(os.path.join(src, "sub", "weights.bin"), os.urandom(300_000))
    _write(os.path.join(src, "sub", "deeper", "note.txt"), b"in a dir of the subvolume\n")
    run("btrfs", "subvolume", "create", os.path.join(src, "sub", "inner"))
    _write(os.path.join(src, "sub", "inner", "x.json"), b'{"nested": "subvolume"}\n')
    assert os.lstat(os.path.join(src, "sub")).st_dev != os.lstat(src).st_dev
    before = snapshot(src)

    scan = json.loads(vacate("scan", src, "--json", "--no-recognise", check=True).stdout)
    r = vacate("archive", src, "--to", str(tmp_path / "b"), "--json")
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["missing"] == [] and not [w for w in doc["warnings"]
                                         if w["code"] == "other-filesystem"]
    adir = str(tmp_path / "b" / "data")
    assert "data/sub/inner/x.json" in _paths(adir)
    assert doc["entries"] == scan["totals"]["files"] + scan["totals"]["dirs"]

    out = str(tmp_path / "stock")
    stock_restore(adir, out)
    chk = sha256sum_check(adir, out)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    assert snapshot_diff(before, snapshot(os.path.join(out, "data"))) == []

    mine = str(tmp_path / "mine")
    r = vacate("restore", adir, "--to", mine)
    assert r.returncode == 0, r.stderr.decode()
    with open(os.path.join(mine, "data", "sub", "inner", "x.json"), "rb") as f:
        assert f.read() == b'{"nested": "subvolume"}\n'
    assert snapshot_diff(before, snapshot(os.path.join(mine, "data"))) == []

    r = vacate("verify", adir, "--against", src)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()


@pytest.mark.root
def test_a_nested_mount_is_a_note_not_archived(tmp_path):
    v = make_volume("ext4")
    try:
        src = os.path.join(v.mountpoint, "data")
        _write(os.path.join(src, "mine.txt"), b"mine\n")
        nested = v.mount_tmpfs("data/other")
        _write(os.path.join(nested, "not-mine.txt"), b"other fs\n")
        r = vacate("archive", src, "--to", str(tmp_path / "b"), "--json")
        assert r.returncode == 0, r.stderr.decode()
        adir = str(tmp_path / "b" / "data")
        assert _paths(adir) == {"data", "data/mine.txt"}
        notes = _header(adir)["notes"]
        assert [(n["code"], n["path"]) for n in notes] == [("other-filesystem", "data/other")]
        assert vacate("verify", adir, "--against", src).returncode == 0
    finally:
        v.close()


def test_sockets_are_notes_and_special_files_archived_as_tar_does(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.txt").write_bytes(b"data\n")
    os.mkfifo(src / "pipe")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(src / "control.sock"))
    try:
        if os.geteuid() == 0:
            os.mknod(src / "tty0", 0o620 | S.S_IFCHR, os.makedev(4, 0))
            os.mknod(src / "loop9", 0o660 | S.S_IFBLK, os.makedev(7, 9))
        r = vacate("archive", str(src), "--to", str(tmp_path / "b"), "--json")
        assert r.returncode == 0, r.stderr.decode()
        adir = str(tmp_path / "b" / "src")
        assert "src/control.sock" not in _paths(adir)
        assert [(n["code"], n["path"]) for n in _header(adir)["notes"]] == \
            [("socket", "src/control.sock")]
        assert _header(adir)["left_out"] == []
        listing = subprocess.run(f"zstd -dc {adir}/part-*.tar.zst | tar -tvf -", shell=True,
                                 capture_output=True, text=True, check=True).stdout
        kinds = {line.split()[-1]: line[0] for line in listing.splitlines()}
        assert kinds["src/pipe"] == "p"
        out = str(tmp_path / "out")
        stock_restore(adir, out)
        assert S.S_ISFIFO(os.lstat(os.path.join(out, "src", "pipe")).st_mode)
        if os.geteuid() == 0:
            assert (kinds["src/tty0"], kinds["src/loop9"]) == ("c", "b")
            st = os.lstat(os.path.join(out, "src", "loop9"))
            assert S.S_ISBLK(st.st_mode) and st.st_rdev == os.makedev(7, 9)
            assert os.lstat(os.path.join(out, "src", "tty0")).st_rdev == os.makedev(4, 0)
        assert vacate("verify", adir, "--against", str(src)).returncode == 0
    finally:
        s.close()


def test_a_file_vanishing_or_replaced_mid_run_is_named_and_exit_1(tmp_path, monkeypatch):
    """The walk listed them, then one was deleted and one replaced (another inode renamed over
    it) before they were read: the archive does not hold what the source holds; the result
    names them, the manifest header lists them, exit 1."""
    src = tmp_path / "src"
    (src / "keep").mkdir(parents=True)
    (src / "keep" / "a.bin").write_bytes(os.urandom(1000))
    (src / "keep" / "gone.bin").write_bytes(os.urandom(1000))
    (src / "keep" / "swapped.bin").write_bytes(b"the file the walk saw")
    add = writer._Writer.add

    def change_then_add(self, se):
        """Each file is read as the walk hands it over: the change comes in between."""
        if se.arcpath == b"src/keep/gone.bin":
            os.unlink(src / "keep" / "gone.bin")
        elif se.arcpath == b"src/keep/swapped.bin":
            (src / "new.tmp").write_bytes(b"another inode")
            os.rename(src / "new.tmp", src / "keep" / "swapped.bin")
        return add(self, se)

    monkeypatch.setattr(writer._Writer, "add", change_then_add)
    target = open_target(str(tmp_path / "b" / "src"))
    r = writer.archive([str(src)], target, "src", progress=lambda done, total: None)
    gone = str(src / "keep" / "gone.bin")
    assert r.missing == (gone, str(src / "keep" / "swapped.bin"))
    assert writer.exit_code(r) == 1
    assert [(x["code"], x["path"]) for x in _header(tmp_path / "b" / "src")["left_out"]] == \
        [("vanished", "src/keep/gone.bin"), ("replaced", "src/keep/swapped.bin")]
    from io import StringIO

    from rich.console import Console
    buf = StringIO()
    from vacate.output import archive_view
    archive_view.render_archive(r, Console(file=buf, width=200))
    assert "incomplete" in buf.getvalue() and gone in buf.getvalue()


def test_unreadable_file_is_exit_3_not_silently_left_out(tmp_path):
    """As nobody, a root-only file cannot be read: named as missing, exit 3 (not 0)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to nobody")
    import pathlib
    import shutil
    import tempfile
    base = pathlib.Path(tempfile.mkdtemp(prefix="vacate-nobody-"))   # nobody may enter it
    os.chmod(base, 0o755)
    src = base / "src"
    src.mkdir()
    (src / "open.txt").write_bytes(b"anyone\n")
    (src / "secret.txt").write_bytes(b"root only\n")
    os.chmod(src / "secret.txt", 0o600)
    dest = base / "b"
    dest.mkdir()
    os.chown(dest, 65534, 65534)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:                     # the archive runs as nobody, in this child
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            r = writer.archive([str(src)], open_target(str(dest / "src")), "src")
            os.write(wfd, json.dumps({"code": writer.exit_code(r),
                                      "missing": list(r.missing)}).encode())
        except BaseException as e:  # noqa: BLE001 (reported to the parent)
            os.write(wfd, json.dumps({"error": repr(e)}).encode())
        finally:
            os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        got = json.loads(f.read() or b"{}")
    os.waitpid(pid, 0)
    shutil.rmtree(base, ignore_errors=True)
    assert got == {"code": 3, "missing": [str(src / "secret.txt")]}


def test_exclude_is_recorded_and_left_out(tmp_path):
    src = tmp_path / "src"
    _write(str(src / "keep" / "a.txt"), b"a\n")
    _write(str(src / "cache" / "big.bin"), os.urandom(10_000))
    _write(str(src / "keep" / "tmp" / "t.txt"), b"t\n")
    r = vacate("archive", str(src), "--to", str(tmp_path / "b"), "--json",
               "--exclude", "cache", "--exclude", str(src / "keep" / "tmp"))
    assert r.returncode == 0, r.stderr.decode()
    adir = str(tmp_path / "b" / "src")
    assert _paths(adir) == {"src", "src/keep", "src/keep/a.txt"}
    head = _header(adir)
    assert head["excluded"] == ["src/cache", "src/keep/tmp"]
    assert head["left_out"] == []
    assert vacate("verify", adir, "--against", str(src)).returncode == 0
    out = str(tmp_path / "out")
    stock_restore(adir, out)
    assert sorted(os.listdir(os.path.join(out, "src"))) == ["keep"]
    # the same exclusions: up to date; others: refused (another archive), exit 2
    r = vacate("archive", str(src), "--to", str(tmp_path / "b"), "--exclude", "cache",
               "--exclude", "keep/tmp")
    assert r.returncode == 0 and b"up to date" in r.stdout, r.stdout + r.stderr
    r = vacate("archive", str(src), "--to", str(tmp_path / "b"), "--exclude", "cache")
    assert r.returncode == 2 and b"other exclusions" in r.stderr
    r = vacate("archive", str(src), "--to", str(tmp_path / "c"), "--exclude", "/etc")
    assert r.returncode == 2 and b"not below a source" in r.stderr
    assert not (tmp_path / "c").exists()


def test_rerun_up_to_date_or_says_what_changed(tmp_path):
    src = tmp_path / "src"
    _write(str(src / "a.txt"), b"aaaa\n")
    _write(str(src / "d" / "b.txt"), b"bbbb\n")
    adir = tmp_path / "b" / "src"
    assert vacate("archive", str(src), "--to", str(tmp_path / "b")).returncode == 0
    files = {n: os.stat(adir / n).st_mtime_ns for n in os.listdir(adir)}

    r = vacate("archive", str(src), "--to", str(tmp_path / "b"), "--json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert doc["up_to_date"] is True and doc["changed_since"] == []

    # the same size and mtime, new content: seen by ctime
    st = os.stat(src / "a.txt")
    (src / "a.txt").write_bytes(b"AAAA\n")
    os.utime(src / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    (src / "d" / "new.txt").write_bytes(b"new\n")
    os.unlink(src / "d" / "b.txt")
    r = vacate("archive", str(src), "--to", str(tmp_path / "b"))
    assert r.returncode == 1
    out = r.stdout.decode()
    assert "changed since" in out
    assert f"{src / 'a.txt'}: ctime differs" in out
    assert f"{src / 'd' / 'new.txt'}: new" in out
    assert f"{src / 'd' / 'b.txt'}: gone" in out
    assert {n: os.stat(adir / n).st_mtime_ns for n in os.listdir(adir)} == files


def test_level_out_of_range_is_a_usage_error_writing_nothing(tmp_path):
    src = tmp_path / "src"
    _write(str(src / "a.txt"), b"a\n")
    for bad in ("99", "0", "-5", "x"):
        r = vacate("archive", str(src), "--to", str(tmp_path / "b"), "--level", bad)
        assert r.returncode == 2 and b"usage:" in r.stderr, r.stderr
        assert b"Traceback" not in r.stderr
    assert not (tmp_path / "b").exists()
    r = vacate("archive", str(src), "--to", str(tmp_path / "b"), "--level", "19")
    assert r.returncode == 0


@pytest.mark.slow
@pytest.mark.root
def test_full_target_disk_is_a_clear_error_and_leaves_nothing_behind(tmp_path):
    """A 64 MB ext4 target with 30 MB of it taken, 40 MB of incompressible data: exit 2 with
    "No space left", no traceback, no temp part keeping the disk full; with small parts, the
    finished parts stay and the same command, once there is space, finishes the archive."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(4):
        (src / f"f{i}.bin").write_bytes(os.urandom(10 << 20))
    v = make_volume("ext4", 64)
    try:
        ballast = os.path.join(v.mountpoint, "ballast")
        with open(ballast, "wb") as f:
            f.write(os.urandom(30 << 20))
        free0 = os.statvfs(v.mountpoint).f_bfree
        r = vacate("archive", str(src), "--to", v.mountpoint)
        err = r.stderr.decode()
        assert r.returncode == 2, err
        assert "No space left" in err and "Traceback" not in err
        assert sorted(os.listdir(v.mountpoint)) == ["ballast", "lost+found"]
        assert os.statvfs(v.mountpoint).f_bfree >= free0 - 16

        # parts small beside the free space: those in flight on every lane at once cannot
        # take it all before the first is committed
        cmd = ("archive", str(src), "--to", v.mountpoint, "--part-size", "4M")
        r = vacate(*cmd)
        err = r.stderr.decode()
        assert r.returncode == 2 and "No space left" in err and "resumes" in err, err
        adir = os.path.join(v.mountpoint, "src")
        left = [os.path.join(d, n) for d, _, ns in os.walk(adir) for n in ns]
        assert not [p for p in left if os.path.basename(p).startswith(".tmp-")], left
        parts = sorted(n for n in os.listdir(adir) if n.startswith("part-"))
        assert parts, left

        os.unlink(ballast)
        r = vacate(*cmd, "--json")
        assert r.returncode == 0, r.stderr.decode()
        assert json.loads(r.stdout)["resumed_parts"] == len(parts)
        out = str(tmp_path / "out")
        stock_restore(adir, out)
        assert sha256sum_check(adir, out).returncode == 0
        assert sorted(os.listdir(os.path.join(out, "src"))) == [f"f{i}.bin" for i in range(4)]
    finally:
        v.close()


@pytest.mark.slow
def test_huge_sparse_files_progress_lines_and_sums(tmp_path):
    """Two 1 GiB sparse files: without a terminal a progress line comes every
    --progress-every seconds; the holes are hashed (stock sha256sum -c passes)."""
    src = tmp_path / "src"
    src.mkdir()
    for n in ("a.img", "b.img"):
        with open(src / n, "wb") as f:
            f.truncate(1 << 30)
            f.seek(1 << 29)
            f.write(b"data in the middle")
    r = vacate("archive", str(src), "--to", str(tmp_path / "b"), "--progress-every", "0.1",
               "--no-progress")
    assert r.returncode == 0, r.stderr.decode()
    lines = [x for x in r.stderr.decode().splitlines() if x.startswith("archive: ")]
    assert lines and "of 2.1 GB" in lines[-1], r.stderr.decode()
    adir = str(tmp_path / "b" / "src")
    out = str(tmp_path / "out")
    stock_restore(adir, out)
    assert sha256sum_check(adir, out).returncode == 0
    assert os.stat(os.path.join(out, "src", "a.img")).st_blocks < 1024
