"""`vacate plan` as a first-time user meets it, on the demo's volume: any path under the volume
can be named (carved out of its item), the why says why that action, a guessed source is never
the way back, an item left with nothing to archive costs no step, and the recognised items
inside an item show in the table with their own suggestion."""

import json
import os

import pytest
from harness.retire import cli

from vacate import demo

pytestmark = pytest.mark.root

MODEL = "models/Qwen3.5-397B-A17B-NVFP4"


@pytest.fixture(scope="module")
def vol():
    if not demo.can_loop_mount():
        pytest.skip("needs root and losetup")
    d = demo.create(loop=True)
    os.makedirs(f"{d.path}/eagle3/notes")
    with open(f"{d.path}/eagle3/notes/a.txt", "w") as f:
        f.write("a note\n")
    yield d.path
    d.close()


def _plan(m, tmp, *extra):
    rc, out, err = cli("plan", m, "--archive-to", str(tmp / "bk"), "--json", *extra)
    assert rc == 0, err
    return {os.path.relpath(i["path"], m): i for i in json.loads(out)["items"]}, json.loads(out)


def test_a_plain_subdirectory_or_file_becomes_an_item_of_its_own(vol, tmp_path):
    items, doc = _plan(vol, tmp_path, "--delete", "eagle3/notes",
                       "--delete", f"{vol}/eagle3/run_qwen3.5_eagle3.sh")
    assert items["eagle3/notes"]["action"] == "delete"
    assert items["eagle3/notes"]["files"] == 1
    assert items["eagle3/run_qwen3.5_eagle3.sh"]["action"] == "delete"
    assert f"{vol}/eagle3/notes" in items["eagle3"]["exclude"]
    deletes = [s["params"]["item"] for s in doc["steps"] if s["kind"] == "delete"]
    assert f"{vol}/eagle3/notes" in deletes
    # a path that is not there is still refused
    rc, _, err = cli("plan", vol, "--archive-to", str(tmp_path / "bk"), "--delete", "eagle3/nope")
    assert rc == 2 and "matches no item" in err


def test_the_why_is_why_that_action_and_a_guess_is_never_the_way_back(vol, tmp_path):
    items, _ = _plan(vol, tmp_path, "--delete", MODEL)
    for rel, it in items.items():
        if it["action"] == "archive":
            assert it["reason"] not in ("re-downloadable", "regenerable"), (rel, it["reason"])
    model = items[MODEL]
    assert model["action"] == "delete"
    assert "hf:Qwen/Qwen3.5-397B-A17B" not in model["get_back"]
    assert "download again" not in model["get_back"]


def test_an_item_whose_whole_content_is_deleted_is_not_archived(vol, tmp_path):
    items, doc = _plan(vol, tmp_path, "--delete", MODEL)
    assert items["models"]["action"] == "keep"
    assert "nothing is left in it to archive" in items["models"]["reason"]
    archived = [s["params"]["item"] for s in doc["steps"] if s["kind"] == "archive"]
    assert f"{vol}/models" not in archived


def test_the_table_shows_what_is_inside_an_item_with_its_own_suggestion(vol, tmp_path):
    rc, out, err = cli("plan", vol, "--archive-to", str(tmp_path / "bk"))
    assert rc == 0, err
    row = next(ln for ln in out.splitlines() if "eagle3/cache/hidden_states" in ln)
    assert "with eagle3" in row and "regenerable" in out, out
    # the outermost recognised items only (the checkpoints go with their run)
    assert sum("with eagle3" in ln for ln in out.splitlines()) == 4, out


@pytest.mark.parametrize("path", ["/", "/tmp", "/usr"])
def test_the_running_system_is_never_planned_and_no_hint_suggests_it(path):
    rc, out, err = cli("plan", path, "--archive-to", "/nonexistent-backup", "--json")
    assert rc == 2 and out == "" and "the running system lives on" in err, err
    assert "vacate plan /" not in err and f"vacate check {path}" in err
    rc, _out, _err = cli("check", path, "--no-scan", "--no-config", "--json")
    assert rc in (0, 1, 3)                  # it may still be audited


def test_a_volume_holding_vacate_itself_is_not_planned(vol, tmp_path, monkeypatch):
    import vacate

    monkeypatch.setattr(vacate, "__file__", f"{vol}/models/__init__.py")
    rc, _out, err = cli("plan", vol, "--archive-to", str(tmp_path / "bk"))
    assert rc == 2 and "vacate itself" in err, err
