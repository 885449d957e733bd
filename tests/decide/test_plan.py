"""Deciding a plan from the story's observation alone: the default per item, what the person
asks overriding it (deepest match wins, a literal beats a glob, ties and misses refused), and
the teardown's order."""

import json

import pytest
from harness.paths import STORY

from vacate.decide.plan import PlanRefused, make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.model.codec import Malformed
from vacate.observing.model.conditions import Process
from vacate.observing.model.observation import Observation
from vacate.observing.model.plan import Plan

MODEL = "/data/models/Qwen3.5-397B-A17B-NVFP4"
CUDA = "/data/cuda_13.0.1_580.82.07_linux.run"


@pytest.fixture(scope="module")
def obs():
    with open(STORY) as f:
        return Observation.loads(f.read())


def _actions(plan):
    return {i.path: i.action for i in plan.items}


def test_defaults_keep_artifacts_delete_only_what_a_named_source_gives_back(obs):
    plan = make_plan(obs, PlanRequest(archive_to="/backup"))
    assert _actions(plan) == {"/data/lost+found": "keep", CUDA: "delete",
                              "/data/eagle3": "archive", "/data/models": "archive",
                              "/data/ml-env-backup-cuda128.txt": "archive"}
    by = {i.path: i for i in plan.items}
    assert "developer.download.nvidia.com" in by[CUDA].reason
    assert by[CUDA].get_back.startswith("download again: https://developer.download.nvidia")
    assert by["/data/eagle3"].get_back.startswith("vacate restore /backup/eagle3 --to")
    assert plan.blocked == ()
    assert plan.expected_freed_bytes == by[CUDA].disk_bytes      # ext4: no snapshot holds it


def test_without_a_destination_the_plan_names_what_needs_one(obs):
    plan = make_plan(obs)
    (why,) = plan.blocked
    assert "/data/eagle3" in why and "/data/models" in why and "--archive-to" in why
    assert not any(s.kind == "archive" for s in plan.steps)


def test_the_deepest_match_wins_and_the_rest_of_its_item_keeps_its_action(obs):
    plan = make_plan(obs, PlanRequest(archive_to="/backup",
                                      overrides=[("delete", "models/Qwen3.5-*")]))
    by = {i.path: i for i in plan.items}
    assert by[MODEL].action == "delete" and by[MODEL].reason == "asked: --delete models/Qwen3.5-*"
    # models/ holds nothing else: nothing is left to archive, so no step is spent on it
    assert by["/data/models"].action == "keep" and by["/data/models"].exclude == (MODEL,)
    assert "nothing is left in it to archive" in by["/data/models"].reason
    assert not any(getattr(s.params, "item", None) == "/data/models" for s in plan.steps)
    # a literal beats a glob at the same depth; deeper beats shallower
    plan = make_plan(obs, PlanRequest(archive_to="/backup", overrides=[
        ("delete", "models/*"), ("keep", "models/Qwen3.5-397B-A17B-NVFP4"), ("delete", "eagle3"),
        ("keep", "/data/eagle3/outputs/qwen3.5-397b-a17b-eagle3")]))
    by = {i.path: i for i in plan.items}
    assert by[MODEL].action == "keep"
    assert by["/data/eagle3"].action == "delete"
    assert by["/data/eagle3/outputs/qwen3.5-397b-a17b-eagle3"].action == "keep"
    assert by["/data/eagle3"].exclude == ("/data/eagle3/outputs/qwen3.5-397b-a17b-eagle3",)


@pytest.mark.parametrize("overrides, says", [
    ([("delete", "models/Q*"), ("keep", "models/*NVFP4")], "different actions"),
    ([("delete", "nothing-here")], "matches no item"),
    ([("keep", "/etc/passwd")], "not below the volume"),
    ([("delete", "../etc")], "does not name"),
    ([("delete", "/data")], "not below the volume"),
])
def test_what_cannot_be_planned_is_refused(obs, overrides, says):
    with pytest.raises(PlanRefused, match=says):
        make_plan(obs, PlanRequest(archive_to="/backup", overrides=overrides))


def test_the_teardown_archives_what_nothing_uses_before_the_downtime(obs):
    plan = make_plan(obs, PlanRequest(archive_to="/backup"))
    kinds = [s.kind for s in plan.steps]
    first_down = next(i for i, s in enumerate(plan.steps) if s.downtime)
    early = {s.params.item for s in plan.steps[:first_down] if s.kind == "archive"}
    assert early == {"/data/eagle3", "/data/ml-env-backup-cuda128.txt"}   # nothing runs there
    assert plan.steps[first_down].kind == "end-process"                  # the mmap holder
    late = [s.params.item for s in plan.steps[first_down:] if s.kind == "archive"]
    assert late == ["/data/models"]                                        # after it ended
    assert kinds.index("delete") > max(i for i, k in enumerate(kinds) if k == "verify")
    assert kinds[-3:] == ["unmount", "lock-dir", "check"]
    proc = next(c for c in obs.consumers if c.type == "process")
    end = plan.steps[first_down]
    assert end.precondition == Process(proc.attrs.pid, proc.attrs.start_time)
    assert end.evidence == proc.evidence
    assert plan.steps[-3].precondition.mount_id == obs.target.mount.mount_id


def test_a_plan_round_trips_and_an_edited_action_is_checked(obs):
    plan = make_plan(obs, PlanRequest(archive_to="/backup"))
    doc = json.loads(plan.dumps())
    assert doc["schema"] == "vacate.plan/1"
    assert doc["target"]["mountpoint"] == "/data" and doc["target"]["mount_id"]
    end = next(s for s in doc["steps"] if s["kind"] == "end-process")
    assert end["argv"][:2] == ["kill", "-TERM"] and end["where"]["kind"] == "host"
    assert Plan.loads(plan.dumps()).dumps() == plan.dumps()
    assert {i["action"] for i in doc["items"]} == {"keep", "archive", "delete"}
    doc["items"][0]["action"] = "shred"
    with pytest.raises(Malformed, match=r"items\[0\].action"):
        Plan.from_json(doc)


def test_references_are_masked_only_when_asked(obs):
    plain = make_plan(obs, PlanRequest(archive_to="/backup"))
    assert not any(s.kind == "mask-unit" for s in plain.steps)
    masked = make_plan(obs, PlanRequest(archive_to="/backup", mask_references=True))
    (mask,) = [s for s in masked.steps if s.kind == "mask-unit"]
    assert mask.action.argv == ("systemctl", "mask", "sglang-kimi.service")
    assert mask.evidence and "eagle3" in mask.evidence[0].path
    assert Plan.loads(masked.dumps()).mask_references is True
