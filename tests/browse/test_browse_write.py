"""``w`` writes the plan the marks make through the planner ``vacate plan`` uses: on the
demo's real volume, the written plan's items and actions equal those of ``vacate plan`` run
with the command line the screen shows; a volume changed since it was observed is named
before anything is written; marks on a loaded plan edit its items' actions and its steps are
made again (``plan --from``); a plan with a journal is never rewritten; and without a
terminal the command refuses with a hint."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shlex

import pytest
from harness.retire import cli

from vacate import demo
from vacate.browse.app import Browse
from vacate.browse.model import Volume
from vacate.browse.screens import Ask, Page
from vacate.browse.write import Writer
from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.model.observation import Observation
from vacate.observing.model.plan import Plan
from vacate.remote import Local

CUDA = "cuda_13.0.1_580.82.07_linux.run"


@pytest.fixture(scope="module")
def vol():
    if not demo.can_loop_mount():
        pytest.skip("needs root and losetup")
    d = demo.create(loop=True)
    yield d.path
    d.close()


def observed(m: str, tmp) -> Observation:
    p = str(tmp / "obs.json")
    rc, _, err = cli("observe", m, "-o", p, "--no-config")
    assert rc == 0, err
    with open(p) as f:
        return Observation.loads(f.read())


def drive(app, script):
    async def go():
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            await script(app, pilot)
    asyncio.run(go())


async def until(pilot, test, what):
    for _ in range(600):
        await pilot.pause(0.05)
        if test():
            return
    raise AssertionError(f"never: {what}")


def actions(doc_or_plan) -> dict[str, str]:
    items = doc_or_plan["items"] if isinstance(doc_or_plan, dict) else [
        {"path": i.path, "action": i.action} for i in doc_or_plan.items]
    return {i["path"]: i["action"] for i in items}


@pytest.mark.slow
def test_the_written_plan_is_the_one_vacate_plan_makes_from_the_command_line(vol, tmp_path):
    out = str(tmp_path / "browse.plan")
    bk = str(tmp_path / "bk")
    volume = Volume(observed(vol, tmp_path), archive_to=bk)
    writer = Writer(lambda: Local(), out)
    app = Browse(volume, writer=writer)

    async def script(app, pilot):
        await pilot.press("enter")                               # eagle3/ (the biggest)
        assert app.cwd == f"{vol}/eagle3"
        names = [e.name for e in app.lst.entries]
        await pilot.press(*["j"] * names.index("outputs"), "space", "k")
        await pilot.press("home", *["j"] * names.index("data"), "d", "y")
        await pilot.press("backspace")
        top = [e.name for e in app.lst.entries]
        await pilot.press("home", *["j"] * top.index(CUDA), "space", "a")
        assert app.vol.marks == {f"{vol}/eagle3/outputs": "keep", f"{vol}/eagle3/data": "delete",
                                 f"{vol}/{CUDA}": "archive"}
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, (Page, Ask)), "the plan written")
        assert isinstance(app.screen, Page), "\n".join(s.text for s in app.screen._compositor.render_strips())
        assert f"written to {out}" in app.message
        await pilot.press("escape", "q")                         # written: quits at once
    drive(app, script)
    assert app.return_value == 0
    shown = writer.command(volume)
    argv = shlex.split(shown)
    assert argv[:3] == ["vacate", "plan", vol]
    assert "--keep" in argv and "--delete" in argv and "--archive" in argv and "-o" in argv
    with open(out) as f:
        written = json.load(f)
    again = str(tmp_path / "again.plan")
    argv[argv.index("-o") + 1] = again
    rc, _, err = cli(*argv[1:])
    assert rc == 0, err
    with open(again) as f:
        made = json.load(f)
    assert actions(written) == actions(made)
    assert actions(written)[f"{vol}/eagle3/data"] == "delete"
    assert actions(written)[f"{vol}/eagle3/outputs"] == "keep"
    assert actions(written)[f"{vol}/{CUDA}"] == "archive"
    assert [s["kind"] for s in written["steps"]] == [s["kind"] for s in made["steps"]]


@pytest.mark.slow
def test_a_change_since_the_observation_is_named_before_writing(vol, tmp_path):
    out = str(tmp_path / "browse.plan")
    volume = Volume(observed(vol, tmp_path), archive_to=str(tmp_path / "bk"))
    with open(f"{vol}/new-since.txt", "w") as f:
        f.write("new\n")
    try:
        app = Browse(volume, writer=Writer(lambda: Local(), out))

        async def script(app, pilot):
            await pilot.press("w")
            await until(pilot, lambda: isinstance(app.screen, (Page, Ask)), "a question")
            assert isinstance(app.screen, Ask)
            assert f"new: {vol}/new-since.txt" in "\n".join(
                s.text for s in app.screen._compositor.render_strips())
            await pilot.press("n")
            assert not os.path.exists(out)
            await pilot.press("w")
            await until(pilot, lambda: isinstance(app.screen, Ask), "the question again")
            await pilot.press("y")
            await until(pilot, lambda: os.path.exists(out), "the plan written")
        drive(app, script)
    finally:
        os.unlink(f"{vol}/new-since.txt")
    with open(out) as f:
        assert f"{vol}/new-since.txt" in actions(json.load(f))


@pytest.mark.slow
def test_marks_on_a_loaded_plan_edit_its_items_and_a_journal_is_never_rewritten(vol, tmp_path):
    first = str(tmp_path / "first.plan")
    rc, _, err = cli("plan", vol, "--archive-to", str(tmp_path / "bk"), "-o", first)
    assert rc == 0, err
    with open(first) as f:
        plan = Plan.loads(f.read())
    assert actions(plan)[f"{vol}/{CUDA}"] == "delete"
    out = str(tmp_path / "edited.plan")
    volume = Volume(plan.observation, plan=plan)
    app = Browse(volume, writer=Writer(lambda: Local(), out, source=first))

    async def script(app, pilot):
        top = [e.name for e in app.lst.entries]
        await pilot.press(*["j"] * top.index(CUDA), "space", "k")
        assert app.vol.about(f"{vol}/{CUDA}").action == "keep"
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, Page), "written")
        assert "written to" in app.message, app.message
    drive(app, script)
    with open(out) as f:
        new = json.load(f)
    assert actions(new)[f"{vol}/{CUDA}"] == "keep"
    assert not any(s["kind"] == "delete" and s["params"].get("item") == f"{vol}/{CUDA}"
                   for s in new["steps"])
    rc, _, err = cli("apply", out, "--dry-run")        # apply takes it: steps match its items
    assert "edited" not in err, err

    with open(first + ".journal", "w") as f:
        f.write('{"step": "s1"}\n')
    app = Browse(Volume(plan.observation, plan=plan),
                 writer=Writer(lambda: Local(), str(tmp_path / "third.plan"), source=first))

    async def again(app, pilot):
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, Page), "refused")
        assert "has a journal" in app.message
    drive(app, again)
    assert not os.path.exists(tmp_path / "third.plan")


def test_without_a_terminal_it_refuses_with_a_hint(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    rc = main(["browse", "."], Env(stdout=out, stderr=err, stdin=None))
    assert rc == 2
    assert "terminal" in err.getvalue() and "vacate check" in err.getvalue()


@pytest.mark.slow
def test_the_script_line_is_copied_from_the_screen_whole(vol, tmp_path):
    """Issue 31: the "same plan in a script" command wrapped inside the dialog's border, so a
    copy from the terminal picked up box characters. It is shown without a border, in lines
    ended by a backslash that a shell reads as the one command, and printed again, whole, once
    the app is gone."""
    from vacate.cli.browse_cmd import said_after

    out = str(tmp_path / "the-retirement.plan")      # each word fits the screen, all do not
    bk = str(tmp_path / "a-backup-destination")
    volume = Volume(observed(vol, tmp_path), archive_to=bk)
    writer = Writer(lambda: Local(), out)
    app = Browse(volume, writer=writer)
    seen: list[str] = []

    async def script(app, pilot):
        top = [e.name for e in app.lst.entries]
        await pilot.press("home", *["j"] * top.index(CUDA), "space", "a")
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, (Page, Ask)), "the plan written")
        if isinstance(app.screen, Ask):              # the volume changed (an earlier test)
            await pilot.press("y")
            await until(pilot, lambda: type(app.screen) is Page, "the plan written")
        seen.extend(s.text for s in app.screen._compositor.render_strips())
        await pilot.press("escape", "q")
    drive(app, script)
    command = writer.command(volume)
    assert len(command) > 100                                  # wider than the screen
    start = next(i for i, s in enumerate(seen) if s.lstrip().startswith("vacate plan"))
    lines = []
    for s in seen[start:]:
        lines.append(s.rstrip())
        if not s.rstrip().endswith("\\"):
            break
    assert len(lines) > 1
    assert not any(set(ln) & set("│╭╮╰╯─┃") for ln in lines), lines
    assert shlex.split(" ".join(ln.removesuffix("\\") for ln in lines)) == shlex.split(command)
    printed = io.StringIO()
    said_after(app.written, Env(stdout=printed, stderr=io.StringIO(), stdin=None))
    assert f"\n{command}\n" in printed.getvalue()
