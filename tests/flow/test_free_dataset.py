"""`vacate plan --free-volume` then `vacate apply` on a real ZFS dataset (zfs-fuse,
tests/harness/zfs_pool.py): the dataset destroyed as the plan's last step, once its native
archive was received and compared in the apply, and the stock restore gives the tree back; a
held or cloned snapshot blocks the plan, named, and one held or cloned after planning fails
the destroy's precondition, nothing destroyed; an archive only parsed (no --verify-pool)
never allows freeing; an ext4 volume is refused; kill -9 at the destroy then a rerun ends as
an uninterrupted run."""

from __future__ import annotations

import json
import os
import time

import pytest
from harness.archives import make_awkward_tree, run, snapshot, snapshot_diff
from harness.retire import (
    cli,
    kill_during,
    receive_with_stock_tools,
    restore_with_stock_tools,
)

from vacate.observing.model.journal import path_for, read_records
from vacate.observing.model.plan import Plan

pytestmark = pytest.mark.root


def _volume(pool, name: str = "subvol-300-disk-0") -> tuple[str, str]:
    """A dataset with the awkward tree, an item to delete and a snapshot of its own
    (``@daily``, neither held nor cloned); (dataset, mountpoint)."""
    mnt = pool.create(name)
    make_awkward_tree(mnt, big_mb=1)
    os.makedirs(f"{mnt}/scratch")
    with open(f"{mnt}/scratch/tmp.bin", "wb") as f:
        f.write(os.urandom(4096))
    run("zfs", "snapshot", f"{pool.name}/{name}@daily")
    return f"{pool.name}/{name}", mnt


def _plan(tmp_path, mnt: str, *extra: str, rc: int = 0) -> tuple[str, str, dict]:
    dest = tmp_path / "dest"
    dest.mkdir(exist_ok=True)
    plan = str(tmp_path / "p.plan")
    got, out, err = cli("plan", mnt, "--archive-to", str(dest), "--archive-format", "zfs",
                        "--delete", "scratch", "--free-volume", "-o", plan, "--json", *extra)
    assert got == rc, err
    return plan, str(dest), json.loads(out)


def _apply(plan: str, rc: int = 0) -> dict:
    got, out, err = cli("apply", plan, "--yes", "--json")
    assert got == rc, (out, err)
    return {s["id"].split("-", 1)[1]: s for s in json.loads(out)["done"]["steps"]}


def _exists(name: str) -> bool:
    return run("zfs", "list", "-H", "-o", "name", "-t", "all", name, check=False
               ).returncode == 0


def _snapshots(ds: str) -> list[str]:
    out = run("zfs", "list", "-H", "-o", "name", "-t", "snapshot", "-r", ds.split("/")[0]
              ).stdout.decode().split()
    return sorted(n.split("@")[1] for n in out if n.startswith(ds + "@"))


def _text(path: str) -> str:
    with open(path) as f:
        return f.read()


def _last(plan: str, kind: str) -> dict:
    sid = next(s.id for s in Plan.loads(_text(plan)).steps if s.kind == kind)
    return [r for r in read_records(path_for(plan)) if r.get("step") == sid][-1]


@pytest.mark.slow
def test_the_dataset_freed_after_its_archive_is_received_and_restored_by_stock_tools(
        pool, tmp_path):
    ds, mnt = _volume(pool)
    before = snapshot(mnt)
    plan, dest, doc = _plan(tmp_path, mnt, "--verify-pool", pool.name)
    assert doc["blocked"] == [] and doc["free_volume"] is True
    last = doc["steps"][-1]
    assert last["kind"] == "destroy-dataset" and last["params"]["dataset"] == ds
    assert last["params"]["snapshots"] == ["daily"]            # listed: goes with it
    kinds = [s["kind"] for s in doc["steps"]]
    assert kinds.index("verify-dataset") < kinds.index("unmount") < len(kinds) - 1
    verify = doc["steps"][kinds.index("verify-dataset")]["id"]
    assert verify in last["precondition"]["verified_by"]
    rc, text, _ = cli("plan", "--from", plan)
    assert rc == 0 and f"the dataset {ds} will be destroyed" in text and "@daily" in text
    steps = _apply(plan)
    assert all(s["status"] in ("ok", "skipped") for s in steps.values()), steps
    assert steps["destroy-dataset"]["status"] == "ok"
    assert not _exists(ds)
    rc, text, _ = cli("report", plan)
    assert rc == 0 and "dataset destroyed" in text and ds in text
    again = _apply(plan)                          # applying again is applying once
    assert again["destroy-dataset"]["status"] in ("ok", "skipped")
    assert all(s["status"] in ("ok", "skipped") for s in again.values()), again
    # the stock restore gives the tree as it was, the item deleted since included
    adir = os.path.join(dest, "dataset-" + ds.replace("/", "_"))
    back = receive_with_stock_tools(adir, f"{pool.name}/back")
    assert snapshot_diff(before, snapshot(back)) == []


@pytest.mark.parametrize("how", ["hold", "clone"])
def test_a_held_or_cloned_snapshot_blocks_the_plan_named_nothing_destroyed(
        pool, tmp_path, how):
    ds, mnt = _volume(pool)
    run("zfs", "snapshot", f"{ds}@kept")
    if how == "hold":
        run("zfs", "hold", "backup", f"{ds}@kept")
    else:
        run("zfs", "clone", f"{ds}@kept", f"{pool.name}/clone")
    plan, _dest, doc = _plan(tmp_path, mnt, "--verify-pool", pool.name, rc=4)
    said = " ".join(doc["blocked"])
    assert f"{ds}@kept" in said and ("is held" if how == "hold" else "clone") in said, said
    assert doc["steps"][-1]["params"]["snapshots"] == ["daily"]     # not the kept one
    rc, _out, err = cli("apply", plan, "--yes")
    assert rc == 2 and "cannot be applied" in err
    assert _exists(ds) and os.path.ismount(mnt)


def test_an_archive_only_parsed_never_allows_freeing(pool, tmp_path):
    ds, mnt = _volume(pool)
    _p, _dest, doc = _plan(tmp_path, mnt, rc=4)
    assert any("--verify-pool" in b and "weaker check" in b for b in doc["blocked"]), doc
    assert _exists(ds)


def test_free_volume_on_an_ext4_volume_is_refused_nothing_written(ext4_volume, tmp_path):
    plan = tmp_path / "p.plan"
    rc, out, err = cli("plan", ext4_volume.mountpoint, "--free-volume", "-o", str(plan))
    assert rc == 2, (out, err)
    assert "--free-volume" in err and "is not a ZFS dataset" in err
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("how", ["hold", "clone"])
def test_a_hold_or_clone_after_planning_fails_the_destroy_nothing_destroyed(
        pool, tmp_path, how):
    ds, mnt = _volume(pool)
    plan, _dest, doc = _plan(tmp_path, mnt, "--verify-pool", pool.name)
    assert doc["blocked"] == []
    if how == "hold":
        run("zfs", "hold", "late", f"{ds}@daily")
    else:
        run("zfs", "clone", f"{ds}@daily", f"{pool.name}/late")
    steps = _apply(plan, rc=1)
    out = steps["destroy-dataset"]
    assert out["status"] == "failed", out
    assert f"{ds}@daily" in out["detail"] and ("held" if how == "hold" else "clones") in \
        out["detail"], out
    assert _exists(ds) and "daily" in _snapshots(ds)
    assert _last(plan, "destroy-dataset")["status"] == "failed"
    # released, but the archived snapshot destroyed by someone else meanwhile: the archive
    # is no longer proved to be of what is there, and nothing is destroyed
    if how == "hold":
        run("zfs", "release", "late", f"{ds}@daily")
    else:
        for _ in range(40):           # zfs-fuse: busy a while after the clone was mounted
            if run("zfs", "destroy", f"{pool.name}/late", check=False).returncode == 0:
                break
            time.sleep(0.25)
    archived = next(s for s in _snapshots(ds) if s.startswith("vacate-archive-"))
    run("zfs", "destroy", f"{ds}@{archived}")
    out = _apply(plan, rc=1)["destroy-dataset"]
    assert out["status"] == "failed" and "is not there now" in out["detail"], out
    assert _exists(ds)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_kill_9_at_the_destroy_then_a_rerun_ends_as_an_uninterrupted_run(
        pool, tmp_path, delay):
    ds, mnt = _volume(pool)
    plan, dest, doc = _plan(tmp_path, mnt, "--verify-pool", pool.name)
    at = len(doc["steps"]) - 1                 # the destroy: the last step
    killed = kill_during(plan, intents_seen=at + 1, delay=delay)
    assert killed or delay                     # at the intent the kill lands
    steps = _apply(plan)
    assert all(s["status"] in ("ok", "skipped") for s in steps.values()), steps
    assert not _exists(ds)
    assert not [d for d in run("zfs", "list", "-H", "-o", "name", "-t", "all", "-r",
                               pool.name).stdout.decode().split() if "vacate-verify" in d]
    assert os.listdir(dest) == ["dataset-" + ds.replace("/", "_")]


@pytest.mark.slow
def test_a_destroy_cut_after_it_took_the_snapshots_is_finished_by_a_rerun(pool, tmp_path):
    """A power cut inside ``zfs destroy -r`` may leave the dataset without its snapshots:
    the rerun's verify still receives the archive, and the destroy, begun before, goes on."""
    ds, mnt = _volume(pool)
    plan, _dest, doc = _plan(tmp_path, mnt, "--verify-pool", pool.name)
    assert kill_during(plan, intents_seen=len(doc["steps"]))    # at the destroy's intent
    assert _exists(ds)
    for snap in _snapshots(ds):                # what a cut destroy -r may have done already
        run("zfs", "destroy", f"{ds}@{snap}")
    steps = _apply(plan)
    assert steps["destroy-dataset"]["status"] == "ok", steps["destroy-dataset"]
    assert steps["verify-dataset"]["status"] == "ok"
    assert not _exists(ds)


def test_the_ansible_plan_module_takes_free_volume(pool, tmp_path):
    """``vacate.volume.plan`` with ``free_volume: true``, and with ``archive_format`` and
    ``verify_pool`` (its action plugin calls flow.playbook.plan with the task's options)."""
    from vacate.flow.playbook import PLAN_OPTIONS, plan
    from vacate.remote import Local

    ds, mnt = _volume(pool)
    assert "free_volume" in PLAN_OPTIONS
    (tmp_path / "dest").mkdir()
    got = plan(Local(), mnt, str(tmp_path / "p.plan"), archive_to=str(tmp_path / "dest"),
               free_volume=True, check_mode=True)
    assert got["steps"][-1]["kind"] == "destroy-dataset" and ds in got["steps"][-1]["summary"]
    assert got["blocked"] == []             # tar alone, nothing kept: the tar archives hold it
    assert not (tmp_path / "p.plan").exists()
    assert {"archive_format", "verify_pool"} <= set(PLAN_OPTIONS)
    native = plan(Local(), mnt, str(tmp_path / "p.plan"), archive_to=str(tmp_path / "dest"),
                  archive_format="zfs", verify_pool=pool.name, free_volume=True,
                  check_mode=True)
    kinds = [s["kind"] for s in native["steps"]]
    assert native["blocked"] == [] and "archive-dataset" in kinds and "verify-dataset" in kinds
    assert kinds[-1] == "destroy-dataset"


@pytest.mark.slow
def test_with_tar_archives_alone_the_dataset_is_freed_once_they_are_read_back(pool, tmp_path):
    ds, mnt = _volume(pool)
    (tmp_path / "dest").mkdir()
    plan = str(tmp_path / "p.plan")
    rc, out, err = cli("plan", mnt, "--archive-to", str(tmp_path / "dest"), "--delete",
                       "scratch", "--free-volume", "-o", plan, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    verifies = [s["id"] for s in doc["steps"] if s["kind"] == "verify"]
    assert verifies and doc["steps"][-1]["precondition"]["verified_by"] == verifies
    steps = _apply(plan)
    assert steps["destroy-dataset"]["status"] == "ok" and not _exists(ds)
    restore_with_stock_tools(str(tmp_path / "dest" / "src"), str(tmp_path))


@pytest.mark.slow
def test_with_both_archives_the_dataset_is_freed_once_each_is_read_back(pool, tmp_path):
    """``--archive-format both``: tar archives of the kept items and the dataset's native
    archive, each read back in the apply (the native one received), before the destroy;
    after it, each restores by stock tools alone."""
    ds, mnt = _volume(pool)
    before = snapshot(mnt)
    plan, dest, doc = _plan(tmp_path, mnt, "--archive-format", "both", "--verify-pool",
                            pool.name)
    assert doc["blocked"] == [] and doc["archive_format"] == "both"
    kinds = [s["kind"] for s in doc["steps"]]
    assert {"archive", "verify", "archive-dataset", "verify-dataset"} <= set(kinds)
    verifies = [s["id"] for s in doc["steps"] if s["kind"] in ("verify", "verify-dataset")]
    assert sorted(doc["steps"][-1]["precondition"]["verified_by"]) == sorted(verifies)
    assert "snapshot" not in kinds          # the native archive's snapshot holds the deletes
    steps = _apply(plan)
    assert all(s["status"] in ("ok", "skipped") for s in steps.values()), steps
    assert steps["destroy-dataset"]["status"] == "ok" and not _exists(ds)
    restore_with_stock_tools(os.path.join(dest, "src"), str(tmp_path))
    adir = os.path.join(dest, "dataset-" + ds.replace("/", "_"))
    back = receive_with_stock_tools(adir, f"{pool.name}/back")
    assert snapshot_diff(before, snapshot(back)) == []
