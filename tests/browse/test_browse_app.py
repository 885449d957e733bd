"""``vacate browse`` driven headless with Textual's Pilot on the story's saved observation:
moving about, the action menu, the confirmation of a delete with no way back (default no),
quitting with marks not written, odd names shown escaped and never obeyed as markup, and the
screens as snapshots at 80x24 and 160x48."""

from __future__ import annotations

import json

import pytest
from harness.browse_run import run, screen_text
from harness.paths import STORY

from vacate.browse.app import Browse
from vacate.browse.model import Volume
from vacate.browse.screens import ActionMenu, Ask, Page
from vacate.observing.model.observation import Observation

NOW = 1796156477.0 + 3 * 86400     # ages as three days after the observation


def story() -> Observation:
    with open(STORY) as f:
        return Observation.loads(f.read())


ODD = ["[@click=app.quit]x", "[bold]", "new\nline\x1b[2J", "bad\udcffname",
       "rtl\u202egnp.exe", "[link=x]y"]


def odd_story() -> Observation:
    """The story with directories of hostile names in eagle3/."""
    with open(STORY) as f:
        doc = json.load(f)
    rows = doc["inventory"]["dirs"]["rows"]
    for i, n in enumerate(ODD):
        rows.append([f"/data/eagle3/{n}", 4096 * (i + 1), 4096 * (i + 1), 0, 1,
                     rows[0][5], rows[0][6]])
    rows.sort(key=lambda r: r[0])
    return Observation.loads(json.dumps(doc))






@pytest.mark.slow
def test_navigation_into_and_up_and_sorting():
    app = Browse(Volume(story()), now=NOW)

    async def script(app, pilot):
        assert app.lst.selected.name == "eagle3"
        await pilot.press("enter")
        assert app.cwd == "/data/eagle3"
        assert [e.name for e in app.lst.entries][:2] == ["cache", "outputs"]
        await pilot.press("j", "j")
        assert app.lst.selected.name == "data"
        await pilot.press("k")
        assert app.lst.selected.name == "outputs"
        await pilot.press("n")
        assert [e.name for e in app.lst.entries][:4] == ["SpecForge", "cache", "data", "outputs"]
        assert app.lst.selected.name == "outputs"          # the cursor stays on its entry
        await pilot.press("backspace")
        assert app.cwd == "/data" and app.lst.selected.name == "eagle3"
        await pilot.press("right")
        await pilot.press("left")
        assert app.cwd == "/data" and app.lst.selected.name == "eagle3"
        await pilot.press("left")                           # at the top: stays
        assert app.cwd == "/data"
        await pilot.press("a")
        assert app.lst.view.apparent
        await pilot.press("f")
        assert app.lst.view.status == "active"
        assert [e.name for e in app.lst.entries] == ["models"]
        await pilot.press("end", "home")
        assert app.lst.cursor == 0
        await pilot.press("question_mark")
        assert isinstance(app.screen, Page)
        assert "mark delete" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, Page)
    run(app, script)


@pytest.mark.slow
def test_the_action_menu_marks_by_first_letter_and_by_arrows():
    app = Browse(Volume(story(), archive_to="/mnt/backup"), now=NOW)

    async def script(app, pilot):
        await pilot.press("space")
        assert isinstance(app.screen, ActionMenu)
        await pilot.press("k")
        assert app.vol.marks == {"/data/eagle3": "keep"}
        assert app.vol.about("/data/eagle3").action == "keep"
        await pilot.press("j", "space", "down", "enter")      # the second choice: archive
        assert app.vol.marks["/data/models"] == "archive"
        await pilot.press("space", "u")
        assert "/data/models" not in app.vol.marks
        await pilot.press("space", "escape")
        assert app.vol.marks == {"/data/eagle3": "keep"}
        assert "--keep eagle3" in screen_text(app)             # the command line, as it stands
    run(app, script)


@pytest.mark.slow
def test_a_delete_with_no_way_back_asks_and_the_default_is_no():
    app = Browse(Volume(story(), archive_to="/mnt/backup"), now=NOW)

    async def script(app, pilot):
        env = "/data/ml-env-backup-cuda128.txt"
        await pilot.press("j", "j", "j", "j", "d")             # a pip freeze: unique
        assert isinstance(app.screen, Ask)
        assert "Nothing is known to get it back" in screen_text(app)
        await pilot.press("enter")                             # the default: no
        assert env not in app.vol.marks
        await pilot.press("d", "n")
        assert env not in app.vol.marks
        await pilot.press("d", "y")
        assert app.vol.marks == {env: "delete"}
        # the CUDA runfile can be downloaded again: marked without a question (the last
        # entry but one: equal sizes are listed in name order)
        await pilot.press("end", "k", "d")
        assert not isinstance(app.screen, Ask)
        assert app.vol.marks["/data/cuda_13.0.1_580.82.07_linux.run"] == "delete"
        # the "N files" row names no path: it cannot be marked
        await pilot.press("home", "enter", "end", "d")
        assert app.lst.selected.kind == "rest"
        assert len(app.vol.marks) == 2 and "not named one by one" in app.message
        # models/ holds only a model that can be made again: its way back is the model's
        # (issue 31), and no question is asked
        await pilot.press("backspace", "home", "j", "d")
        assert not isinstance(app.screen, Ask)
        assert app.vol.marks["/data/models"] == "delete"
    run(app, script)


def test_quitting_with_marks_not_written_asks_first():
    app = Browse(Volume(story()), now=NOW)

    async def script(app, pilot):
        await pilot.press("space", "a", "q")
        assert isinstance(app.screen, Ask)
        assert "1 mark is not written" in screen_text(app)
        await pilot.press("n")
        assert not isinstance(app.screen, Ask) and app.is_running
        await pilot.press("q", "y")
    run(app, script)
    assert app.return_value == 0


def test_quitting_without_marks_does_not_ask():
    app = Browse(Volume(story()), now=NOW)

    async def script(app, pilot):
        await pilot.press("q")
        await pilot.pause()
    run(app, script)
    assert app.return_value == 0


@pytest.mark.slow
def test_odd_names_are_shown_escaped_and_never_obeyed():
    app = Browse(Volume(odd_story()), now=NOW)

    async def script(app, pilot):
        await pilot.press("enter", "n")
        text = screen_text(app)
        for shown in ("[@click=app.quit]x/", "[bold]/", "new\\nline\\x1b[2J/",
                      "bad\\xffname/", "rtl\\u202egnp.exe/", "[link=x]y/"):
            assert shown in text, (shown, text)
        assert "\x1b" not in text and "\u202e" not in text
        names = [e.name for e in app.lst.entries]
        await pilot.press("home", *["j"] * names.index("[@click=app.quit]x"))
        assert app.lst.selected.name == "[@click=app.quit]x"
        await pilot.click("#list", offset=(45, app.lst.cursor))   # on the name itself
        await pilot.press("space", "k")
        assert app.is_running
        assert app.vol.marks == {"/data/eagle3/[@click=app.quit]x": "keep"}
    run(app, script)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
# confirm: ml-env-backup-cuda128.txt, which nothing else holds (models/ has a way back now:
# what it holds, a model that can be made again)
@pytest.mark.parametrize("keys", [(), ("enter", "j"), ("j", "j", "j", "j", "d"),
                                  ("enter", "n", "j", "j")],
                         ids=["top", "eagle3", "confirm", "odd"])
def test_screens(snap_compare, size, keys):
    obs = odd_story() if "n" in keys else story()
    app = Browse(Volume(obs, archive_to="/mnt/backup"), now=NOW)
    assert snap_compare(app, press=list(keys), terminal_size=size)


def test_the_keypress_timing_is_logged_when_asked(tmp_path, monkeypatch):
    log = tmp_path / "keys.log"
    monkeypatch.setenv("VACATE_BROWSE_TIMING", str(log))
    app = Browse(Volume(story()), now=NOW)

    async def script(app, pilot):
        await pilot.press("j", "enter")
        await pilot.pause(0.2)
    run(app, script)
    lines = [ln.split("\t") for ln in log.read_text().splitlines()]
    # one line per screen update after a key: the key's number, its name, ms since it arrived
    assert {(n, k) for n, k, _ in lines} == {("1", "j"), ("2", "enter")}
    assert all(0 <= float(ms) < 5000 for _, _, ms in lines)
