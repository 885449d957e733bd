"""A consumer's ``attrs`` are the typed value of its type (``observing/model/consumers.py``):
saved observations and plans still load and write back byte for byte (the format did not move,
tests/observing/model/test_plan_format.py), and a hand-edited observation or plan whose
consumer does not fit its type (a value of the wrong type, a field the type does not have, a
required field missing, a type that is none) is refused, naming the field, before anything
is decided or acts."""

from __future__ import annotations

import glob
import json
import os

import pytest
from harness.paths import FIXTURES
from harness.retire import cli

from vacate.observing.model import consumers
from vacate.observing.model.codec import Malformed
from vacate.observing.model.observation import Observation
from vacate.observing.model.usage import Consumer

STORY = os.path.join(FIXTURES, "observations", "story.json")
PLANS = sorted(glob.glob(os.path.join(FIXTURES, "plans", "v1", "*.plan")))


def _text(path: str) -> str:
    with open(path) as f:
        return f.read()


def _first(consumers_: list, ctype: str) -> tuple[int, dict]:
    return next((i, c) for i, c in enumerate(consumers_) if c["type"] == ctype)


def _string_for_a_pid(cs):
    i, c = _first(cs, "process")
    c["attrs"]["pid"] = str(c["attrs"]["pid"])
    return f"consumers[{i}].attrs.pid: expected a number, found a string"


def _unknown_field(cs):
    i, c = _first(cs, "process")
    c["attrs"]["force"] = True
    return f"consumers[{i}].attrs.force: not a field of a process consumer"


def _missing_pid(cs):
    i, c = _first(cs, "process")
    del c["attrs"]["pid"]
    return f"consumers[{i}].attrs.pid: missing"


def _list_for_a_flag(cs):
    i, c = _first(cs, "systemd-unit")
    c["attrs"]["enabled"] = [c["attrs"]["enabled"]]
    return f"consumers[{i}].attrs.enabled: expected a boolean, found a list"


def _unknown_type(cs):
    i, c = _first(cs, "systemd-unit")
    c["type"] = "daemon"
    return f"consumers[{i}].type: not a consumer type: 'daemon'"


EDITS = [_string_for_a_pid, _unknown_field, _missing_pid, _list_for_a_flag, _unknown_type]


def test_each_type_has_its_class():
    from vacate.observing.model.usage import CONSUMER_TYPES

    assert set(consumers.TYPES) == set(CONSUMER_TYPES)


def test_the_story_writes_back_the_same_with_typed_attributes():
    text = _text(STORY)
    obs = Observation.loads(text)
    again = Observation.loads(obs.dumps())
    assert again.dumps() == obs.dumps()
    proc = next(c for c in obs.consumers if c.type == "process")
    assert isinstance(proc.attrs, consumers.ProcessAttrs) and proc.attrs.pid == 6206
    unit = next(c for c in obs.consumers if c.type == "systemd-unit")
    assert unit.attrs.active is None and "active" in unit.attrs.given   # null, written
    assert unit.attrs.user is None and "user" not in unit.attrs.given   # left out


def test_null_and_left_out_stay_as_they_were():
    c = Consumer("systemd-unit:a.service", "systemd-unit", "a.service", False, (), (),
                 {"enabled": True, "active": None, "scope": "system"})
    assert c.as_json() == {"id": c.id, "type": c.type, "name": c.name, "live": False,
                           "enabled": True, "active": None, "scope": "system",
                           "paths": [], "evidence": []}
    assert c.attrs.updated(user="alice").given == ("enabled", "active", "scope", "user")


def test_a_collector_value_of_the_wrong_type_is_refused():
    with pytest.raises(Malformed, match=r"attrs\.pid: expected a number, found a string"):
        Consumer("process:1:2", "process", "x", True, (), (), {"pid": "1"})


@pytest.mark.parametrize("edit", EDITS, ids=lambda f: f.__name__.strip("_"))
def test_an_observation_edited_out_of_its_types_is_refused_naming_the_field(edit):
    doc = json.loads(_text(STORY))
    says = edit(doc["consumers"])
    with pytest.raises(Malformed) as e:
        Observation.from_json(doc)
    assert str(e.value) == says


def test_check_refuses_an_edited_observation_naming_the_field(tmp_path):
    doc = json.loads(_text(STORY))
    says = _string_for_a_pid(doc["consumers"])
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    rc, out, err = cli("check", "--from", str(path))
    assert rc == 2 and says in err and not out, err


@pytest.mark.parametrize("edit", EDITS, ids=lambda f: f.__name__.strip("_"))
def test_apply_refuses_a_plan_whose_consumer_was_edited_naming_the_field(tmp_path, edit):
    from vacate.observing.model.journal import path_for

    src = next(p for p in PLANS if '"process"' in _text(p) and '"systemd-unit"' in _text(p))
    doc = json.loads(_text(src))
    says = "observation." + edit(doc["observation"]["consumers"])
    plan = str(tmp_path / "edited.plan")
    with open(plan, "w") as f:
        json.dump(doc, f, indent=1)
    before = _text(plan)
    rc, _out, err = cli("apply", plan, "--yes")
    assert rc != 0 and says in err, err
    assert not os.path.exists(path_for(plan)), "a journal was begun"
    assert _text(plan) == before and os.listdir(tmp_path) == ["edited.plan"]
