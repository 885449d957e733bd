"""``vacate apply`` and ``vacate undo`` crashed again and again on the cut filesystem
(harness/powercut.py): at every journal point, and inside each step after a random one of
its changing requests or at a random moment (``VACATE_CUT_SEED`` replays a run's choices; the
moments themselves are timing). After each crash, every ``ok`` in the journal still holds;
after the last, a rerun ends as an uninterrupted run does. Each test prints its count of
crashes by the kind of step they cut (BENCHMARKS.md has the figure)."""

from __future__ import annotations

import os
import random

import pytest
from harness.lazyfs import can_fuse
from harness.powercut import (
    Rig,
    Tally,
    crash_in,
    normal,
    reference,
    seed,
)

from vacate.observing.model.journal import path_for

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.powercut,
              pytest.mark.skipif(not can_fuse(), reason="needs root, /dev/fuse and mfusepy")]

# crashes inside each kind of step, beside one at every journal point: the figure of
# BENCHMARKS.md (50 a kind, the floor, about 6 minutes here) is
# VACATE_CUTS_PER_KIND=50 pytest -m powercut; the full suite's run takes 8 a kind
PER_KIND = int(os.environ.get("VACATE_CUTS_PER_KIND", "8"))
KINDS = {"retire": ("archive", "verify", "delete", "edit-config"),
         "migrate": ("copy", "verify-copy", "repoint-config", "edit-config")}


def _rig(tmp_path, name: str, how: str) -> Rig:
    rig = Rig(str(tmp_path / name), how)
    try:
        rig.make_plan()
    except BaseException:
        rig.close()
        raise
    return rig


def _uninterrupted(tmp_path, how: str) -> tuple[dict, dict]:
    """:func:`harness.powercut.reference` on a rig of its own."""
    ref = _rig(tmp_path, "ref", how)
    try:
        return reference(ref)
    finally:
        ref.close()


def _finish(rig: Rig, want: dict, undo: bool = False) -> None:
    """The rerun after the last crash: it ends as the uninterrupted run did."""
    r = rig.vacate(*rig.command(undo))
    assert r.returncode == 0, r.stdout + r.stderr
    assert not rig.broken_promises()
    got = normal(rig, rig.end_state())
    if undo:
        got, want = got["config"], want["config"]
    assert got == want


def _check(rig: Rig, what: str) -> None:
    broken = rig.broken_promises()
    assert not broken, f"{what}: " + "; ".join(broken)


@pytest.mark.parametrize("how", ["retire", "migrate"])
def test_apply_crashed_at_every_journal_point_ends_as_a_whole_run(tmp_path, how):
    """The run crashes right after each journal record is on the disk, one point after the
    other (the first record, each step's intent, the step not run yet, and its outcome),
    the rerun going on from there each time and crashing at the next point not cut yet."""
    want, _ = _uninterrupted(tmp_path, how)
    tally = Tally()
    rig = _rig(tmp_path, "cut", how)
    covered: set[str] = set()
    try:
        while point := rig.crash_at_new_point(covered):
            tally.add(rig.kind_in_progress())
            _check(rig, f"after the record {point}")
        _finish(rig, want)
    finally:
        rig.close()
    tally.report(f"apply ({how}) at every journal point")
    assert len(covered) == 1 + 2 * len(rig.steps), sorted(covered)


@pytest.mark.parametrize("how", ["retire", "migrate"])
def test_apply_crashed_inside_each_step_ends_as_a_whole_run(tmp_path, how):
    """Inside each step of the plan in turn, crashes until each kind of step has had
    PER_KIND of them (a new rig when a rig's run is over), each followed by the check of
    what the journal's oks promised; each rig's last rerun ends as an uninterrupted run."""
    rng = random.Random(seed())
    want, took = _uninterrupted(tmp_path, how)
    tally = Tally()
    kinds = KINDS[how]
    rigs = 0
    while any(tally.by_kind[k] < PER_KIND for k in kinds):
        assert rigs < 20, tally.report("too many rigs")
        rig = _rig(tmp_path, f"cut-{rigs}", how)
        rigs += 1
        try:
            for step, kind in rig.steps.items():
                n = 0
                while kind in kinds and tally.by_kind[kind] < PER_KIND and n < 25:
                    got = crash_in(rig, step, rng, took)
                    if got is None:
                        break
                    n += 1
                    tally.add(got)
                    _check(rig, f"a crash in {step} (cut {kind})")
            _finish(rig, want)
        finally:
            rig.close()
    tally.report(f"apply ({how}) inside each step")


def test_undo_crashed_at_each_point_ends_as_a_whole_undo(tmp_path):
    """``vacate undo`` of a migrate (the crontab line put back) crashed after each of its
    journal records and inside its step, each time from the applied state again; the
    config file is never half written, and the undo that follows ends as a whole one."""
    rng = random.Random(seed())
    ref = _rig(tmp_path, "ref", "migrate")
    try:
        reference(ref)
        want, took = reference(ref, undo=True)
    finally:
        ref.close()
    rig = _rig(tmp_path, "cut", "migrate")
    tally = Tally()
    try:
        r = rig.vacate(*rig.command())
        assert r.returncode == 0, r.stderr
        applied = {p: rig._config_of(p) for p in os.listdir(rig.etc)}
        with open(path_for(rig.plan), "rb") as f:
            journal = f.read()
        step = next(s for s, k in rig.steps.items() if k == "repoint-config")
        tries = 0
        while tally.by_kind["undo-repoint"] < PER_KIND:
            tries += 1
            assert tries < 4 * PER_KIND, tally.report("too few crashes inside undo")
            _reset(rig, applied, journal)
            if tries <= 2:
                assert rig.crash_at_record(tries, undo=True)
                got = rig.kind_in_progress()
            else:
                got = crash_in(rig, step, rng, took, undo=True)
                if got is None:
                    continue
            tally.add(got)
            _check(rig, f"a crash in undo ({got})")
            _finish(rig, want, undo=True)
    finally:
        rig.close()
    tally.report("undo")


def _reset(rig: Rig, files: dict[str, bytes], journal: bytes) -> None:
    """The state the apply left (config files, journal) back, durable, for the next undo."""
    from vacate.observing.fsio import write_atomic
    for name in os.listdir(rig.etc):
        if name not in files:
            os.unlink(os.path.join(rig.etc, name))
    for name, data in files.items():
        write_atomic(os.path.join(rig.etc, name), data)
    write_atomic(path_for(rig.plan), journal)
