"""The test filesystem with LazyFS's semantics (harness/lazyfs.py), on a real FUSE mount: what a
cut keeps is exactly what was fsync'd, for data, for names and for vacate's own writers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from harness.lazyfs import LazyFS, can_fuse
from harness.paths import SRC

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not can_fuse(), reason="needs root, /dev/fuse and mfusepy")]



def sync(path: str) -> None:
    """fsync a file or a directory by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def put(path: str, data: bytes, *, fsync: bool = False) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture
def seeded(tmp_path):
    """The filesystem over a backing directory that already holds ``old`` (b"old") and
    ``sub/kept`` (b"kept"): durable from the start."""
    (tmp_path / "backing" / "sub").mkdir(parents=True)
    (tmp_path / "backing" / "old").write_bytes(b"old")
    (tmp_path / "backing" / "sub" / "kept").write_bytes(b"kept")
    (tmp_path / "mnt").mkdir()
    with LazyFS(str(tmp_path / "backing"), str(tmp_path / "mnt")) as fs:
        yield fs


def test_a_written_is_gone_and_b_fsynced_survives_in_the_same_mount(lazyfs):
    m = lazyfs.mountpoint
    dev = os.stat(m).st_dev
    put(f"{m}/B", b"bee", fsync=True)
    sync(m)                                   # B's name
    put(f"{m}/A", b"ay")
    assert read(f"{m}/A") == b"ay"            # before the cut, a program sees its writes
    assert [p["path"] for p in lazyfs.pending()] == ["/", "/A"]
    lazyfs.cut()
    assert sorted(os.listdir(m)) == ["B"]
    assert read(f"{m}/B") == b"bee"
    assert not os.path.exists(f"{m}/A")
    assert os.stat(m).st_dev == dev           # the same mount: the volume did not change
    assert lazyfs.pending() == []


def test_data_written_over_a_durable_file_comes_back_unless_fsynced(seeded):
    m = seeded.mountpoint
    put(f"{m}/old", b"new, not synced")
    put(f"{m}/sub/kept", b"new and synced", fsync=True)
    with open(f"{m}/old", "rb", buffering=0) as held:
        assert held.read() == b"new, not synced"
        seeded.cut()
        held.seek(0)
        assert held.read() == b"old"           # through a handle held over the cut too:
    assert read(f"{m}/old") == b"old"          # no page cache serves what was dropped
    assert os.stat(f"{m}/old").st_size == 3
    assert read(f"{m}/sub/kept") == b"new and synced"


def test_only_the_synced_prefix_survives(lazyfs):
    m = lazyfs.mountpoint
    with open(f"{m}/log", "wb") as f:
        f.write(b"first\n")
        f.flush()
        os.fsync(f.fileno())
        sync(m)
        f.write(b"second\n")
        f.flush()
    assert read(f"{m}/log") == b"first\nsecond\n"
    assert lazyfs.pending() == [{"path": "/log", "ino": 2, "pending": ["data"]}]
    lazyfs.cut()
    assert read(f"{m}/log") == b"first\n"


def test_a_rename_without_the_directorys_fsync_is_undone(seeded):
    m = seeded.mountpoint
    os.rename(f"{m}/old", f"{m}/renamed")
    assert os.listdir(m) and os.path.exists(f"{m}/renamed")
    seeded.cut()
    assert sorted(os.listdir(m)) == ["old", "sub"]
    assert read(f"{m}/old") == b"old"
    os.rename(f"{m}/old", f"{m}/renamed")
    sync(m)
    seeded.cut()
    assert sorted(os.listdir(m)) == ["renamed", "sub"]


def test_a_rename_across_directories_is_durable_when_its_destination_is_synced(seeded):
    m = seeded.mountpoint
    os.mkdir(f"{m}/to")
    sync(m)
    os.rename(f"{m}/sub/kept", f"{m}/to/kept")
    sync(f"{m}/sub")                          # the source alone: the file is not lost
    seeded.cut()
    assert os.listdir(f"{m}/sub") == ["kept"] and os.listdir(f"{m}/to") == []
    os.rename(f"{m}/sub/kept", f"{m}/to/kept")
    sync(f"{m}/to")                           # the destination: the old name goes with it
    seeded.cut()
    assert os.listdir(f"{m}/sub") == [] and os.listdir(f"{m}/to") == ["kept"]
    assert read(f"{m}/to/kept") == b"kept"


def test_a_file_fsynced_in_a_directory_never_synced_has_no_name_after_a_cut(lazyfs):
    m = lazyfs.mountpoint
    os.mkdir(f"{m}/d")
    sync(m)                                   # d's own name is durable, its entries are not
    put(f"{m}/d/f", b"data", fsync=True)
    lazyfs.cut()
    assert os.listdir(m) == ["d"]
    assert os.listdir(f"{m}/d") == []
    os.makedirs(f"{m}/e/f")                   # nothing synced: all of it goes
    put(f"{m}/e/f/g", b"data", fsync=True)
    sync(f"{m}/e/f")
    lazyfs.cut()
    assert os.listdir(m) == ["d"]


def test_an_unlink_not_synced_is_undone(seeded):
    m = seeded.mountpoint
    os.unlink(f"{m}/old")
    os.unlink(f"{m}/sub/kept")
    sync(f"{m}/sub")                          # this one is synced: it stays unlinked
    seeded.cut()
    assert read(f"{m}/old") == b"old"
    assert os.listdir(f"{m}/sub") == []


def test_links_symlinks_modes_and_times_follow_the_same_rules(seeded):
    m = seeded.mountpoint
    os.link(f"{m}/old", f"{m}/hard")
    os.symlink("old", f"{m}/soft")
    os.chmod(f"{m}/old", 0o600)
    os.utime(f"{m}/old", ns=(1_000_000_000, 2_000_000_000))
    st = os.stat(f"{m}/hard")
    assert st.st_nlink == 2 and st.st_ino == os.stat(f"{m}/old").st_ino
    sync(m)
    seeded.cut()                              # the names are durable, old's attributes not
    assert os.readlink(f"{m}/soft") == "old"
    assert os.stat(f"{m}/hard").st_nlink == 2
    assert os.stat(f"{m}/old").st_mode & 0o777 == 0o644
    os.chmod(f"{m}/old", 0o600)
    os.utime(f"{m}/old", ns=(1_000_000_000, 2_000_000_000))
    sync(f"{m}/old")
    seeded.cut()
    st = os.stat(f"{m}/hard")
    assert (st.st_mode & 0o777, st.st_mtime_ns) == (0o600, 2_000_000_000)


def test_the_backing_directory_holds_what_was_durable_after_unmount(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "m").mkdir()
    (tmp_path / "b" / "seed").write_bytes(b"seed")
    with LazyFS(str(tmp_path / "b"), str(tmp_path / "m")) as fs:
        put(f"{fs.mountpoint}/synced", b"s", fsync=True)
        sync(fs.mountpoint)
        put(f"{fs.mountpoint}/seed", b"overwritten, not synced")
        put(f"{fs.mountpoint}/unsynced", b"u")
    assert sorted(os.listdir(tmp_path / "b")) == ["seed", "synced"]
    assert (tmp_path / "b" / "seed").read_bytes() == b"seed"
    assert (tmp_path / "b" / "synced").read_bytes() == b"s"


# -- vacate's own writers and real programs -------------------------------------------------

WRITE_ATOMIC = textwrap.dedent("""
    import os, stat, sys
    from vacate.observing import fsio
    if sys.argv[2] == "no-dir-fsync":
        real = os.fsync
        def fsync(fd):
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                real(fd)
        os.fsync = fsync
    fsio.write_atomic(sys.argv[1], b"the new contents")
""")


def _write_atomic(path: str, how: str) -> None:
    subprocess.run([sys.executable, "-c", WRITE_ATOMIC, path, how], check=True, timeout=60,
                   env={**os.environ, "PYTHONPATH": SRC})


def test_write_atomic_without_its_directory_fsync_fails_a_cut_test(seeded):
    """The cut harness catches the missing step: with the directory fsync taken out of
    ``fsio.write_atomic`` a new file is gone and a replaced one is the old one again."""
    m = seeded.mountpoint
    _write_atomic(f"{m}/real-new", "real")
    _write_atomic(f"{m}/old", "real")
    _write_atomic(f"{m}/broken-new", "no-dir-fsync")
    _write_atomic(f"{m}/sub/kept", "no-dir-fsync")
    for name in ("real-new", "old", "broken-new", "sub/kept"):
        assert read(f"{m}/{name}") == b"the new contents"
    seeded.cut()
    assert read(f"{m}/real-new") == b"the new contents"
    assert read(f"{m}/old") == b"the new contents"
    assert not os.path.exists(f"{m}/broken-new")
    assert read(f"{m}/sub/kept") == b"kept"
    assert not [n for n in os.listdir(m) + os.listdir(f"{m}/sub") if n.startswith(".tmp-")]


def test_a_journal_written_by_vacates_writer_keeps_every_record(lazyfs):
    from vacate.act.journal import Journal
    path = f"{lazyfs.mountpoint}/plan.json.journal"
    with Journal(path, "ab" * 32) as j:
        for i in range(20):
            j.intent(f"step-{i}", "delete")
            j.outcome(f"step-{i}", "ok", detail=f"done {i}")
        assert lazyfs.pending() == []         # each record was synced before write returned
    lazyfs.cut()
    recs = Journal(path, "ab" * 32).records()
    assert [r["event"] for r in recs] == ["begin"] + ["intent", "outcome"] * 20
    assert recs[-1]["detail"] == "done 19"


def test_tar_and_zstd_output_fsynced_survives_and_the_rest_does_not(seeded, tmp_path):
    m = seeded.mountpoint
    src = tmp_path / "tree"
    for i in range(30):
        (src / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (src / f"d{i % 3}" / f"f{i}").write_bytes(os.urandom(1000 * i))

    def archive(name: str) -> None:
        subprocess.run(f"tar -C {src} -cf - . | zstd -q -o {m}/{name}", shell=True, check=True,
                       timeout=60)

    archive("kept.tar.zst")
    archive("named.tar.zst")
    before = subprocess.run(["sha256sum", "kept.tar.zst"], cwd=m, capture_output=True,
                            check=True, timeout=60).stdout
    sync(f"{m}/kept.tar.zst")                 # syncfs (sync -f) is not seen: fsync the file
    sync(m)                                   # and its name (named.tar.zst's name too)
    archive("gone.tar.zst")
    seeded.cut()
    assert sorted(os.listdir(m)) == ["kept.tar.zst", "named.tar.zst", "old", "sub"]
    assert os.path.getsize(f"{m}/named.tar.zst") == 0    # a name durable, its data not
    assert subprocess.run(["sha256sum", "kept.tar.zst"], cwd=m, capture_output=True,
                          check=True, timeout=60).stdout == before
    listing = subprocess.run(f"zstd -dc {m}/kept.tar.zst | tar -tf -", shell=True, check=True,
                             capture_output=True, text=True, timeout=60).stdout.split()
    assert len([n for n in listing if "/f" in n]) == 30


def test_pending_names_what_a_cut_would_drop(seeded):
    m = seeded.mountpoint
    put(f"{m}/old", b"changed")
    os.mkdir(f"{m}/new")
    got = {p["path"]: p["pending"] for p in seeded.pending()}
    assert got == {"/": ["entries"], "/old": ["data"], "/new": ["new"]}
    json.dumps(seeded.pending())
