"""Ending holder processes for real (tests/harness/holders.py on a loop volume): TERM, the
grace period, KILL; never a process that is not the planned one, nor an init, vacate itself,
its ancestors or a container monitor."""

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from harness.holders import Holders

from vacate.act import processes
from vacate.act.base import Context
from vacate.act.kind import carry_out
from vacate.decide.plan import make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.host import Host
from vacate.observing.model.action import Action
from vacate.observing.model.conditions import Gone, Process
from vacate.observing.model.plan import Step
from vacate.observing.model.steps import EndProcess
from vacate.observing.observe import observe

pytestmark = pytest.mark.root


@pytest.fixture
def held(ext4_volume):
    vol = ext4_volume.mountpoint
    os.makedirs(f"{vol}/models")
    with open(f"{vol}/models/shard.bin", "wb") as f:
        f.write(b"\0" * 4096)
    h = Holders(vol)
    try:
        yield h, vol
    finally:
        h.close()


def step_for(pid, start, grace_s=5.0):
    """An end-process step as decide/plan.py teardown builds it."""
    pre = Process(pid, start)
    a = Action("end-process", f"pid {pid}", ("kill", "-TERM", str(pid)), precondition=pre)
    return Step(id="05-end-process", kind="end-process", summary=f"end pid {pid}", action=a,
                params=EndProcess(grace_s), precondition=pre, postcondition=Gone(True),
                downtime=True)


def exit_status(h, label, timeout=10):
    """How the holder ended, as its parent sees it (-15: TERM, -9: KILL)."""
    return h.procs[label].wait(timeout)


def alive(pid, start):
    return processes.start_time(pid) == start


@pytest.fixture
def ctx(held):
    _h, vol = held
    return Context(plan=make_plan(observe(vol, scan_tree=False),
                                  PlanRequest(archive_to="/var/tmp/vacate-test-archive")))


def test_a_process_that_ends_on_term(held):
    h, vol = held
    pid = h.fd(f"{vol}/models/shard.bin")
    plan = make_plan(observe(vol, scan_tree=False),
                     PlanRequest(archive_to="/var/tmp/vacate-test-archive"))
    step = next(s for s in plan.steps if s.kind == "end-process")
    assert step.precondition.pid == pid
    ctx = Context(plan=plan)
    assert processes.done(step, ctx) is False and processes.ready(step, ctx) is None
    out = carry_out(step, ctx)
    assert out.status == "ok", out.detail
    assert out.data["signals"] == ["TERM"] and out.data["killed"] is False
    assert out.data["via"] == "pidfd"
    assert exit_status(h, "fd") == -signal.SIGTERM
    assert processes.done(step, ctx) is True
    again = carry_out(step, ctx)                 # a rerun signals nothing
    assert again.status == "skipped" and again.data["signals"] == []


def test_a_process_that_ignores_term_is_killed_after_the_grace(held, ctx):
    h, vol = held
    pid = h.sh("stubborn", f"trap '' TERM; exec 3<'{vol}/models/shard.bin'")
    start = processes.start_time(pid)
    step = step_for(pid, start, grace_s=0.5)
    t0 = time.monotonic()
    out = carry_out(step, ctx)
    assert out.status == "ok", out.detail
    assert out.data["signals"] == ["TERM", "KILL"] and out.data["killed"] is True
    assert 0.5 <= out.data["waited_s"] < 5 and time.monotonic() - t0 >= 0.5
    assert exit_status(h, "stubborn") == -signal.SIGKILL
    assert processes.done(step, ctx) is True


HANDLES_TERM = r"""
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))
f = open(sys.argv[1], "rb")
open(sys.argv[2], "w").close()
while True:
    time.sleep(1)
"""


def test_a_stopped_process_is_continued_to_run_its_term_handler(held, ctx):
    h, vol = held
    flag = os.path.join(h.tmp, "handler.ready")
    pid = h.spawn("handler", [sys.executable, "-c", HANDLES_TERM, f"{vol}/models/shard.bin",
                              flag], ready=flag)
    os.kill(pid, signal.SIGSTOP)
    end = time.monotonic() + 5
    while processes._stat(pid, Host.local())[0] != b"T":
        assert time.monotonic() < end
        time.sleep(0.01)
    out = carry_out(step_for(pid, processes.start_time(pid), grace_s=5), ctx)
    assert out.status == "ok" and out.data["signals"] == ["TERM", "CONT"], out.data
    assert out.data["waited_s"] < 4
    assert exit_status(h, "handler") == 3              # its own handler ran: no KILL


def test_without_pidfds_kill_follows_the_recheck(held, ctx, monkeypatch):
    h, vol = held
    pid = h.fd(f"{vol}/models/shard.bin")
    monkeypatch.delattr(os, "pidfd_open")
    out = carry_out(step_for(pid, processes.start_time(pid)), ctx)
    assert out.status == "ok" and out.data["via"] == "kill"
    assert exit_status(h, "fd") == -signal.SIGTERM


def test_another_process_with_the_planned_pid_is_not_signalled(held, ctx):
    h, vol = held
    pid = h.fd(f"{vol}/models/shard.bin")
    start = processes.start_time(pid)
    step = step_for(pid, start + 1, grace_s=0.1)       # the plan saw another start time
    assert "another process now" in processes.ready(step, ctx)
    assert processes.done(step, ctx) is True           # the planned one is gone
    out = carry_out(step, ctx)
    assert out.status == "skipped" and out.data["signals"] == []
    time.sleep(0.2)
    assert alive(pid, start) and h.procs["fd"].poll() is None


def test_never_vacate_its_ancestors_an_init_or_a_monitor(held, ctx):
    h, _vol = held
    mon = h.spawn("monitor", ["bash", "-c",
                              "exec -a '[lxc monitor] /var/lib/lxc 129' sleep 1d"])
    ns = h.spawn("nsinit", ["unshare", "--pid", "--fork", "--kill-child", "sleep", "1d"])
    init = wait_child(ns)
    cases = {os.getpid(): "vacate itself or one of its ancestors",
             os.getppid(): "vacate itself or one of its ancestors",
             1: "PID 1 of a pid namespace",
             init: "PID 1 of a pid namespace",
             mon: "container monitor"}
    wait_cmdline(mon, "[lxc monitor]")
    for pid, why in cases.items():
        start = processes.start_time(pid)
        step = step_for(pid, start, grace_s=0.1)
        assert why in (processes.ready(step, ctx) or ""), pid
        out = carry_out(step, ctx)
        assert out.status == "manual" and out.data["signals"] == [], pid
        assert why in out.detail
        assert alive(pid, start), pid
    assert h.procs["monitor"].poll() is None and h.procs["nsinit"].poll() is None


def test_a_dry_run_signals_nothing(held, ctx):
    h, vol = held
    pid = h.fd(f"{vol}/models/shard.bin")
    out = carry_out(step_for(pid, processes.start_time(pid)), replace(ctx, dry_run=True))
    assert out.status == "would" and out.detail.startswith("would end "), out
    time.sleep(0.1)
    assert h.procs["fd"].poll() is None


def test_a_step_without_an_identity_fails(ctx):
    step = replace(step_for(os.getpid(), None), precondition=Process(os.getpid(), None))
    assert "no pid and start time" in processes.ready(step, ctx)
    assert processes.done(step, ctx) is False
    assert carry_out(step, ctx).status == "failed"


def wait_child(pid, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        kids = subprocess.run(["pgrep", "-P", str(pid)], check=False, capture_output=True,
                              text=True).stdout.split()
        if kids:
            return int(kids[0])
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} has no child")


def wait_cmdline(pid, prefix, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if f.read().startswith(prefix.encode()):
                return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} never showed {prefix}")
