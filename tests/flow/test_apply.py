"""`vacate apply` on a real volume: the retirement done, the same after a `kill -9` at every
step and inside the long ones then a rerun, and every refusal changing nothing."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from harness.retire import Story, cli, kill_during
from harness.volumes import can_loop_mount

from vacate.observing.model.conditions import NOTHING
from vacate.observing.model.journal import path_for, read_records

pytestmark = pytest.mark.root


@pytest.fixture
def story(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    s = Story(str(tmp_path))
    yield s
    s.close()


def _apply(plan: str, *extra: str) -> tuple[int, dict | None, str]:
    rc, out, err = cli("apply", plan, "--yes", "--json", *extra)
    return rc, (json.loads(out) if out.strip() else None), err


@pytest.mark.slow
def test_a_retirement_from_plan_to_unmounted(story):
    plan = story.make_plan()
    kinds = [s["kind"] for s in plan["steps"]]
    assert kinds[:2] == ["archive", "verify"] or "end-process" in kinds
    rc, doc, err = _apply(story.plan)
    assert rc == 0, err
    assert doc["schema"] == "vacate.report/1" and doc["complete"] is True
    assert {s["status"] for s in doc["done"]["steps"]} <= {"ok", "skipped"}
    assert doc["done"]["deleted_bytes"] > 1 << 20
    story.assert_retired()
    # the journal: an intent before and an outcome after every step, in order
    recs = read_records(path_for(story.plan))
    assert recs[0]["event"] == "begin"
    events = [(r["event"], r["step"]) for r in recs[1:]]
    assert events == [(e, s["id"]) for s in plan["steps"] for e in ("intent", "outcome")]
    # applying again is applying once
    rc, _doc2, err = _apply(story.plan)
    assert rc == 0, err
    story.assert_retired()
    rc, out, _ = cli("report", story.plan, "--json")
    assert rc == 0 and json.loads(out)["complete"] is True




@pytest.mark.slow
def test_kill_9_at_every_step_then_rerun_ends_retired(tmp_path):
    """For each step k: kill -9 as it starts, then run again: the end state is the
    uninterrupted one, and nothing is lost (every file archived and verified, deleted as
    planned, or still on the volume)."""
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    points = None
    k = 0
    killed = 0
    while points is None or k < points:
        s = Story(str(tmp_path / f"k{k}"), cache_files=1500)
        try:
            plan = s.make_plan()
            points = len(plan["steps"])
            killed += kill_during(s.plan, intents_seen=k + 1)
            rc, _doc, err = _apply(s.plan)
            assert rc == 0, f"after a kill at step {k + 1}: {err}"
            s.assert_retired()
        finally:
            s.close()
        k += 1
    assert killed >= points // 2        # most kills landed before the apply finished


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["archive", "delete"])
def test_kill_9_inside_the_long_steps(tmp_path, kind):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    s = Story(str(tmp_path), cache_files=20000, weights_mb=96, size_mb=400)
    try:
        plan = s.make_plan()
        first = next(i for i, st in enumerate(plan["steps"]) if st["kind"] == kind)
        assert kill_during(s.plan, intents_seen=first + 1, delay=0.02)
        recs = read_records(path_for(s.plan))
        last = [r for r in recs if r.get("step") == plan["steps"][first]["id"]]
        assert last and last[-1]["event"] == "intent"      # killed inside the step
        rc, _doc, err = _apply(s.plan)
        assert rc == 0, err
        s.assert_retired()
    finally:
        s.close()


def _mounted_and_untouched(s: Story) -> None:
    assert os.path.ismount(s.m)
    assert not os.path.exists(path_for(s.plan)), "a refusal left a journal"
    assert os.path.exists(f"{s.m}/cuda.run") and os.path.exists(f"{s.m}/cache")
    assert os.path.exists(f"/proc/{s.holder}")


def test_without_approval_nothing_happens(story):
    story.make_plan()
    rc, _out, err = cli("apply", story.plan)
    assert rc == 2 and "not approved" in err
    _mounted_and_untouched(story)


def test_a_new_holder_makes_the_plan_stale(story):
    story.make_plan()
    story.holders.cwd(f"{story.m}/runs")
    rc, _doc, err = _apply(story.plan)
    assert rc == 2 and "stale" in err and "new user" in err
    _mounted_and_untouched(story)


def test_a_file_written_into_a_delete_item_after_planning_makes_it_stale(story):
    story.make_plan()
    with open(f"{story.m}/cache/a/late.bin", "wb") as f:
        f.write(b"nobody reviewed this")
    rc, _doc, err = _apply(story.plan)
    assert rc == 2 and f"{story.m}/cache" in err and "new or changed" in err
    _mounted_and_untouched(story)
    assert os.path.exists(f"{story.m}/cache/a/late.bin")


@pytest.mark.parametrize("edit, says", [
    (lambda d, m, b: d["items"][0].update(action="shred"), "is not one of"),
    (lambda d, m, b: d["items"][0].update(path="/etc"), "does not name something on the volume"),
    (lambda d, m, b: next(s for s in d["steps"] if s["kind"] == "end-process")["action"]
     .update(argv=["kill", "-9", "1"]), "edited"),
    (lambda d, m, b: next(s for s in d["steps"] if s["kind"] == "end-process")
     .update(summary="do nothing"), "not as its items make it"),
    (lambda d, m, b: d.update(archive_to=f"{m}/backup"), "on the volume being retired"),
    (lambda d, m, b: d["steps"].pop(), "missing"),
    (lambda d, m, b: next(s for s in d["steps"] if s["kind"] == "end-process")
     .update(argv=["kill", "-KILL", "1"]), "its command was edited"),
])
def test_a_plan_edited_into_nonsense_is_refused(story, edit, says):
    doc = story.make_plan()
    edit(doc, story.m, story.backup)
    with open(story.plan, "w") as f:
        json.dump(doc, f)
    rc, _doc, err = _apply(story.plan)
    assert rc == 2 and says in err, err
    _mounted_and_untouched(story)


@pytest.mark.slow
def test_on_btrfs_a_snapshot_holds_what_was_deleted(tmp_path):
    """Before the first delete, a read-only snapshot of the subvolume the deletes touch: the
    deleted files are still in it (the freed space expected is 0, said so), and the report
    gives the command that destroys it."""
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    s = Story(str(tmp_path), fstype="btrfs", size_mb=256)
    try:
        plan = s.make_plan()
        assert "snapshot" in [st["kind"] for st in plan["steps"]]
        assert plan["expected_freed_bytes"] == 0
        rc, doc, err = _apply(s.plan)
        assert rc == 0, err
        s.assert_retired()
        (snap,) = doc["done"]["snapshots"]
        assert snap["destroy"][:3] == ["btrfs", "subvolume", "delete"]
        look = str(tmp_path / "look")
        os.mkdir(look)
        subprocess.run(["mount", "-o", "ro", s.vol.device, look], check=True)
        try:
            kept = snap["snapshots"][0]["snapshot"].replace(s.m, look, 1)
            assert os.path.exists(os.path.join(kept, "cuda.run"))     # still held there
        finally:
            subprocess.run(["umount", look], check=True)
    finally:
        s.close()


def test_a_dry_run_says_what_would_be_done_and_changes_nothing(story):
    story.make_plan()
    rc, out, err = cli("apply", story.plan, "--dry-run")
    assert rc == 0, err
    assert "dry run" in out and "nothing was changed" in out
    assert "would" in out and "archive" in out
    _mounted_and_untouched(story)
    rc, out, err = cli("apply", story.plan, "--dry-run", "--json")
    doc = json.loads(out)
    assert doc["would"] and not doc["done"]["steps"]


def test_the_last_look_finds_what_would_mount_it_again(story, tmp_path):
    """After the unmount, the final check reads the configuration again against the volume
    as the plan recorded it: an fstab line still naming it fails the step."""
    from harness.config_files import put

    from vacate.act import check_step
    from vacate.act.base import Context
    from vacate.flow.apply import load
    from vacate.observing.host import Host

    story.make_plan()
    rc, _doc, err = _apply(story.plan)
    assert rc == 0, err
    plan, _sha = load(story.plan)
    last = plan.steps[-1]
    root = str(tmp_path / "host")
    put(root, "/etc/fstab", f"{story.vol.device} {story.m} ext4 defaults 0 2\n".encode())
    out = check_step.run(last, Context(plan, host=Host.under(root)))
    assert out.status == "failed" and "fstab line at /etc/fstab:1" in out.detail, out
    put(root, "/etc/fstab", f"# {story.vol.device} {story.m} ext4 defaults 0 2\n".encode())
    assert check_step.run(last, Context(plan, host=Host.under(root))).status == "ok"


def test_a_dry_run_sees_that_a_holder_left_to_a_person_would_keep_it_mounted(story):
    """The dry run walks the plan: the volume's unmount is checked against what the steps
    before it end; a plan whose end-process step became a person's (manual) would leave the
    holder, and the dry run says the unmount would fail, naming it."""
    import dataclasses

    from vacate.act.base import Context
    from vacate.flow.apply import _dry, load
    from vacate.observing.host import Host
    from vacate.remote.acting import Here

    story.make_plan()
    plan, _sha = load(story.plan)
    rc, _out, err = cli("apply", story.plan, "--dry-run", "--json")
    assert rc == 0, err
    steps = [dataclasses.replace(s, kind="manual", params=None, precondition=NOTHING,
                                 postcondition=NOTHING) if s.kind == "end-process" else s
             for s in plan.steps]
    edited = dataclasses.replace(plan, steps=tuple(steps))
    here = Here(edited, Context(plan=edited, host=Host.local(), dry_run=True,
                                plan_path=story.plan))
    r = _dry(story.plan, edited, {}, here)
    (unmount,) = [s for s in r.steps if s.kind == "unmount"]
    assert unmount.status == "failed" and "still used by process" in unmount.detail
    _mounted_and_untouched(story)


def test_approval_is_pinned_to_the_bytes_shown(story):
    """The plan a person approves on the terminal is the one applied: a plan file changed
    while the question was on the screen is refused, and nothing is done."""
    import io

    from vacate.cli.env import Env
    from vacate.cli.main import main

    story.make_plan()

    class Terminal(io.StringIO):
        def isatty(self):
            return True

        def readline(self, *a):
            with open(story.plan, "a") as f:      # someone edits it meanwhile
                f.write(" ")
            return "y\n"

    out, err = io.StringIO(), io.StringIO()
    rc = main(["apply", story.plan], Env(stdout=out, stderr=err, stdin=Terminal()))
    assert rc == 2 and "changed after it was shown for approval" in err.getvalue(), \
        err.getvalue()[-2000:]
    _mounted_and_untouched(story)


def test_no_kind_acts_in_a_dry_run_whichever_way_it_is_asked(story, monkeypatch):
    """One dry run: ``Context(dry_run=True)`` stops every registered kind before its
    ``run`` (there is no other guard to forget), and each step of the story's plan carried
    out that way on the real volume runs no command and changes nothing."""
    import dataclasses

    from vacate.act import kind as kinds
    from vacate.act.base import Context, Outcome
    from vacate.act.registry import KINDS
    from vacate.flow.apply import load
    from vacate.observing.model.plan import Step

    story.make_plan()
    plan, _sha = load(story.plan)
    for name, (_k, mod) in KINDS.items():
        step = Step(id=f"01-{name}", kind=name, summary=f"do {name}")
        with monkeypatch.context() as mp:
            mp.setattr(mod, "done", lambda *_a: False)
            mp.setattr(mod, "ready", lambda *_a: None)

            def acted(*_a, name=name):
                raise AssertionError(f"{name}: run reached in a dry run")
            mp.setattr(mod, "run", acted)
            out = kinds.carry_out(step, Context(plan=plan, dry_run=True))
        assert out == Outcome("would", f"would do {name}"), (name, out)
    before = {p: os.lstat(os.path.join(story.m, p)).st_mtime_ns for p in os.listdir(story.m)}
    ctx = Context(plan=plan, dry_run=True, plan_path=story.plan)
    said = [kinds.attempt(dataclasses.replace(s), ctx) for s in plan.steps]
    assert not ctx.commands, ctx.commands
    assert {o.status for o in said} <= {"would", "failed", "skipped", "manual"}, said
    assert any(o.status == "would" for o in said)
    _mounted_and_untouched(story)
    assert {p: os.lstat(os.path.join(story.m, p)).st_mtime_ns
            for p in os.listdir(story.m)} == before
