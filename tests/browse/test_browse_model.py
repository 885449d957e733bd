"""The browse screen's model, without a terminal: a directory's entries from the walk's
per-directory table (sizes adding up to the directory's), sorting and filters, what an entry
is and what uses it, marks as ``vacate plan``'s overrides, and the command line quoted as a
shell needs it."""

from __future__ import annotations

import os
import subprocess

import pytest
from harness.paths import STORY

from vacate.browse.model import View, Volume
from vacate.browse.write import command_line, quote
from vacate.observing.model.observation import Observation


@pytest.fixture(scope="module")
def obs():
    with open(STORY) as f:
        return Observation.loads(f.read())


def test_a_directory_lists_its_subdirectories_and_the_rest_of_its_files(obs):
    vol = Volume(obs)
    got = vol.listing("/data/eagle3", View())
    assert [e.name for e in got] == ["cache", "outputs", "data", "SpecForge", "1 file"]
    row = obs.inventory.dirs.index["/data/eagle3"]
    assert sum(e.files for e in got) == row[3]
    assert sum(e.apparent_bytes for e in got) == row[1]
    assert sum(e.disk_bytes for e in got) == row[2]
    assert got[-1].kind == "rest" and not got[-1].markable
    top = {e.name: e for e in vol.listing("/data", View())}
    assert top["cuda_13.0.1_580.82.07_linux.run"].kind == "file"   # a top-level file: an item
    assert top["eagle3"].is_dir


def test_sorts_and_sizes(obs):
    vol = Volume(obs)
    assert [e.name for e in vol.listing("/data", View(sort="name"))] == sorted(
        e.name for e in vol.listing("/data", View()))
    disk = vol.listing("/data", View())
    assert [e.disk_bytes for e in disk] == sorted((e.disk_bytes for e in disk), reverse=True)
    app = vol.listing("/data", View(apparent=True))
    assert app[0].name == "eagle3"                   # 4.8 TB apparent, sparse
    assert [e.apparent_bytes for e in app] == sorted((e.apparent_bytes for e in app),
                                                     reverse=True)
    mt = vol.listing("/data", View(sort="mtime"))
    times = [e.newest_mtime or 0 for e in mt]
    assert times == sorted(times, reverse=True)


def test_filter_by_status_and_kind(obs):
    vol = Volume(obs)
    assert [e.name for e in vol.listing("/data", View(status="active"))] == ["models"]
    # a directory passes when an item inside it does (the hidden-state cache in eagle3)
    assert [e.name for e in vol.listing("/data", View(status="disposable"))] == \
        ["eagle3", "cuda_13.0.1_580.82.07_linux.run"]
    assert [e.name for e in vol.listing("/data/eagle3", View(status="disposable"))] == \
        ["cache"]
    assert [e.name for e in vol.listing("/data", View(kind="installer"))] == \
        ["cuda_13.0.1_580.82.07_linux.run"]
    assert "model" in vol.kinds()


def test_what_uses_an_entry_with_evidence_and_blockers(obs):
    vol = Volume(obs)
    a = vol.about("/data/models")
    assert a.status == "active" and a.own
    assert [c.type for c in a.consumers] == ["process"]
    assert len(a.blockers) == 1 and a.blockers[0].actions
    inside = vol.about("/data/eagle3/cache/hidden_states/rows_0-2000")
    assert inside.item is not None and not inside.own
    assert [c.name for c in vol.about("/data/eagle3").consumers] == ["sglang-kimi.service"]


def test_marks_are_the_plans_overrides_decided_by_the_planner(obs):
    vol = Volume(obs, archive_to="/mnt/backup")
    assert vol.about("/data/cuda_13.0.1_580.82.07_linux.run").action == "delete"
    vol.mark("/data/eagle3/outputs", "delete")       # a plain directory: carved out
    vol.mark("/data/cuda_13.0.1_580.82.07_linux.run", "keep")
    vol.mark("/data/models", "archive")
    assert vol.overrides() == [("keep", "cuda_13.0.1_580.82.07_linux.run"),
                               ("archive", "models"), ("delete", "eagle3/outputs")]
    assert vol.plan_error == ""
    assert vol.about("/data/eagle3/outputs").action == "delete"
    assert vol.about("/data/cuda_13.0.1_580.82.07_linux.run").action == "keep"
    assert command_line(vol, "out.plan") == (
        "vacate plan /data --archive-to /mnt/backup --keep cuda_13.0.1_580.82.07_linux.run "
        "--archive models --delete eagle3/outputs -o out.plan")
    vol.mark("/data/models", None)
    assert ("archive", "models") not in vol.overrides()


@pytest.mark.parametrize("name", [
    "plain", "with space", "it's", "[bold]x[/]", "new\nline", "tab\there", "\x1b[31mred",
    "bad\udcff\udc80bytes", "rtl\u202egnp.exe", "ünïcode", "$(reboot)", "a\\b",
])
def test_the_command_line_quotes_odd_names_as_a_shell_reads_them(name):
    q = quote(name)
    assert "\n" not in q and "\x1b" not in q and "\u202e" not in q
    got = subprocess.run(["bash", "-c", f"printf %s {q}"], capture_output=True, check=True)
    assert got.stdout == os.fsencode(name)


def test_directories_made_are_kept_within_a_bound(obs, monkeypatch):
    from vacate.browse import model

    monkeypatch.setattr(model, "KEEP_ENTRIES", 6)
    vol = Volume(obs)
    first = list(vol.listing("/data/eagle3", View()))
    vol.listing("/data", View())                     # eagle3's entries let go
    assert "/data/eagle3" not in vol._made and vol._held <= 6 + len(vol._made["/data"][0])
    assert list(vol.listing("/data/eagle3", View(sort="name"))) == \
        sorted(first[:-1], key=lambda e: e.name) + first[-1:]
