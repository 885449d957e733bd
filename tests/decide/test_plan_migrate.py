"""Deciding a migration from the story's observation: a docker container that binds the
migrated model is a person's to recreate (vacate never recreates containers): a manual step
with the exact ``--mount`` to use; one that also binds what is not migrated is left to the
rest of the teardown."""

import dataclasses

from harness.migrate_plans import MODEL, plan_of
from harness.paths import STORY

from vacate.observing.model.observation import Observation
from vacate.observing.model.usage import Consumer, Evidence


def with_docker(obs: Observation, binds) -> Observation:
    c = Consumer("docker-container:sglang", "docker-container", "sglang", False,
                 tuple(b[0] for b in binds),
                 tuple(Evidence("config-line", b[0], "/var/lib/docker/containers/x/config",
                                f"bind {b[0]} -> {b[1]} ({b[2]})") for b in binds),
                 {"container_id": "x" * 64, "running": False, "binds": [list(b) for b in binds],
                  "restart_policy": "no", "relations": ["bind"]})
    return dataclasses.replace(obs, consumers=(*obs.consumers, c))




def test_a_docker_bind_of_the_migrated_item_is_a_manual_step_with_its_mount():
    with open(STORY) as f:
        obs = Observation.loads(f.read())
    plan = plan_of(with_docker(obs, [(MODEL, "/model", "ro")]))
    (step,) = [s for s in plan.steps if s.kind == "manual" and "sglang" in s.summary]
    new = "/shared/models/Qwen3.5-397B-A17B-NVFP4"
    assert f"--mount type=bind,source={new},target=/model,readonly in place of that " \
           "bind" in step.summary
    assert "docker stop sglang && docker rm sglang" in step.summary
    # after the model's last copy and read-back
    kinds = [s.kind for s in plan.steps]
    assert plan.steps.index(step) > len(kinds) - 1 - kinds[::-1].index("verify-copy")

    plan = plan_of(with_docker(obs, [(MODEL, "/model", "ro"), ("/data/eagle3", "/e", "rw")]))
    assert not [s for s in plan.steps if s.kind == "manual" and "--mount" in s.summary]


def test_a_unit_of_a_users_manager_is_not_repointed_by_vacate_a_person_is_told():
    with open(STORY) as f:
        obs = Observation.loads(f.read())
    consumers = tuple(
        dataclasses.replace(c, attrs=c.attrs.updated(unit="sglang-qwen.service",
                                                      user_manager=1000, uid=1000, user="alice"))
        if c.type == "process" else c for c in obs.consumers)
    plan = plan_of(dataclasses.replace(obs, consumers=consumers))
    kinds = [s.kind for s in plan.steps]
    assert "repoint-unit" not in kinds and "start-unit" not in kinds
    (step,) = [s for s in plan.steps if s.kind == "manual" and "sglang-qwen" in s.summary]
    assert "alice" in step.summary and "repoint it by hand to /shared/models/Qwen3.5" \
        in step.summary
    # it is stopped (and disabled) with the rest, so the volume can go
    assert "stop-unit" in kinds
