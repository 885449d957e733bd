"""A plan is made from an observation and one request: the request is frozen whatever it was
given, a plan gives back the request it was made from, and what the machine says of the
places a plan writes to is in the observation (and round-trips with it)."""

import dataclasses

import pytest
from harness.paths import STORY

from vacate.decide.plan import make_plan, rebuild
from vacate.decide.request import PlanRequest, request_of
from vacate.observing.model.observation import Destination, Observation
from vacate.observing.model.plan import Plan

MODEL = "models/Qwen3.5-397B-A17B-NVFP4"


@pytest.fixture(scope="module")
def obs():
    with open(STORY) as f:
        return Observation.loads(f.read())


def test_a_request_is_frozen_whatever_it_was_given():
    r = PlanRequest(overrides=[("delete", "a")], migrations={"m": "/x"})
    assert r.overrides == (("delete", "a"),) and r.migrations == (("m", "/x"),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.grace_s = 1.0


def test_a_plan_gives_back_its_request_and_the_observation_its_destinations(obs):
    obs = dataclasses.replace(obs, destinations=(
        Destination("/backup", free_bytes=1, zstd=""), Destination("/shared", 1 << 50, "/mnt")))
    asked = PlanRequest(archive_to="/backup", overrides=[("delete", "eagle3"), ("migrate", MODEL)],
                        grace_s=3.0,
                        snapshot=False, migrations={MODEL: "/shared"}, created_at=5.0)
    plan = make_plan(obs, asked)
    assert any("bytes free" in b for b in plan.blocked)
    assert any("zstd" in b for b in plan.blocked)
    (moved,) = [it for it in plan.items if it.action == "migrate"]
    assert moved.dest_free_bytes == 1 << 50 and moved.migrate_inside.startswith("/mnt/")
    again = Plan.loads(plan.dumps())
    assert again.observation.destinations == obs.destinations
    back = request_of(again)
    assert (back.archive_to, back.grace_s, back.snapshot, back.created_at) == \
        ("/backup", 3.0, False, 5.0)
    assert dict(back.migrations) == {MODEL: "/shared"}
    made = rebuild(again)           # (its reasons say what was asked: the items as left)
    assert (made.steps, made.blocked) == (plan.steps, plan.blocked)
    assert [(i.path, i.action, i.migrate_inside) for i in made.items] == \
        [(i.path, i.action, i.migrate_inside) for i in plan.items]
