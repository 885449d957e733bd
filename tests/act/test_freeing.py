"""The gate before a volume is freed (:mod:`vacate.act.freeing`), with ``zfs`` answered by
stand-ins: each archive verified in this apply (the journal's latest outcome of each verify
step named), a native one received, allowing freeing, of the snapshot whose guid ZFS gives
now (or, the destroy begun and cut, of a snapshot gone with it); no snapshot but the plan's
own and the listed ones, none held or cloned, no child, unmounted; each reason named."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vacate.act import freeing
from vacate.act.base import Context
from vacate.archive import zfs_tool
from vacate.observing.collectors import zfs as collector
from vacate.observing.model.dataset import DatasetFacts, ZfsSnapshot
from vacate.observing.model.journal import StepState

DS = "tank/subvol-1-disk-0"
ORIGIN = f"{DS}@vacate-archive-abc"


def _ctx(witnesses: dict, earlier: dict | None = None) -> Context:
    steps = [SimpleNamespace(id="05-verify", kind="verify", params=None),
             SimpleNamespace(id="07-archive-dataset", kind="archive-dataset",
                             params=SimpleNamespace(snapshot="vacate-archive-abc")),
             SimpleNamespace(id="08-verify-dataset", kind="verify-dataset", params=None)]
    return Context(plan=SimpleNamespace(steps=steps), witnesses=witnesses,
                   earlier=earlier or {})


def _out(sid: str, status: str = "ok", **data) -> StepState:
    return StepState(sid, "outcome", status, "", None, None, data)


RECEIVED = {"allows_freeing": True, "origin": ORIGIN, "guid": 42, "strength": "received"}
BOTH = ("05-verify", "08-verify-dataset")


@pytest.fixture
def snapshot_now(monkeypatch):
    """ZFS's answer for the archived snapshot: its guid (None: it is not there)."""
    now = {"guid": 42}
    monkeypatch.setattr(zfs_tool, "exists", lambda name: now["guid"] is not None)
    monkeypatch.setattr(zfs_tool, "props", lambda name, *p: {"guid": str(now["guid"])})
    return now


def test_every_archive_verified_in_this_apply_lets_it_through(snapshot_now):
    ctx = _ctx({"05-verify": _out("05-verify"),
                "08-verify-dataset": _out("08-verify-dataset", **RECEIVED)})
    assert freeing.archives_verified(ctx, BOTH) is None


def test_a_verify_not_journaled_failed_or_only_begun_stops_it(snapshot_now):
    ds = _out("08-verify-dataset", **RECEIVED)
    assert "05-verify has not verified" in freeing.archives_verified(
        _ctx({"08-verify-dataset": ds}), BOTH)
    assert "has not verified" in freeing.archives_verified(
        _ctx({"05-verify": _out("05-verify", "failed"), "08-verify-dataset": ds}), BOTH)
    begun = StepState("05-verify", "intent", None, "", None, None, {})
    assert "has not verified" in freeing.archives_verified(
        _ctx({"05-verify": begun, "08-verify-dataset": ds}), BOTH)


def test_an_archive_only_parsed_or_of_another_snapshot_stops_it(snapshot_now):
    parsed = _out("08-verify-dataset", **{**RECEIVED, "allows_freeing": False,
                                          "strength": "parsed"})
    why = freeing.archives_verified(_ctx({"08-verify-dataset": parsed}), BOTH[1:])
    assert "not proved receivable (parsed)" in why
    snapshot_now["guid"] = 7                       # a snapshot of that name, made again
    ok = {"08-verify-dataset": _out("08-verify-dataset", **RECEIVED)}
    assert "is not the snapshot verified (its guid is 7" in \
        freeing.archives_verified(_ctx(ok), BOTH[1:])
    snapshot_now["guid"] = None                    # gone, and no destroy of ours began
    assert "is not there now" in freeing.archives_verified(_ctx(ok), BOTH[1:])
    # the destroy begun and cut (it takes the snapshots first): gone with it
    assert freeing.archives_verified(_ctx(ok), BOTH[1:], resumed=True) is None


def _facts(monkeypatch, **kw) -> None:
    facts = DatasetFacts(DS, **{"mounted": False, **kw})
    monkeypatch.setattr(collector, "dataset_facts", lambda ds: facts)


def test_snapshots_beyond_the_plans_held_cloned_children_and_a_mount_are_named(monkeypatch):
    own = ("vacate-archive-abc",)
    _facts(monkeypatch, snapshots=(ZfsSnapshot("vacate-archive-abc", 0),
                                   ZfsSnapshot("daily", 0)))
    assert freeing.dataset_blockers(DS, ("daily",), own) == []
    _facts(monkeypatch, snapshots=(ZfsSnapshot("daily", 1), ZfsSnapshot("late", 0),
                                   ZfsSnapshot("base", 0, ("tank/clone",))),
           children=(f"{DS}/child",), mounted=True)
    said = " | ".join(freeing.dataset_blockers(DS, ("daily", "base"), own))
    for part in (f"{DS} has snapshots the plan did not list: @late",
                 f"{DS}@daily is held (zfs hold: 1)", f"{DS}@base has clones: tank/clone",
                 f"{DS} has child datasets: {DS}/child", f"{DS} is mounted"):
        assert part in said, said
    _facts(monkeypatch, snapshots=(ZfsSnapshot("daily", None),))
    assert "is held (zfs hold: not known)" in freeing.dataset_blockers(DS, ("daily",), own)[0]
    _facts(monkeypatch, error="zfs is not installed here", exists=False)
    assert freeing.dataset_blockers(DS, (), own) == ["zfs is not installed here"]
