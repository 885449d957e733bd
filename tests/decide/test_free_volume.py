"""``--free-volume`` decided from the observation alone: the dataset's destroy is the plan's
last step, after the unmount, relying on the verify steps before it; the plan is blocked,
each reason named, while a kept item is outside every archive (tar alone), the dataset's
archive is only parsed, a snapshot is held or cloned, or the dataset has children; the
snapshots neither held nor cloned are listed; a volume that is not ZFS is refused."""

from __future__ import annotations

import dataclasses
import os

import pytest
from harness.paths import STORY

from vacate.decide.plan import PlanRefused, make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.model.observation import Observation
from vacate.observing.model.plan import Plan
from vacate.observing.parsers.zfs_list import parse

DS = "scratch/subvol-129-disk-0"
LISTING = os.path.join(os.path.dirname(__file__), "..", "fixtures", "misc",
                       "zfs-list-fuse-0.7.txt")


@pytest.fixture(scope="module")
def story():
    with open(STORY) as f:
        return Observation.loads(f.read())


def _zfs(obs: Observation, listing: str | None = None) -> Observation:
    """The story's volume as the ZFS dataset it is, with the dataset's facts (``listing``:
    ``zfs list`` of its pool; the captured one by default)."""
    if listing is None:
        with open(LISTING) as f:
            listing = f.read()
    t = obs.target
    mount = dataclasses.replace(t.mount, fstype="zfs", source=DS)
    return dataclasses.replace(obs, target=dataclasses.replace(t, mount=mount, zfs_dataset=DS),
                               dataset=parse(listing, DS))


def _ask(**kw) -> PlanRequest:
    return PlanRequest(**{"archive_to": "/backup", "archive_format": "zfs",
                          "verify_pool": "cold", "free_volume": True, **kw})


CLEAN = f"{DS}\tfilesystem\t-\t-\tyes\n{DS}@daily\tsnapshot\t0\t-\t-\n"


def test_the_destroy_is_last_after_the_unmount_and_relies_on_the_verifies(story):
    plan = make_plan(_zfs(story, CLEAN), _ask())
    assert plan.blocked == ()
    last = plan.steps[-1]
    kinds = [s.kind for s in plan.steps]
    assert last.kind == "destroy-dataset" and last.params.dataset == DS
    assert kinds.index("unmount") < len(kinds) - 1
    assert last.params.snapshots == ("daily",)
    assert "zfs receive" in last.params.restore
    verifies = tuple(s.id for s in plan.steps if s.kind in ("verify", "verify-dataset",
                                                             "verify-copy"))
    assert verifies and last.precondition.verified_by == verifies
    back = Plan.loads(plan.dumps())               # the plan file keeps it, checked
    assert back.steps[-1] == last and back.observation.dataset == plan.observation.dataset


def test_held_cloned_snapshots_and_children_block_each_named(story):
    plan = make_plan(_zfs(story), _ask())
    said = " | ".join(plan.blocked)
    assert f"{DS}@held is held (1 zfs hold tag)" in said
    assert f"{DS}@base has clones that depend on it: scratch/clone-of-base" in said
    assert f"{DS} has child datasets ({DS}/child)" in said
    assert plan.steps[-1].params.snapshots == ("daily-1",)    # the rest is listed


def test_an_archive_only_parsed_never_allows_freeing(story):
    plan = make_plan(_zfs(story, CLEAN), _ask(verify_pool=None))
    assert any("weaker check never allows freeing" in b for b in plan.blocked), plan.blocked


def test_with_tar_alone_a_kept_item_blocks_and_snapshots_unread_block(story):
    plan = make_plan(_zfs(story, CLEAN), _ask(archive_format="tar", verify_pool=None,
                                             overrides=(("keep", "eagle3"),)))
    assert any(b.startswith("/data/eagle3 is kept on the volume") for b in plan.blocked)
    unread = dataclasses.replace(_zfs(story, CLEAN), dataset=None)
    plan = make_plan(unread, _ask())
    assert any("snapshots were not looked at" in b for b in plan.blocked)


def test_without_free_volume_no_destroy_and_on_ext4_refused(story):
    plan = make_plan(_zfs(story, CLEAN), _ask(free_volume=False))
    assert "destroy-dataset" not in [s.kind for s in plan.steps]
    assert "free_volume" not in plan.to_json()               # left out at its default
    with pytest.raises(PlanRefused, match="--free-volume: /data is not a ZFS dataset"):
        make_plan(story, PlanRequest(free_volume=True))
