"""The plan file's format: plans written by earlier code (``tests/fixtures/plans/v1``, made by
vacate before the steps became typed values) still load, every step's parameters as its
kind's typed value, and write back byte for byte (the format did not move); a hand-edited
plan whose step does not fit its kind is refused by ``vacate apply``, naming the field, before
anything acts."""

from __future__ import annotations

import glob
import json
import os

import pytest
from harness.retire import cli

from vacate.observing.model.plan import Plan

FIXTURES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "fixtures", "plans",
                                         "v1", "*.plan")))


def _text(path: str) -> str:
    with open(path) as f:
        return f.read()


@pytest.mark.parametrize("path", FIXTURES, ids=os.path.basename)
def test_a_plan_of_the_earlier_code_loads_and_writes_back_the_same(path):
    text = _text(path)
    plan = Plan.loads(text)
    assert plan.dumps() == text
