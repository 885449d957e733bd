"""Snapshots before a delete, for real: btrfs on a loop volume, ZFS with zfs-fuse, and the
explicit "unsupported" everywhere else."""

import contextlib
import json
import os
import resource
import subprocess

import pytest

from vacate.act.delete import delete_item, record_entries
from vacate.act.snapshot import SnapshotResult, destroy_command, snapshot
from vacate.observing.collectors.mounts import resolve_target
from vacate.observing.host import Host

pytestmark = pytest.mark.root


@contextlib.contextmanager
def few_fds(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def sh(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def put(path, data=b"x"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture
def btrfs():
    from harness.volumes import can_loop_mount, make_volume
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("btrfs", size_mb=256)
    try:
        yield v
    finally:
        v.close()


def test_btrfs_snapshots_each_subvolume_the_deletes_touch(btrfs):
    m = btrfs.mountpoint
    put(f"{m}/plain-item/a.txt", b"in the top subvolume")
    sh("btrfs", "subvolume", "create", f"{m}/models")
    put(f"{m}/models/item-in-subvol/w.bin", b"in models")
    put(f"{m}/item3/b.txt", b"beside a nested subvolume")
    sh("btrfs", "subvolume", "create", f"{m}/item3/nested")
    put(f"{m}/item3/nested/c.txt", b"in a nested subvolume")
    sh("btrfs", "subvolume", "snapshot", "-r", f"{m}/item3/nested", f"{m}/item3/old-ro")
    put(f"{m}/kept/untouched.txt")
    for i in range(300):                  # wider than the fds it may hold (below)
        os.mkdir(f"{m}/item3/wide-{i}")
    target = resolve_target(m, Host.local())
    items = [f"{m}/plain-item", f"{m}/models/item-in-subvol", f"{m}/item3"]

    with few_fds(100):
        r = snapshot(target, items, "t1")
    assert r.outcome == "ok", r.message
    base = f"{m}/.vacate-snapshots/t1"
    assert [(s.source, s.snapshot, s.created) for s in r.snapshots] == [
        (m, f"{base}/root", True),
        (f"{m}/models", f"{base}/nested/models", True),
        (f"{m}/item3/nested", f"{base}/nested/item3/nested", True)]   # not the read-only one
    for s in r.snapshots:
        assert "readonly" in sh("btrfs", "subvolume", "show", s.snapshot)
    assert read(f"{base}/root/plain-item/a.txt") == b"in the top subvolume"
    assert read(f"{base}/nested/models/item-in-subvol/w.bin") == b"in models"
    assert read(f"{base}/nested/item3/nested/c.txt") == b"in a nested subvolume"

    assert SnapshotResult.from_json(json.loads(json.dumps(r.to_json()))) == r
    again = snapshot(target, items, "t1")            # a rerun: there already, confirmed
    assert again.outcome == "ok"
    assert [(s.snapshot, s.created) for s in again.snapshots] == [
        (s.snapshot, False) for s in r.snapshots]

    # the delete goes ahead; the snapshot still holds what it removed
    for item in items:
        rec = record_entries(item, dev=target.st_dev)
        d = delete_item(item, rec, target_root=m, dev=target.st_dev)
        assert d.outcome in ("ok", "manual"), d
    assert not os.path.exists(f"{m}/plain-item")
    assert read(f"{base}/root/plain-item/a.txt") == b"in the top subvolume"
    assert read(f"{base}/nested/item3/nested/c.txt") == b"in a nested subvolume"

    argv = destroy_command(r)
    assert argv[:3] == ["btrfs", "subvolume", "delete"]
    subprocess.run(argv, check=True, capture_output=True)
    assert not any(os.path.lexists(s.snapshot) for s in r.snapshots)
    assert os.path.exists(f"{m}/kept/untouched.txt")


def test_btrfs_a_name_taken_by_something_else_fails(btrfs):
    m = btrfs.mountpoint
    put(f"{m}/item/a.txt")
    os.makedirs(f"{m}/.vacate-snapshots/t2/root")        # a plain directory, not a snapshot
    r = snapshot(resolve_target(m, Host.local()), [f"{m}/item"], "t2")
    assert r.outcome == "failed" and "not a btrfs subvolume" in r.message
    assert os.listdir(f"{m}/.vacate-snapshots/t2/root") == []   # nothing made inside it


def test_no_snapshot_of_an_item_holding_the_snapshot_directory(btrfs):
    m = btrfs.mountpoint
    put(f"{m}/.vacate-snapshots/old/x")
    r = snapshot(resolve_target(m, Host.local()), [f"{m}/.vacate-snapshots"], "t3")
    assert r.outcome == "failed" and ".vacate-snapshots" in r.message
    assert destroy_command(r) == []


def test_other_filesystems_say_unsupported(ext4_volume):
    put(f"{ext4_volume.mountpoint}/item/a")
    r = snapshot(resolve_target(ext4_volume.mountpoint, Host.local()),
                 [f"{ext4_volume.mountpoint}/item"], "t1")
    assert r.outcome == "unsupported" and "ext4" in r.message
    assert r.snapshots == () and destroy_command(r) == []
    with pytest.raises(ValueError):
        snapshot(resolve_target(ext4_volume.mountpoint, Host.local()), [], "no/slash")


@pytest.mark.slow
def test_zfs_snapshot_of_the_target_dataset(pool):
    mnt = pool.create("subvol-129-disk-0")
    put(f"{mnt}/item/weights.bin", b"on zfs")
    target = resolve_target(mnt, Host.local())
    ds = f"{pool.name}/subvol-129-disk-0"
    r = snapshot(target, [f"{mnt}/item"], "plan1")
    assert r.outcome == "ok", r.message
    assert [(s.source, s.snapshot, s.created) for s in r.snapshots] == [
        (ds, f"{ds}@vacate-plan1", True)]
    listed = sh("zfs", "list", "-H", "-t", "snapshot", "-o", "name").split()
    assert f"{ds}@vacate-plan1" in listed
    again = snapshot(target, [f"{mnt}/item"], "plan1")
    assert again.outcome == "ok" and [s.created for s in again.snapshots] == [False]
    assert destroy_command(r) == ["zfs", "destroy", f"{ds}@vacate-plan1"]
    subprocess.run(destroy_command(r), check=True, capture_output=True)
    assert f"{ds}@vacate-plan1" not in sh("zfs", "list", "-H", "-t", "snapshot", "-o",
                                            "name").split()
