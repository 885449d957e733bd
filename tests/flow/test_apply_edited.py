"""A plan is a file people edit: only its items' actions. `apply` of the edited file refuses
with the command that makes its steps again; `plan --from EDITED -o NEW` makes them (looking
at the volume again where a new action needs it), says what changed, and NEW applies; a stale
volume or a plan with a journal is refused."""

from __future__ import annotations

import json
import os

import pytest
from harness.retire import Story, cli
from harness.volumes import can_loop_mount

pytestmark = pytest.mark.root


@pytest.fixture
def story(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    s = Story(str(tmp_path))
    yield s
    s.close()


def _edit(story, **actions) -> str:
    """The plan file with the items' actions changed (path relative to the volume ->
    action), written back as a person would."""
    with open(story.plan) as f:
        doc = json.load(f)
    for it in doc["items"]:
        rel = os.path.relpath(it["path"], story.m)
        if rel in actions:
            it["action"] = actions.pop(rel)
    assert not actions, actions
    with open(story.plan, "w") as f:
        json.dump(doc, f, indent=1)
    return story.plan


@pytest.mark.slow
@pytest.mark.parametrize("edits", [
    {"runs": "keep"},                         # archive -> keep
    {"runs": "delete"},                       # archive -> delete
    {"cuda.run": "archive"},                  # delete -> archive
    {"cache": "keep", "notes.txt": "delete"},  # delete -> keep; keep -> delete (looked again)
])
def test_an_edited_action_goes_through_plan_from(story, edits):
    story.make_plan()
    edited = _edit(story, **edits)
    rc, _out, err = cli("apply", edited, "--yes")
    new = os.path.join(story.tmp, "retire.new.plan")
    assert rc == 2 and f"vacate plan --from {edited} -o {new}" in err, err
    rc, out, err = cli("plan", "--from", edited, "-o", new, "--json")
    assert rc == 0, err
    assert "against its steps" in err and ("\n  + " in err or "\n  - " in err), err
    if "notes.txt" in edits:
        assert f"{story.m}/notes.txt: looked at again" in err
    doc = json.loads(out)
    got = {os.path.relpath(i["path"], story.m): i["action"] for i in doc["items"]}
    for rel, action in edits.items():
        assert got.get(rel, "keep") == action, (rel, got)
    rc, out, err = cli("apply", new, "--yes", "--json")
    assert rc == 0, err
    assert not os.path.ismount(story.m)


def test_plan_from_refuses_a_stale_volume_and_a_plan_with_a_journal(story):
    story.make_plan()
    edited = _edit(story, runs="delete")
    with open(f"{story.m}/runs/exp1/late.txt", "w") as f:
        f.write("written after the plan\n")
    rc, _out, err = cli("plan", "--from", edited, "-o", edited + ".new")
    assert rc == 2 and "stale" in err and not os.path.exists(edited + ".new"), err
    os.unlink(f"{story.m}/runs/exp1/late.txt")
    with open(edited + ".journal", "w") as f:
        f.write('{"event": "begin"}\n')
    rc, _out, err = cli("plan", "--from", edited, "-o", edited + ".new")
    assert rc == 2 and "journal" in err, err
