"""The entries file of an item to delete taken from the scan's own walk
(``observing/entries_fused.py``) against the record made alone (``write_entries_file``, what
the staleness check and apply re-record): the same digest, the same index (paths, entry
counts, line digests), the same line for every directory, with the walk in C and in Python,
in one process and in forked walkers; and, where the walk's record could differ (a mount or
a subvolume inside the item, a directory the walk could not read), none: the plan records
the item alone, and the plan is as before."""

import json
import os
import shutil
import subprocess
import tempfile
import traceback
import zlib
from dataclasses import replace

import pytest
from harness.delete_trees import (
    ODD,
    big_item,
    make_item,
    put,
    put_deep,
)

from vacate.observing import entries
from vacate.observing.collectors import contents, walk_descent
from vacate.observing.collectors.walk import walk
from vacate.observing.entries import EntriesFile, record_item, write_entries_file
from vacate.observing.entries_fused import WalkRecords

pytestmark = pytest.mark.root

LOOPS = [pytest.param(True, id="C"), pytest.param(False, id="python")]


def odd_tree(v, rel="item"):
    """What a record must get right: odd names (not UTF-8, a newline, quotes), hardlinks,
    symlinks, a fifo, empty directories, a wide directory, paths past PATH_MAX, and enough
    directories for walkers to share."""
    base = make_item(v, rel)
    bbase = os.fsencode(base)
    for n in ODD + [b'quo"te', b"ctl-\x01\x7f", b"z" * 255]:
        os.makedirs(bbase + b"/odd/" + n)
        put(os.fsdecode(bbase + b"/odd/" + n + b"/" + n), n)
    os.link(f"{base}/a/one.txt", f"{base}/odd/one-again")
    os.symlink("../a/one.txt", f"{base}/odd/link")
    os.symlink("nowhere", f"{base}/odd/dangling")
    os.mkfifo(f"{base}/odd/fifo")
    os.makedirs(f"{base}/empty/and/deeper")
    for i in range(1500):
        put(f"{base}/wide/f{i:05d}-{'x' * (i % 40)}", b"w" * (i % 7))
    put_deep(base)
    big_item(v, f"{rel}/big", dirs=40, files=50)
    put(os.path.join(v.mountpoint, "beside/other.txt"), b"not in the item")
    return base


def walked(v, items, directory, *, workers, inline):
    """The walk of the volume recording ``items``, as ``scan`` walks it (the mounts below it
    skipped, btrfs subvolumes walked): the walk's result and each item's record (None where
    it was not taken)."""
    os.makedirs(directory, exist_ok=True)
    holds = contents.of_path(v.mountpoint)
    wr = WalkRecords(items, directory=directory, dev=os.stat(v.mountpoint).st_dev)
    try:
        w = walk(v.mountpoint, items=wr, workers=workers, inline_entries=inline,
                 skip=holds.skip, subvolumes=holds.subvolumes)
        return w, {it: wr.recorded(it) for it in items}
    finally:
        wr.close()


def lines(directory, rec):
    """Each recorded directory's index line (its member's place left out) and line."""
    with EntriesFile(os.path.join(directory, rec.file), sha256=rec.sha256,
                     index_at=rec.index_at) as f:
        return {rel: (k, dg, zlib.decompress(os.pread(f.fd, n, at), 31))
                for rel, (at, n, k, dg) in f.index.items()}


def assert_same(walked_dir, a, alone_dir, b):
    assert a is not None and b is not None
    assert a.digest == b.digest
    assert replace(a, file=None, sha256=None, bytes=0, index_at=0) == \
        replace(b, file=None, sha256=None, bytes=0, index_at=0)
    assert lines(walked_dir, a) == lines(alone_dir, b)
    assert os.path.getsize(os.path.join(walked_dir, a.file)) == a.bytes


@pytest.mark.slow
@pytest.mark.parametrize("c", LOOPS)
@pytest.mark.parametrize(("workers", "inline"), [(1, 10**9), (1, 0), (3, 0), (3, 3000)],
                         ids=["breadth-first", "one-process", "forked", "forked-after-3000"])
def test_the_walks_record_is_the_one_made_alone(vol, tmp_path, monkeypatch, c,
                                                workers, inline):
    if c and walk_descent.fastwalk is None:
        pytest.skip("the C loop was not built")
    if not c:
        monkeypatch.setattr(walk_descent, "fastwalk", None)
    base = odd_tree(vol)
    dev = os.stat(vol.mountpoint).st_dev
    os.makedirs(tmp_path / "alone")
    alone = write_entries_file(base, dev=dev, directory=str(tmp_path / "alone"),
                               target_root=vol.mountpoint)
    w, got = walked(vol, [base], str(tmp_path / "walked"), workers=workers, inline=inline)
    assert (w.workers >= 2) == (workers > 1), w.workers      # the forked walkers in use
    assert not w.warnings
    assert_same(str(tmp_path / "walked"), got[base], str(tmp_path / "alone"), alone)
    assert got[base].entries == len(entries.record_entries(base, dev=dev))
    # the file is the one apply reads, and nothing else was left in the directory
    assert sorted(os.listdir(tmp_path / "walked")) == [got[base].file]


def test_items_a_glob_nested_and_beside(vol, tmp_path):
    """Two items and one inside another: the outer one taken from the walk, the inner one
    not (it goes with the outer), and a path that is no directory never taken."""
    a = odd_tree(vol, "a")
    b = make_item(vol, "b")
    put(os.path.join(vol.mountpoint, "c-file"), b"a file item")
    dev = os.stat(vol.mountpoint).st_dev
    items = [a, f"{a}/big", b, os.path.join(vol.mountpoint, "c-file"),
             os.path.join(vol.mountpoint, "missing")]
    _, got = walked(vol, items, str(tmp_path / "walked"), workers=3, inline=0)
    assert got[f"{a}/big"] is None and got[os.path.join(vol.mountpoint, "c-file")] is None
    assert got[os.path.join(vol.mountpoint, "missing")] is None
    for item in (a, b):
        d = tmp_path / f"alone-{os.path.basename(item)}"
        os.makedirs(d)
        assert_same(str(tmp_path / "walked"), got[item], str(d),
                    write_entries_file(item, dev=dev, directory=str(d)))


def test_a_mount_or_a_subvolume_inside_is_recorded_alone(vol, tmp_path):
    """A mount in the item (tmpfs, a bind of the same filesystem) and a btrfs subvolume:
    the recorder writes a ``mountpoint`` or ``subvolume`` row the walk cannot, so the walk
    takes none of those items; the item beside them is taken."""
    m = vol.mountpoint
    make_item(vol, "mounted")
    vol.mount_tmpfs("mounted/a/cache")
    make_item(vol, "bound")
    put(os.path.join(m, "elsewhere/file.txt"), b"bound in")
    vol.bind(os.path.join(m, "elsewhere"), os.path.join(m, "bound/here"))
    plain = make_item(vol, "plain")
    items = [os.path.join(m, "mounted"), os.path.join(m, "bound"), plain]
    if vol.fstype == "btrfs":
        make_item(vol, "sub")
        subprocess.run(["btrfs", "subvolume", "create", os.path.join(m, "sub/sv")],
                       check=True, capture_output=True)
        put(os.path.join(m, "sub/sv/inside.bin"), b"in a subvolume")
        items.append(os.path.join(m, "sub"))
    for workers, inline in ((1, 10**9), (3, 0)):
        _, got = walked(vol, items, str(tmp_path / f"w{workers}"), workers=workers,
                        inline=inline)
        assert {it: rec is not None for it, rec in got.items()} == {
            it: it == plain for it in items}
        assert os.listdir(tmp_path / f"w{workers}") == [got[plain].file]


def test_a_directory_the_walk_cannot_read_is_recorded_alone(vol, tmp_path):
    """As a user who cannot read a directory inside the item, the walk warns and does not
    take the item (nothing is left of its file)."""
    base = odd_tree(vol)
    closed = os.path.join(base, "a", "closed")
    put(os.path.join(closed, "inner/x"), b"x")
    out = tempfile.mkdtemp(prefix="vacate-test-nobody-")     # (tmp_path: root's alone)
    subprocess.run(["chown", "-R", "65534:65534", vol.mountpoint, out], check=True)
    os.chmod(os.path.dirname(vol.mountpoint), 0o755)      # (the harness's mkdtemp)
    os.chmod(closed, 0)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:        # the child: nobody, walking with forked walkers
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            walk_, got = walked(vol, [base], out, workers=3, inline=0)
            os.write(w, json.dumps({"recorded": got[base] is not None,
                                    "workers": walk_.workers, "files": os.listdir(out),
                                    "warnings": [p.code for p in walk_.warnings]}).encode())
        except BaseException:  # noqa: BLE001 (told to the test, in the parent)
            os.write(w, json.dumps({"error": traceback.format_exc()}).encode())
        finally:
            os._exit(0)
    os.close(w)
    try:
        with os.fdopen(r) as f:
            got = json.loads(f.read() or "{}")
        os.waitpid(pid, 0)
    finally:
        os.chmod(closed, 0o755)
        shutil.rmtree(out)
    assert "error" not in got, got.get("error")
    assert "unreadable-dir" in got["warnings"] and got["workers"] >= 2
    assert got == {**got, "recorded": False, "files": []}
    # as root it is read: the walk's record is taken, and is the one made alone
    _, again = walked(vol, [base], str(tmp_path / "root"), workers=3, inline=0)
    os.makedirs(tmp_path / "alone")
    assert_same(str(tmp_path / "root"), again[base], str(tmp_path / "alone"),
                write_entries_file(base, dev=os.stat(vol.mountpoint).st_dev,
                                   directory=str(tmp_path / "alone")))


@pytest.mark.slow
def test_plan_takes_the_walks_record_and_falls_back_where_it_must(vol, tmp_path,
                                                                   monkeypatch):
    """``vacate plan --delete``: the item recorded by the observation's walk (no second
    record), its digest the one apply's staleness check computes; an item with a mount
    inside recorded alone, its mountpoint row there. The plan's delete then runs."""
    from harness.retire import cli

    from vacate.act import delete_step
    from vacate.act.base import Context
    from vacate.flow import apply

    m = vol.mountpoint
    odd_tree(vol)
    make_item(vol, "mounted")
    vol.mount_tmpfs("mounted/a/cache")
    put(os.path.join(m, "mounted/a/cache/on-tmpfs"), b"not the item's")
    alone = []
    record = entries.write_entries_file

    def counted(path, **kw):
        alone.append(path)
        return record(path, **kw)

    monkeypatch.setattr(entries, "write_entries_file", counted)
    plan_file = str(tmp_path / "retire.plan")
    rc, out, err = cli("plan", m, "--delete", "item", "--delete", "mounted", "--keep",
                       "beside", "-o", plan_file, "--json")
    assert rc == 0, (err, json.loads(out).get("blocked"))
    assert alone == [os.path.join(m, "mounted")]
    doc = json.loads(out)
    dev = os.stat(m).st_dev
    for name in ("item", "mounted"):
        (it,) = [i for i in doc["items"] if i["path"] == os.path.join(m, name)]
        ref = it["entries"]
        assert ref["digest"] == it["identity"]["digest"] == \
            record_item(os.path.join(m, name), dev=dev).digest
        assert (tmp_path / ref["file"]).stat().st_size == ref["bytes"]
    assert sorted(f for f in os.listdir(tmp_path) if f.startswith("vacate-entries")) == \
        sorted(i["entries"]["file"] for i in doc["items"] if i.get("entries"))
    plan, _ = apply.load(plan_file)
    step = next(s for s in plan.steps if s.kind == "delete" and
                s.params.item == os.path.join(m, "item"))
    done = delete_step.run(step, Context(plan=plan, plan_path=plan_file))
    assert done.status == "ok", done.detail
    assert not os.path.lexists(os.path.join(m, "item"))


def test_records_finished_and_not_taken_are_removed(vol, tmp_path):
    """``scan`` finishes the records while the recognisers look; a plan that then takes one
    of them (and fails, or does not delete the other) leaves only the file it took."""
    a, b = make_item(vol, "a"), make_item(vol, "b")
    out = str(tmp_path / "walked")
    os.makedirs(out)
    wr = WalkRecords([a, b], directory=out, dev=os.stat(vol.mountpoint).st_dev)
    try:
        walk(vol.mountpoint, items=wr, workers=3, inline_entries=0)
        wr.finish()
        assert len(os.listdir(out)) == 2
        taken = wr.recorded(a)
    finally:
        wr.close()
    assert os.listdir(out) == [taken.file]


def test_a_record_the_walk_cannot_write_is_made_alone(vol, tmp_path):
    """The entries files' directory full while the walk writes: the walk goes on, the item
    is not taken from it (recorded alone, the plan would say why), nothing is left."""
    base = odd_tree(vol)
    small = str(tmp_path / "small")
    os.makedirs(small)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", small], check=True)
    try:
        w, got = walked(vol, [base], small, workers=3, inline=0)
        assert got[base] is None and os.listdir(small) == []
        assert w.entries > 3000 and not w.warnings
    finally:
        subprocess.run(["umount", small], check=True)
