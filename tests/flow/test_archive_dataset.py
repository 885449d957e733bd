"""`vacate plan --archive-format zfs` then `vacate apply` on a real ZFS dataset (zfs-fuse,
tests/harness/zfs_pool.py): the dataset's native archive written after the holders and
before the deletes, its sums and the stock restore give the tree back, the verify named
received or parsed (the weaker check); kill -9 at each new step then a rerun ends as an
uninterrupted run; an ext4 volume is refused, nothing written."""

from __future__ import annotations

import glob
import json
import os

import pytest
from harness.archives import make_awkward_tree, run, snapshot, snapshot_diff
from harness.retire import cli, kill_during, receive_with_stock_tools

from vacate.observing.model.journal import path_for, read_records
from vacate.observing.model.plan import Plan

pytestmark = pytest.mark.root


def _volume(pool, name: str = "subvol-200-disk-0") -> tuple[str, str]:
    """A dataset with the awkward tree and an item to delete; (dataset, mountpoint)."""
    mnt = pool.create(name)
    make_awkward_tree(mnt, big_mb=1)
    os.makedirs(f"{mnt}/scratch")
    with open(f"{mnt}/scratch/tmp.bin", "wb") as f:
        f.write(os.urandom(4096))
    return f"{pool.name}/{name}", mnt


def _plan(tmp_path, mnt: str, *extra: str) -> tuple[str, str, dict]:
    dest = tmp_path / "dest"
    dest.mkdir(exist_ok=True)
    plan = str(tmp_path / "p.plan")
    rc, out, err = cli("plan", mnt, "--archive-to", str(dest), "--archive-format", "zfs",
                       "--delete", "scratch", "-o", plan, "--json", *extra)
    assert rc == 0, err
    return plan, str(dest), json.loads(out)


def _apply(plan: str) -> dict:
    rc, out, err = cli("apply", plan, "--yes", "--json")
    assert rc == 0, err
    return {s["id"].split("-", 1)[1]: s["status"] for s in json.loads(out)["done"]["steps"]}


def _text(path: str) -> str:
    with open(path) as f:
        return f.read()


def _outcome(plan: str, kind: str) -> dict:
    doc = Plan.loads(_text(plan))
    sid = next(s.id for s in doc.steps if s.kind == kind)
    return [r for r in read_records(path_for(plan))
            if r.get("step") == sid and r["event"] == "outcome"][-1]


def _datasets(pool) -> list[str]:
    return run("zfs", "list", "-H", "-o", "name", "-t", "all", "-r", pool.name
               ).stdout.decode().split()


def _guid(name: str) -> int:
    return int(run("zfs", "get", "-Hp", "-o", "value", "guid", name).stdout)


@pytest.mark.slow
def test_the_dataset_archived_received_and_restored_by_stock_tools(pool, tmp_path):
    ds, mnt = _volume(pool)
    before = snapshot(mnt)
    plan, dest, doc = _plan(tmp_path, mnt, "--verify-pool", pool.name)
    kinds = [s["kind"] for s in doc["steps"]]
    assert kinds.index("archive-dataset") + 1 == kinds.index("verify-dataset") < \
        kinds.index("delete")
    assert "archive" not in kinds and "verify" not in kinds      # zfs alone: no tar archive
    assert doc["archive_format"] == "zfs" and doc["verify_pool"] == pool.name
    assert "any ZFS" in doc["restore_means"]["zfs"]
    snap = doc["steps"][kinds.index("archive-dataset")]["params"]["snapshot"]
    _apply(plan)
    adir = os.path.join(dest, "dataset-" + ds.replace("/", "_"))
    m = json.loads(_text(os.path.join(adir, "ZFS-MANIFEST.json")))
    assert m["dataset"] == ds and m["snapshot"] == snap and m["guid"] == _guid(f"{ds}@{snap}")
    assert run("sha256sum", "-c", "SHA256SUMS", cwd=adir).returncode == 0
    out = _outcome(plan, "verify-dataset")
    assert out["status"] == "ok" and out["data"]["strength"] == "received", out
    assert out["data"]["guid"] == m["guid"] and out["data"]["allows_freeing"] is True
    assert not any("vacate-verify-" in d for d in _datasets(pool))
    parts = {n: os.stat(os.path.join(adir, n)).st_mtime_ns for n in os.listdir(adir)}
    again = _apply(plan)                          # applying again is applying once
    assert again["archive-dataset"] in ("ok", "skipped") and again["verify-dataset"] == "ok"
    assert {n: os.stat(os.path.join(adir, n)).st_mtime_ns for n in os.listdir(adir)} == parts
    # the stock restore gives the tree as it was, the item deleted since included
    back = receive_with_stock_tools(adir, f"{pool.name}/back")
    assert snapshot_diff(before, snapshot(back)) == []


@pytest.mark.slow
def test_without_a_verify_pool_the_weaker_check_is_named(pool, tmp_path):
    _ds, mnt = _volume(pool)
    plan, _dest, doc = _plan(tmp_path, mnt)
    assert "verify_pool" not in doc
    rc, text, _ = cli("plan", "--from", plan)
    assert rc == 0 and "weaker check" in text and "any ZFS" in text
    _apply(plan)
    out = _outcome(plan, "verify-dataset")
    assert out["status"] == "ok" and out["data"]["strength"] == "parsed", out
    assert "parsed (the weaker check)" in out["detail"]
    assert out["data"]["allows_freeing"] is False



def _end_state(pool, ds: str, plan: str, dest: str) -> dict:
    adir = glob.glob(os.path.join(dest, "*"))
    m = json.loads(_text(os.path.join(adir[0], "ZFS-MANIFEST.json")))
    return {"dirs": [os.path.basename(a) for a in adir],
            "files": sorted(os.listdir(adir[0])),
            "sums": run("sha256sum", "-c", "SHA256SUMS", cwd=adir[0]).returncode,
            "guid_is_the_snapshots": m["guid"] == _guid(f"{ds}@{m['snapshot']}"),
            "snapshots": sorted(d.split("@")[1] for d in _datasets(pool)
                                if d.startswith(ds + "@")),
            "scratch_left": [d for d in _datasets(pool) if "vacate-verify" in d],
            "verify": _outcome(plan, "verify-dataset")["data"]["strength"],
            "mounted": os.path.ismount(os.path.join(pool.mountpoint, ds.split("/", 1)[1]))}


@pytest.mark.slow
@pytest.mark.parametrize("kind,delay", [("archive-dataset", 0.0), ("archive-dataset", 0.05),
                                        ("verify-dataset", 0.0), ("verify-dataset", 0.05)])
def test_kill_9_at_each_new_step_then_a_rerun_ends_as_an_uninterrupted_run(
        pool, tmp_path, kind, delay):
    ref_ds, ref_mnt = _volume(pool, "ref")
    (tmp_path / "ref").mkdir()
    ref_plan, ref_dest, _ = _plan(tmp_path / "ref", ref_mnt, "--verify-pool", pool.name)
    _apply(ref_plan)
    ds, mnt = _volume(pool, "kill")
    (tmp_path / "k").mkdir()
    plan, dest, doc = _plan(tmp_path / "k", mnt, "--verify-pool", pool.name)
    at = next(i for i, s in enumerate(doc["steps"]) if s["kind"] == kind)
    killed = kill_during(plan, intents_seen=at + 1, delay=delay)
    assert killed or delay            # at the intent the kill lands
    _apply(plan)
    want = _end_state(pool, ref_ds, ref_plan, ref_dest)
    got = _end_state(pool, ds, plan, dest)
    # the two volumes' own names differ; all else is the same
    want["dirs"] = [d.replace("_ref", "_VOL") for d in want["dirs"]]
    got["dirs"] = [d.replace("_kill", "_VOL") for d in got["dirs"]]
    want["files"] = [f.replace("_ref", "_VOL") for f in want["files"]]
    got["files"] = [f.replace("_kill", "_VOL") for f in got["files"]]
    assert len(got["snapshots"]) == len(want["snapshots"]) == 1     # the plan's, once
    del want["snapshots"], got["snapshots"]
    assert got == want


def test_zfs_on_an_ext4_volume_is_refused_nothing_written(ext4_volume, tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    plan = tmp_path / "p.plan"
    rc, out, err = cli("plan", ext4_volume.mountpoint, "--archive-format", "zfs",
                       "--archive-to", str(dest), "-o", str(plan))
    assert rc == 2, (out, err)
    assert "is not a ZFS dataset" in err and "--archive-format zfs" in err
    assert not plan.exists() and os.listdir(dest) == []
    assert sorted(os.listdir(tmp_path)) == ["dest"]


@pytest.mark.slow
def test_on_zfs_fuse_a_snapshot_holds_what_was_deleted(pool, tmp_path):
    """zfs-fuse mounts as ``fuse.zfs``: with tar archives, the plan takes a snapshot of the
    dataset before its first delete there too, and the deleted item is still in it."""
    ds, mnt = _volume(pool)
    plan, _dest, doc = _plan(tmp_path, mnt, "--archive-format", "tar")
    kinds = [s["kind"] for s in doc["steps"]]
    assert kinds.index("snapshot") + 1 == kinds.index("delete"), kinds
    assert doc["steps"][kinds.index("snapshot")]["params"]["dataset"] == ds
    rc, out, err = cli("apply", plan, "--yes", "--json")
    assert rc == 0, err
    (snap,) = json.loads(out)["done"]["snapshots"]
    (taken,) = snap["snapshots"]
    assert taken["snapshot"].startswith(f"{ds}@vacate-") and snap["destroy"][:2] == [
        "zfs", "destroy"]
    run("zfs", "clone", taken["snapshot"], f"{pool.name}/look")
    look = run("zfs", "get", "-Hp", "-o", "value", "mountpoint", f"{pool.name}/look"
               ).stdout.decode().strip()
    assert os.path.getsize(os.path.join(look, "scratch", "tmp.bin")) == 4096
