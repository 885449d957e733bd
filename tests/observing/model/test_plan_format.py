"""The plan file's format: plans written by earlier code (``tests/fixtures/plans/v1``, made by
vacate before the steps became typed values) still load, every step's parameters, its
conditions and its action's as typed values, and write back byte for byte (the format did not
move); a hand-edited plan whose step does not fit its kind (its parameters, a condition, its
action's) is refused by ``vacate apply``, naming the field, before anything acts."""

from __future__ import annotations

import glob
import json
import os

import pytest
from harness.paths import FIXTURES
from harness.retire import cli

from vacate.observing.model.plan import Plan

FIXTURES = sorted(glob.glob(os.path.join(FIXTURES, "plans",
                                         "v1", "*.plan")))


def _text(path: str) -> str:
    with open(path) as f:
        return f.read()


@pytest.mark.parametrize("path", FIXTURES, ids=os.path.basename)
def test_a_plan_of_the_earlier_code_loads_and_writes_back_the_same(path):
    text = _text(path)
    plan = Plan.loads(text)
    assert plan.dumps() == text


def _first(doc: dict, kind: str) -> tuple[int, dict]:
    return next((i, s) for i, s in enumerate(doc["steps"]) if s["kind"] == kind)


def _string_for_a_pid(doc):
    i, s = _first(doc, "release-gpu")
    s["params"]["pids"][0] = str(s["params"]["pids"][0])
    return f"steps[{i}].params.pids[0]: expected a number, found a string"


def _unknown_kind(doc):
    i, s = _first(doc, "lock-dir")
    s["kind"] = "shred"
    return f"steps[{i}].kind: not a step kind: 'shred'"


def _missing_field(doc):
    i, s = _first(doc, "archive")
    del s["params"]["item"]
    return f"steps[{i}].params.item: missing"


def _not_one_of(doc):
    i, s = _first(doc, "check")
    s["params"]["what"] = "everything"
    return f"steps[{i}].params.what: expected one of 'freed', 'retired', found 'everything'"


def _string_for_a_mount_id(doc):
    i, s = _first(doc, "unmount")
    s["precondition"]["mount_id"] = str(s["precondition"]["mount_id"])
    return f"steps[{i}].precondition.mount_id: expected a number, found a string"


def _string_for_a_flag(doc):
    i, s = _first(doc, "lock-dir")
    s["postcondition"]["immutable"] = "yes"
    return f"steps[{i}].postcondition.immutable: expected a boolean, found a string"


def _list_for_a_start_time(doc):
    i, s = _first(doc, "end-process")
    s["action"]["precondition"]["start_time"] = [s["action"]["precondition"]["start_time"]]
    return f"steps[{i}].action.precondition.start_time: expected a number, found a list"


def _field_not_of_its_condition(doc):
    i, s = _first(doc, "delete")
    s["precondition"]["force"] = True
    return f"steps[{i}].precondition.force: not a field here"


def _condition_missing_a_field(doc):
    i, s = _first(doc, "archive")
    del s["postcondition"]["complete"]
    return f"steps[{i}].postcondition.complete: missing"


@pytest.mark.parametrize("edit", [_string_for_a_pid, _unknown_kind, _missing_field, _not_one_of,
                                  _string_for_a_mount_id, _string_for_a_flag,
                                  _list_for_a_start_time, _field_not_of_its_condition,
                                  _condition_missing_a_field],
                         ids=lambda f: f.__name__.strip("_"))
def test_apply_refuses_a_step_edited_out_of_its_kind_naming_the_field(tmp_path, edit):
    from vacate.observing.model.journal import path_for

    src = next(p for p in FIXTURES if '"release-gpu"' in _text(p) and '"archive"' in _text(p)
               and '"check"' in _text(p))
    doc = json.loads(_text(src))
    says = edit(doc)
    plan = str(tmp_path / "edited.plan")
    with open(plan, "w") as f:
        json.dump(doc, f, indent=1)
    before = _text(plan)
    rc, _out, err = cli("apply", plan, "--yes")
    assert rc != 0 and says in err, err
    assert not os.path.exists(path_for(plan)), "a journal was begun"
    assert _text(plan) == before and os.listdir(tmp_path) == ["edited.plan"]
