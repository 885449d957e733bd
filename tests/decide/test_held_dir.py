"""Issue 31: a directory that is only what it holds (``models/`` holding one model) takes its
status and its way back from that, not "cold" and "gone for good: nothing else holds it"."""

from __future__ import annotations

import os
import time

from vacate import demo
from vacate.decide.plan import make_plan
from vacate.decide.request import PlanRequest
from vacate.decide.verdict import check
from vacate.observing.host import Host
from vacate.observing.observe import observe


def test_a_directory_that_is_only_a_model_is_what_the_model_is(tmp_path):
    root = str(tmp_path / "data")
    os.makedirs(os.path.join(root, "models"))
    demo.build_model(root, time.time())
    demo.write_text(os.path.join(root, "notes.txt"), "mine\n", time.time())
    obs = observe(root, host=Host(), users=False)
    status = {os.path.relpath(u.item.path, root): u.status for u in check(obs).items}
    assert status[f"models/{demo.MODEL}"] == "disposable"
    assert status["models"] == "disposable"              # was "cold"
    assert status["notes.txt"] == "cold"
    plan = make_plan(obs, PlanRequest(archive_to=str(tmp_path / "b"),
                                      overrides=[("delete", "models")]))
    (models,) = [i for i in plan.items if i.path.endswith("/models")]
    assert models.action == "delete" and models.status == "disposable"
    assert "gone for good" not in models.get_back
    assert models.get_back.startswith(f"what it holds: {demo.MODEL}: regenerate it")
    assert "Qwen/Qwen3.5-397B-A17B, a guess" in models.get_back


def test_a_directory_with_files_of_its_own_besides_is_still_cold(tmp_path):
    root = str(tmp_path / "data")
    os.makedirs(os.path.join(root, "models"))
    demo.build_model(root, time.time())
    demo.write_text(os.path.join(root, "models", "my-notes.txt"), "mine\n", time.time())
    obs = observe(root, host=Host(), users=False)
    status = {os.path.relpath(u.item.path, root): u.status for u in check(obs).items}
    assert status["models"] == "cold"
    plan = make_plan(obs, PlanRequest(archive_to=str(tmp_path / "b"),
                                      overrides=[("delete", "models")]))
    (models,) = [i for i in plan.items if i.path.endswith("/models")]
    assert models.get_back == "gone for good: nothing else holds it"
