"""Stopping, disabling and masking units in a real booted systemd (PID 1 of private
namespaces, tests/harness/systemd_box.py), through the manager that runs them, as the plan
made from observing the volume says. What is checked is what a person checks: systemctl
is-active / is-enabled in that manager, the links under /etc/systemd/system, and whether any
process still has a file of the volume open."""

import os
import signal
import time
from dataclasses import replace

import pytest
from harness.systemd_box import available, start_box
from harness.waiting import wait_for

from vacate.act import units
from vacate.act.base import Context
from vacate.act.kind import carry_out
from vacate.decide.plan import make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.model.action import Action, Where
from vacate.observing.model.conditions import Unit
from vacate.observing.model.plan import Step
from vacate.observing.observe import observe

pytestmark = [pytest.mark.root, pytest.mark.skipif(not available(), reason="needs root + systemd")]
N = "[Unit]\nDefaultDependencies=no\n"
INSTALL = "[Install]\nWantedBy=vacate-box.target\n"
SLEEP = "[Service]\nExecStart=/bin/sleep infinity\n"


def unit_files(vol: str) -> dict:
    return {
        # the story's server: respawns when killed, holds a shard open, pulled in by a timer
        "llm.service": f"{N}[Service]\nRestart=always\nRestartSec=0.1\n"
                       f"ExecStart=/bin/sh -c 'exec 3<{vol}/models/shard.bin; "
                       f"exec sleep infinity'\n{INSTALL}",
        "llm.timer": f"{N}[Timer]\nOnActiveSec=1h\nUnit=llm.service\n"
                     "[Install]\nWantedBy=vacate-box.target\n",
        "other.service": f"{N}{SLEEP}{INSTALL}",          # unrelated: must keep running
        # pulled in by a Wants= written in another unit's file
        "a.service": f"{N}{SLEEP}{INSTALL}",
        "p.service": f"{N}Wants=a.service\n{SLEEP}{INSTALL}",
        "m.service": f"{N}{SLEEP}{INSTALL}",               # its file in /etc: mask cannot
    }


@pytest.fixture(scope="module")
def box():
    from harness.volumes import can_loop_mount, make_volume
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4")
    try:
        vol = v.mountpoint
        os.makedirs(f"{vol}/models")
        with open(f"{vol}/models/shard.bin", "wb") as f:
            f.write(b"\0" * 65536)
        b = start_box(unit_files(vol), enable=("llm.service", "llm.timer", "other.service",
                                               "a.service", "p.service", "m.service"))
        try:
            wait_for(lambda: holders(vol), "the unit's process to hold the volume")
            yield b, vol
        finally:
            b.close()
    finally:
        v.close()


def holders(vol: str) -> set[int]:
    """Pids with a file of the volume open (what `fuser -m` would list for fds)."""
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(vol + "/"):
                    out.add(int(pid))
        except OSError:
            continue
    return out


def active(b, unit):
    return b.systemctl("is-active", unit).stdout.strip()


def enabled(b, unit):
    return b.systemctl("is-enabled", unit).stdout.strip()


def wants_link(b, unit):
    return os.path.lexists(os.path.join(b.units_dir, "vacate-box.target.wants", unit))


def box_step(b, kind, unit, plan_steps=()):
    """A step as decide/plan.py teardown builds it, for the box's own manager."""
    argv = {"disable-unit": ("systemctl", "disable", unit),
            "mask-unit": ("systemctl", "mask", unit)}[kind]
    # (a mask is not among the Action kinds yet: the step's kind says what is done)
    a = Action("disable-unit", unit, argv, Where("pid-namespace", pid=b.pid1),
               precondition=Unit(unit))
    return Step(id=f"9{len(plan_steps)}-{kind}", kind=kind, summary=f"{kind} {unit}", action=a,
                downtime=True)


def commands_run(ctx, since, verb):
    return [c for c in ctx.commands[since:] if verb in c]


@pytest.mark.slow
def test_stop_where_kill_does_not_then_disable_with_its_timer(box):
    b, vol = box
    obs = observe(vol, scan_tree=False)
    plan = make_plan(obs, PlanRequest(archive_to="/var/tmp/vacate-test-archive"))
    stop = next(s for s in plan.steps if s.kind == "stop-unit")
    assert stop.action.subject == "llm.service"
    assert stop.action.where.kind == "pid-namespace"         # the box's manager
    first = stop.precondition.pid
    assert holders(vol) == {first}

    # killing the process alone: Restart=always brings it back
    os.kill(first, signal.SIGKILL)
    again = wait_for(lambda: holders(vol) - {first}, "llm.service to respawn")
    assert again and first not in again
    assert active(b, "llm.service") == "active"

    ctx = Context(plan=plan)
    assert units.done(stop, ctx) is False
    assert units.ready(stop, ctx) is None        # the planned pid is gone: the box is found
    out = carry_out(stop, ctx)
    assert out.status == "ok", out.detail
    assert out.data["triggers_stopped"] == ["llm.timer"]
    assert active(b, "llm.service") == "inactive" and active(b, "llm.timer") == "inactive"
    assert holders(vol) == set()
    time.sleep(0.5)                               # five RestartSec later: it stays stopped
    assert holders(vol) == set() and active(b, "llm.service") == "inactive"
    assert active(b, "other.service") == "active"
    assert units.done(stop, ctx) is True
    n = len(ctx.commands)
    assert carry_out(stop, ctx).status == "skipped"
    assert commands_run(ctx, n, "stop") == []

    # disable: the unit, and the timer that would start it again
    dis = replace(box_step(b, "disable-unit", "llm.service"),
                  action=replace(stop.action, kind="disable-unit",
                                 argv=("systemctl", "disable", "llm.service"),
                                 precondition=Unit("llm.service")))
    assert enabled(b, "llm.service") == "enabled" and wants_link(b, "llm.service")
    assert units.done(dis, ctx) is False and units.ready(dis, ctx) is None
    out = carry_out(dis, ctx)
    assert out.status == "ok", out.detail
    assert out.data["disabled"] == ["llm.service", "llm.timer"]
    assert enabled(b, "llm.service") == "disabled" and enabled(b, "llm.timer") == "disabled"
    assert not wants_link(b, "llm.service") and not wants_link(b, "llm.timer")
    assert any(p.endswith("vacate-box.target.wants/llm.service") for p in out.data["removed"])
    assert enabled(b, "other.service") == "enabled" and active(b, "other.service") == "active"
    assert units.done(dis, ctx) is True
    n = len(ctx.commands)
    assert carry_out(dis, ctx).status == "skipped"
    assert commands_run(ctx, n, "disable") == []
    assert holders(vol) == set()


def test_a_unit_pulled_in_by_another_units_file_is_manual_unless_the_plan_disables_it(box):
    b, vol = box
    plan = make_plan(observe(vol, scan_tree=False),
                     PlanRequest(archive_to="/var/tmp/vacate-test-archive"))
    dis_a = box_step(b, "disable-unit", "a.service")
    ctx = Context(plan=replace(plan, steps=(dis_a,)))
    out = carry_out(dis_a, ctx)
    assert out.status == "manual", out.detail
    assert "/etc/systemd/system/p.service:3 (Wants=a.service)" in out.detail
    assert f"nsenter -t {b.pid1} -a systemctl mask a.service" in out.detail
    assert out.data["manual"][0]["unit"] == "p.service"
    # what disable can do, it did: the [Install] link is gone
    assert enabled(b, "a.service") == "disabled" and not wants_link(b, "a.service")
    assert units.done(dis_a, ctx) is False
    assert carry_out(dis_a, ctx).status == "manual"          # the same answer again

    dis_p = box_step(b, "disable-unit", "p.service", (dis_a,))
    ctx = Context(plan=replace(plan, steps=(dis_a, dis_p)))
    assert units.done(dis_a, ctx) is True                      # p.service is the plan's
    assert carry_out(dis_a, ctx).status == "skipped"
    out = carry_out(dis_p, ctx)
    assert out.status == "ok" and out.data["disabled"] == ["p.service"]
    assert active(b, "p.service") == "active"                  # disable does not stop


def test_mask(box):
    b, vol = box
    plan = make_plan(observe(vol, scan_tree=False),
                     PlanRequest(archive_to="/var/tmp/vacate-test-archive"))
    # a unit whose own file is in /etc/systemd/system: a mask would replace it
    m = box_step(b, "mask-unit", "m.service")
    ctx = Context(plan=replace(plan, steps=(m,)))
    out = carry_out(m, ctx)
    assert out.status == "manual", out.detail
    assert "mv /etc/systemd/system/m.service /etc/systemd/system/m.service.vacate-masked" \
        in out.detail
    assert enabled(b, "m.service") == "enabled"                # nothing changed
    assert os.path.isfile(os.path.join(b.units_dir, "m.service"))
    # a unit from elsewhere (here /run/systemd/system) is masked from /etc
    b.nsenter("sh", "-c", "mkdir -p /run/systemd/system && printf '[Service]\\n"
              "ExecStart=/bin/sleep infinity\\n' > /run/systemd/system/r.service", check=True)
    b.systemctl("daemon-reload", check=True)
    r = box_step(b, "mask-unit", "r.service")
    assert units.done(r, ctx) is False and units.ready(r, ctx) is None
    out = carry_out(r, ctx)
    assert out.status == "ok", out.detail
    assert enabled(b, "r.service") == "masked"
    assert os.readlink(os.path.join(b.units_dir, "r.service")) == "/dev/null"
    assert units.done(r, ctx) is True and carry_out(r, ctx).status == "skipped"
    assert b.systemctl("start", "r.service").returncode != 0     # masked: not even by hand


def test_ready_says_why_not(box):
    b, vol = box
    plan = make_plan(observe(vol, scan_tree=False),
                     PlanRequest(archive_to="/var/tmp/vacate-test-archive"))
    ctx = Context(plan=plan)
    nope = box_step(b, "mask-unit", "no-such.service")
    assert "has no unit no-such.service" in units.ready(nope, ctx)
    assert carry_out(nope, ctx).status == "failed"
    # nothing starts a unit that does not exist: disabling or stopping it is done
    for kind in ("disable-unit", "stop-unit"):
        assert units.done(replace(nope, kind=kind, params=None), ctx) is True
    gone = replace(nope, action=replace(nope.action, where=Where("pid-namespace",
                                                                 pid=_free_pid())))
    assert "is gone" in units.ready(gone, ctx)
    assert units.done(gone, ctx) is False
    bad = replace(nope, action=replace(nope.action, subject="--now"))
    assert "not a unit name" in units.ready(bad, ctx)


def test_a_dry_run_changes_nothing(box):
    b, vol = box
    plan = make_plan(observe(vol, scan_tree=False),
                     PlanRequest(archive_to="/var/tmp/vacate-test-archive"))
    ctx = Context(plan=plan, dry_run=True)
    other = box_step(b, "disable-unit", "other.service")
    for kind in ("stop-unit", "disable-unit", "mask-unit"):
        out = carry_out(replace(other, kind=kind, params=None), ctx)
        assert out.status == "would" and out.detail.startswith("would "), (kind, out)
    assert not [c for c in ctx.commands if {"stop", "disable", "mask"} & set(c)]
    assert active(b, "other.service") == "active" and enabled(b, "other.service") == "enabled"


def _free_pid():
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid += 1
    return pid
