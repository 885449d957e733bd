"""Deciding the migration of a unit that runs in a user's own manager (the story's server as
alice's ``sglang-qwen.service``): repointed and started there when that manager answered for
the unit when the volume was looked at; a manual step, saying why, when it did not."""

import dataclasses

from harness.migrate_plans import MODEL, plan_of
from harness.paths import STORY

from vacate.observing.model.observation import Observation
from vacate.observing.model.usage import Consumer

UNIT = "sglang-qwen.service"


def alices(state_from: str | None) -> Observation:
    """The story with its server in alice's manager, and alice's unit file naming the model
    (its state from her manager, or from the unit files when ``state_from`` says so)."""
    with open(STORY) as f:
        obs = Observation.loads(f.read())
    consumers = tuple(
        dataclasses.replace(c, attrs=c.attrs.updated(unit=UNIT, user_manager=1000,
                                                      uid=1000, user="alice"))
        if c.type == "process" else c for c in obs.consumers)
    if state_from is not None:
        unit = Consumer(f"systemd-unit:user:alice:{UNIT}", "systemd-unit", UNIT, True, (MODEL,),
                        (), {"scope": "user", "user": "alice", "enabled": True, "active": True,
                             "state_from": state_from,
                             "unit_file": f"/home/alice/.config/systemd/user/{UNIT}"})
        consumers = (*consumers, unit)
    return dataclasses.replace(obs, consumers=consumers)


def test_a_unit_of_a_users_manager_that_answered_is_repointed_there():
    plan = plan_of(alices("systemctl"))
    kinds = [s.kind for s in plan.steps]
    stop, repoint, start = (next(s for s in plan.steps if s.kind == k)
                            for k in ("stop-unit", "repoint-unit", "start-unit"))
    assert kinds.index("stop-unit") < kinds.index("repoint-unit") < kinds.index("start-unit")
    assert stop.action.where.user == "alice"
    assert stop.action.command[:4] == ("systemctl", "--user", "-M", "alice@")
    for s in (stop, repoint, start):
        assert f"{UNIT} (alice's manager, host)" in s.summary
    assert repoint.params.moves == ((MODEL, "/shared/models/Qwen3.5-397B-A17B-NVFP4"),)
    assert not [s for s in plan.steps if s.kind == "manual" and UNIT in s.summary]
    assert not [s for s in plan.steps if s.kind == "disable-unit" and
                s.action.subject == UNIT]                 # it keeps running, from the copy


def test_a_unit_of_a_users_manager_that_did_not_answer_is_a_persons_to_repoint():
    plan = plan_of(alices("unit-files"))
    kinds = [s.kind for s in plan.steps]
    assert "repoint-unit" not in kinds and "start-unit" not in kinds
    (step,) = [s for s in plan.steps if s.kind == "manual" and UNIT in s.summary]
    assert "runs in alice's own manager (host), which did not answer when the volume was " \
           "looked at (not running, or not reachable): it is not repointed or started; " \
           "repoint it by hand to /shared/models/Qwen3.5-397B-A17B-NVFP4" in step.summary


def test_a_unit_in_a_container_with_a_root_of_its_own_is_a_persons_to_repoint():
    """A unit in an LXC container (not the --ct one): how the container spells DEST is not
    known on the host, so nothing is repointed or started there from a host path."""
    with open(STORY) as f:
        obs = Observation.loads(f.read())
    consumers = tuple(
        dataclasses.replace(c, attrs=c.attrs.updated(
            unit=UNIT, container={"type": "lxc", "name": "web", "init_pid": 4242}))
        if c.type == "process" else c for c in obs.consumers)
    plan = plan_of(dataclasses.replace(obs, consumers=consumers))
    kinds = [s.kind for s in plan.steps]
    assert "repoint-unit" not in kinds and "start-unit" not in kinds
    (step,) = [s for s in plan.steps if s.kind == "manual" and UNIT in s.summary]
    assert "which has a root of its own" in step.summary, step.summary
    assert "web" in step.summary.split("which has")[0]
    assert "/shared/models/Qwen3.5-397B-A17B-NVFP4" in step.summary
