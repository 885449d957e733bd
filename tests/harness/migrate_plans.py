"""Plans of the story's observation that migrate its model to a destination."""

import dataclasses

from vacate.decide.plan import make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.model.observation import Destination, Observation

MODEL = "/data/models/Qwen3.5-397B-A17B-NVFP4"


def plan_of(obs: Observation):
    rel = "models/Qwen3.5-397B-A17B-NVFP4"
    obs = dataclasses.replace(obs, destinations=(Destination("/shared/models", 1 << 50),))
    return make_plan(obs, PlanRequest(archive_to="/backup", overrides=[("migrate", rel)],
                                      migrations={rel: "/shared/models"}))
