"""Safe delete on real loop-mounted ext4 and btrfs volumes: only what was recorded goes;
what was written or changed since, what a nested mount holds or hid, and what a symlink
points to stay."""

import json
import os
import resource
import signal
import subprocess
import sys
import time

import pytest
from harness.delete_trees import (
    ODD,
    big_item,
    delete,
    make_item,
    put,
    put_deep,
    record,
    tree,
)

from vacate.act.delete import (
    DeleteResult,
    EntriesFile,
    EntryList,
    Refused,
    delete_item,
    record_entries,
)
from vacate.observing.entries import write_entries_file
from vacate.output import jsonfmt

pytestmark = pytest.mark.root


@pytest.fixture(autouse=True)
def record_way(request, monkeypatch, tmp_path):
    """The record a test deletes from: in memory, or (where a test is marked
    :data:`from_memory_and_entries_file`) also the entries file a plan writes beside itself,
    each directory's rows read from it and checked against its index as that directory is
    emptied. Through the file, each ``record(vol, rel)`` also writes the entries file at that
    moment, before the test changes anything, and ``delete`` deletes from that file."""
    if getattr(request, "param", "memory") == "memory":
        yield
        return
    here = sys.modules[__name__]
    written, used = {}, []
    real_record = here.record

    def record_to_file(v, rel):
        item, rec = real_record(v, rel)
        w = write_entries_file(item, dev=os.stat(v.mountpoint).st_dev, directory=str(tmp_path))
        assert w.digest == rec.digest() and w.entries == len(rec)
        written[(rec.item, rec.digest())] = w
        return item, rec

    def delete_from_file(v, item, rec, **kw):
        w = written[(rec.item, rec.digest())]
        with EntriesFile(os.path.join(str(tmp_path), w.file), sha256=w.sha256,
                         index_at=w.index_at) as f:
            used.append(w.file)
            return delete_item(item, f, target_root=v.mountpoint,
                               dev=os.stat(v.mountpoint).st_dev, **kw)

    monkeypatch.setattr(here, "record", record_to_file)
    monkeypatch.setattr(here, "delete", delete_from_file)
    yield
    assert used or not written, "the test deleted without its entries file"


# the delete-safety tests that run twice: from the record in memory and from the entries file
from_memory_and_entries_file = pytest.mark.parametrize(
    "record_way", ["memory", "entries-file"], indirect=True)

@from_memory_and_entries_file
def test_a_recorded_tree_is_deleted_and_nothing_else(vol):
    make_item(vol)
    put(os.path.join(vol.mountpoint, "neighbour/keep.txt"))
    item, rec = record(vol, "item")
    assert len(rec) == 11           # the item, 4 directories, 6 files, links and a fifo
    seen = []
    r = delete(vol, item, rec, progress=lambda n, b: seen.append((n, b)))
    assert r.outcome == "ok" and r.gone and not r.kept and not r.errors
    assert r.entries == 11
    assert r.bytes == 5000 + 3 + len("a/one.txt")   # one.txt counted once (two names)
    assert seen[-1] == (11, r.bytes)
    assert not os.path.lexists(item)
    assert tree(vol.mountpoint) == sorted([b"lost+found", b"neighbour", b"neighbour/keep.txt"]
                                          if vol.fstype == "ext4" else
                                          [b"neighbour", b"neighbour/keep.txt"])
    again = delete(vol, item, rec)           # already gone: success
    assert again.outcome == "ok" and again.gone and again.entries == 0


@from_memory_and_entries_file
def test_a_file_written_after_recording_is_kept_and_named(vol):
    base = make_item(vol)
    item, rec = record(vol, "item")
    put(f"{base}/a/b/late.txt", b"written after the plan")
    r = delete(vol, item, rec)
    assert r.outcome == "failed" and not r.gone
    assert [(k.path, k.reason) for k in r.kept] == [(f"{base}/a/b/late.txt", "new")]
    assert DeleteResult.from_json(json.loads(json.dumps(r.to_json()))) == r
    # the file and the directories that hold it stay; everything recorded is gone
    assert tree(base) == [b"a", b"a/b", b"a/b/late.txt"]
    with open(f"{base}/a/b/late.txt", "rb") as f:
        assert f.read() == b"written after the plan"


@from_memory_and_entries_file
def test_a_file_changed_after_recording_is_kept(vol):
    base = make_item(vol)
    put(f"{base}/same-size.txt", b"aaaa")
    item, rec = record(vol, "item")
    with open(f"{base}/a/one.txt", "ab") as f:        # grows (and its second name with it)
        f.write(b" more")
    with open(f"{base}/same-size.txt", "r+b") as f:   # the same size, a new mtime
        f.write(b"bbbb")
    r = delete(vol, item, rec)
    kept = {os.path.relpath(k.path, base): (k.reason, k.detail) for k in r.kept}
    assert set(kept) == {"a/one.txt", "a/b/hardlink", "same-size.txt"}
    assert all(reason == "changed" for reason, _ in kept.values())
    assert "3 bytes in the plan, 8 now" in kept["a/one.txt"][1]
    assert "mtime" in kept["same-size.txt"][1]
    assert sorted(tree(base)) == [b"a", b"a/b", b"a/b/hardlink", b"a/one.txt",
                                  b"same-size.txt"]
    with open(f"{base}/same-size.txt", "rb") as f:
        assert f.read() == b"bbbb"


@from_memory_and_entries_file
def test_a_file_replaced_by_another_is_kept(vol):
    base = make_item(vol)
    item, rec = record(vol, "item")
    os.unlink(f"{base}/empty-file")
    put(f"{base}/empty-file", b"")                    # a new inode under the old name
    r = delete(vol, item, rec)
    assert [(os.path.relpath(k.path, base), k.reason) for k in r.kept] == [
        ("empty-file", "changed")]
    assert tree(base) == [b"empty-file"]


@from_memory_and_entries_file
def test_symlinks_are_removed_as_themselves_never_followed(vol, tmp_path):
    sentinel = tmp_path / "sentinel"
    (sentinel / "sub").mkdir(parents=True)
    (sentinel / "precious.txt").write_text("do not touch")
    (sentinel / "sub/also.txt").write_text("nor this")
    base = os.path.join(vol.mountpoint, "item")
    os.makedirs(f"{base}/d")
    os.symlink(str(sentinel), f"{base}/to-dir")
    os.symlink(str(sentinel / "precious.txt"), f"{base}/d/to-file")
    os.symlink("/", f"{base}/d/to-root")
    item, rec = record(vol, "item")
    r = delete(vol, item, rec)
    assert r.outcome == "ok" and r.gone and r.entries == 5
    assert sorted(p.name for p in sentinel.rglob("*")) == ["also.txt", "precious.txt", "sub"]
    assert (sentinel / "precious.txt").read_text() == "do not touch"


@from_memory_and_entries_file
def test_nothing_on_a_nested_mount_is_touched(vol):
    base = make_item(vol)
    nested = vol.mount_tmpfs("item/a/cache")
    put(f"{nested}/on-tmpfs.txt", b"not the item's")
    item, rec = record(vol, "item")
    assert ("a/cache", "mountpoint") in {(e.path, e.kind) for e in rec.entries()}
    assert not any(e.path.startswith("a/cache/") for e in rec.entries())
    r = delete(vol, item, rec)
    assert [(os.path.relpath(k.path, base), k.reason) for k in r.kept] == [
        ("a/cache", "mount-point")]
    assert os.path.ismount(nested)
    assert os.listdir(nested) == ["on-tmpfs.txt"]
    assert tree(base) == [b"a", b"a/cache", b"a/cache/on-tmpfs.txt"]


@from_memory_and_entries_file
def test_a_bind_of_the_same_filesystem_is_not_entered(vol):
    base = make_item(vol)
    put(os.path.join(vol.mountpoint, "elsewhere/file.txt"), b"bound in")
    vol.bind(os.path.join(vol.mountpoint, "elsewhere"), f"{base}/bound")
    assert os.stat(f"{base}/bound").st_dev == os.stat(base).st_dev
    item, rec = record(vol, "item")
    r = delete(vol, item, rec)
    assert [(os.path.relpath(k.path, base), k.reason) for k in r.kept] == [
        ("bound", "mount-point")]
    assert os.listdir(os.path.join(vol.mountpoint, "elsewhere")) == ["file.txt"]


@from_memory_and_entries_file
def test_what_a_nested_mount_hid_is_kept_when_it_goes_away(vol):
    base = make_item(vol)
    put(f"{base}/hid/under.txt", b"hidden by the mount")    # under the mount point
    os.makedirs(f"{base}/empty-mp")
    hid = vol.mount_tmpfs("item/hid")
    empty_mp = vol.mount_tmpfs("item/empty-mp")
    item, rec = record(vol, "item")
    for mp in (hid, empty_mp):            # the teardown unmounts nested mounts before deleting
        subprocess.run(["umount", mp], check=True)
        vol.extra_mounts.remove(mp)
    r = delete(vol, item, rec)
    assert [(os.path.relpath(k.path, base), k.reason) for k in r.kept] == [
        ("hid/under.txt", "hidden")]
    assert tree(base) == [b"hid", b"hid/under.txt"]     # the empty mount point went


@from_memory_and_entries_file
def test_a_btrfs_subvolume_in_an_item_is_deleted_a_read_only_snapshot_is_manual(vol):
    if vol.fstype != "btrfs":
        pytest.skip("btrfs subvolumes")
    base = make_item(vol)
    sv = f"{base}/a/subvol"
    subprocess.run(["btrfs", "subvolume", "create", sv], check=True, capture_output=True)
    put(f"{sv}/inside/weights.bin", os.urandom(4096))
    subprocess.run(["btrfs", "subvolume", "create", f"{sv}/nested"], check=True,
                   capture_output=True)
    put(f"{sv}/nested/n.txt")
    item, rec = record(vol, "item")
    kinds = {e.path: e.kind for e in rec.entries()}
    assert kinds["a/subvol"] == kinds["a/subvol/nested"] == "subvolume"
    assert kinds["a/subvol/inside/weights.bin"] == "file"
    r = delete(vol, item, rec)
    assert r.outcome == "ok" and r.gone
    assert sorted(r.subvolumes) == [sv, f"{sv}/nested"]
    listed = subprocess.run(["btrfs", "subvolume", "list", vol.mountpoint],
                            capture_output=True, text=True, check=True).stdout
    assert "subvol" not in listed

    base = make_item(vol, "item2")
    subprocess.run(["btrfs", "subvolume", "create", f"{base}/sv"], check=True,
                   capture_output=True)
    put(f"{base}/sv/data.txt", b"snapshotted")
    subprocess.run(["btrfs", "subvolume", "snapshot", "-r", f"{base}/sv", f"{base}/ro"],
                   check=True, capture_output=True)
    item, rec = record(vol, "item2")
    r = delete(vol, item, rec)
    assert r.outcome == "manual" and not r.kept and not r.errors
    assert [(m.path, m.argv) for m in r.manual] == [
        (f"{base}/ro", ("btrfs", "subvolume", "delete", f"{base}/ro"))]
    assert tree(base) == [b"ro", b"ro/data.txt"]




@from_memory_and_entries_file
def test_odd_names_survive_a_json_round_trip_and_are_deleted(vol):
    base = os.fsencode(os.path.join(vol.mountpoint, "item"))
    for n in ODD:
        os.makedirs(base + b"/" + n)
        with open(base + b"/" + n + b"/" + n, "wb") as f:
            f.write(n)
    item, rec = record(vol, "item")
    text = jsonfmt.dumps({"entries": rec})
    text.encode("ascii")                      # plain ASCII on disk
    back = EntryList.from_json(json.loads(text)["entries"])
    assert back == rec and back.digest() == rec.digest()
    names = {os.fsencode(e.path) for e in back.entries()}
    assert {n + b"/" + n for n in ODD} <= names
    put(os.fsdecode(base + b"/" + ODD[1] + b"/late\xff"))     # an odd new name is kept too
    r = delete(vol, item, back)
    assert [os.fsencode(k.path) for k in r.kept] == [base + b"/" + ODD[1] + b"/late\xff"]
    assert tree(base) == [ODD[1], ODD[1] + b"/late\xff"]


@from_memory_and_entries_file
def test_paths_longer_than_path_max(vol):
    base = os.path.join(vol.mountpoint, "item")
    os.makedirs(base)
    depth = 60                                         # 60 * 101 bytes of path
    put_deep(base, depth)
    item, rec = record(vol, "item")
    longest = max(len(os.path.join(item, e.path)) for e in rec.entries())
    assert longest > 6000 and len(rec) == depth + 2
    r = delete(vol, item, rec)
    assert r.outcome == "ok" and r.gone and r.entries == depth + 2


def test_refusals_touch_nothing(vol, tmp_path):
    base = make_item(vol)
    _, rec = record(vol, "item")
    dev = os.stat(vol.mountpoint).st_dev
    os.symlink(base, os.path.join(vol.mountpoint, "via-link"))
    nested = vol.mount_tmpfs("other")
    put(f"{nested}/x.txt")
    before = tree(vol.mountpoint)
    for path, root in (("/", vol.mountpoint), (vol.mountpoint, vol.mountpoint),
                       (str(tmp_path), vol.mountpoint), (base, "/"),
                       (base + "/../item", vol.mountpoint), ("relative", vol.mountpoint),
                       (os.path.join(vol.mountpoint, "via-link/a"), vol.mountpoint),
                       (f"{nested}/x.txt", vol.mountpoint)):
        # a record of that very path, so that the path is what is refused
        fake = EntryList(os.path.normpath(path), dev, rec.root, ())
        with pytest.raises(Refused):
            delete_item(path, fake, target_root=root, dev=dev)
    with pytest.raises(Refused):           # an entry list of another item
        delete_item(os.path.join(base, "a"), rec, target_root=vol.mountpoint, dev=dev)
    with pytest.raises(Refused):           # not the planned filesystem
        delete_item(base, EntryList(base, 1, rec.root, rec.dirs), target_root=vol.mountpoint,
                    dev=1)
    with pytest.raises(Refused):
        record_entries("/", dev=dev)
    with pytest.raises(Refused):           # an item on another filesystem than dev
        record_entries(f"{nested}/x.txt", dev=dev)
    with pytest.raises(Refused):           # reached through a symlink
        record_entries(os.path.join(vol.mountpoint, "via-link/a"), dev=dev)
    assert tree(vol.mountpoint) == before


@from_memory_and_entries_file
def test_wide_directories_with_few_fds(vol):
    base = os.path.join(vol.mountpoint, "item")
    for i in range(300):
        put(f"{base}/d{i}/sub/f")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))     # one fd per level suffices
    try:
        item, rec = record(vol, "item")
        r = delete(vol, item, rec)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(rec) == 901 and r.outcome == "ok" and r.gone


def test_an_edited_entry_list_is_refused():
    doc = {"schema": "vacate.entries/1", "item": "/t/i", "dev": 5,
           "root": ["", "file", 5, 12, 3, 1, 1, 1], "dirs": [], "problems": []}
    rec = EntryList.from_json(doc)
    doc["digest"] = rec.digest()
    assert EntryList.from_json(doc) == rec
    doc["root"][4] = 4
    with pytest.raises(ValueError, match="digest"):
        EntryList.from_json(doc)


@from_memory_and_entries_file
def test_an_item_that_is_a_file_or_a_symlink(vol):
    put(os.path.join(vol.mountpoint, "model.bin"), b"weights")
    os.symlink("/etc/passwd", os.path.join(vol.mountpoint, "link"))
    for name in ("model.bin", "link"):
        item, rec = record(vol, name)
        assert rec.dirs == () and rec.root[1] in ("file", "symlink")
        r = delete(vol, item, rec)
        assert r.outcome == "ok" and r.gone and r.entries == 1
        assert not os.path.lexists(item)
    assert os.path.exists("/etc/passwd")




@pytest.mark.slow
@from_memory_and_entries_file
def test_the_workers_delete_what_one_process_would(vol):
    base = big_item(vol)                       # 12,000 files: split over the workers
    put(f"{base}/top1/mid4/leaf/late.txt")
    put(f"{base}/top2/late-top.txt")
    item, rec = record(vol, "big")
    os.unlink(f"{base}/top1/mid4/leaf/late.txt")     # recorded, gone before the delete
    put(f"{base}/top1/mid7/leaf/new.txt")             # new below a worker's part
    put(f"{base}/new-at-top.txt")                     # new in the first levels
    r = delete(vol, item, rec, workers=3)
    assert r.workers == 3
    assert sorted(os.path.relpath(k.path, base) for k in r.kept) == [
        "new-at-top.txt", "top1/mid7/leaf/new.txt"]
    assert r.entries == len(rec) - 1 - 4 and not r.errors
    assert tree(base) == [b"new-at-top.txt", b"top1", b"top1/mid7", b"top1/mid7/leaf",
                          b"top1/mid7/leaf/new.txt"]


KILLER = """
import json, sys
from vacate.act.delete import EntryList, delete_item
rec = EntryList.from_json(json.load(open(sys.argv[1])))
r = delete_item(rec.item, rec, target_root=sys.argv[2], dev=rec.dev, workers=2,
                progress=lambda n, b: print(n, flush=True))
print("done", r.outcome, flush=True)
"""


def processes_naming(text):
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    out.append(int(pid))
        except OSError:
            pass
    return out


@pytest.mark.slow
def test_killed_midway_a_rerun_finishes(vol, tmp_path):
    base = big_item(vol, dirs=200)                    # 40,000 files
    os.link(f"{base}/top0/mid0/leaf/f1", f"{base}/top2/mid2/leaf/second-name")
    item, rec = record(vol, "big")
    saved = tmp_path / "rec.json"
    saved.write_text(jsonfmt.dumps(rec.to_json()))
    total = len(rec)
    p = subprocess.Popen([sys.executable, "-c", KILLER, str(saved), vol.mountpoint],
                         stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    for line in p.stdout:
        assert not line.startswith("done"), "finished before it was killed"
        if int(line) >= total * 0.1:
            break
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    for _ in range(50):                    # its workers die with it
        if not processes_naming(str(saved)):
            break
        time.sleep(0.1)
    assert processes_naming(str(saved)) == []
    left = len(tree(base))
    assert 0 < left < total - 4000, "killed before or after it deleted much"
    r = delete(vol, item, rec)
    assert r.outcome == "ok" and r.gone, r.kept[:3]
    assert not os.path.lexists(base)
