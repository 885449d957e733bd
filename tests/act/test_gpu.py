"""Confirming the ended processes hold no GPU, behind pynvml's interface (no GPU here): the
driver's view is waited for, nothing is ever signalled, and without NVML the step says it
could not confirm, or fails when a planned process still has an NVIDIA device open."""

import os
import subprocess
import sys
from dataclasses import replace

import pytest
from harness.nvml import FakeNVML as StoryNVML
from harness.paths import STORY

from vacate.act import gpu
from vacate.act.base import Context
from vacate.act.kind import carry_out
from vacate.act.processes import start_time
from vacate.decide.plan import make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.host import Host
from vacate.observing.model.observation import Observation


class FakeNVML(StoryNVML):
    """pynvml's functions; ``held[i]`` the pids with a context on GPU i, and
    ``release_after`` queries after which every context is gone (None: never)."""

    def __init__(self, held, release_after=None):
        super().__init__()
        self.held = held
        self.release_after = release_after
        self.queries = 0

    def nvmlInit(self):
        self.queries += 1
        if self.release_after is not None and self.queries > self.release_after:
            self.held = {i: [] for i in self.held}

    def nvmlDeviceGetCount(self):
        return len(self.held)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [self._P(p, 40 * 2**30) for p in self.held[h]]


class NoDriver(FakeNVML):
    def __init__(self):
        super().__init__({})

    def nvmlInit(self):
        raise self.NVMLError("Driver Not Loaded")


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setattr(gpu, "POLL_S", 0.01)


@pytest.fixture
def sleeper():
    p = subprocess.Popen(["sleep", "60"])
    yield p.pid, start_time(p.pid)
    p.kill()
    p.wait()


def plan_for(procs):
    """The plan for the story's observation with its holder replaced by ``procs`` ((pid,
    start time) each, holding /dev/nvidia0): its release-gpu step, and the plan."""
    with open(STORY) as f:
        obs = Observation.loads(f.read())
    base = next(c for c in obs.consumers if c.type == "process")
    held = [replace(base, id=f"process:{pid}:{st}",
                    attrs=base.attrs.updated(
                        pid=pid, start_time=st, gpus=[{"device": "/dev/nvidia0", "index": 0}]))
            for pid, st in procs]
    obs = replace(obs, consumers=tuple(held) + tuple(c for c in obs.consumers if c != base))
    plan = make_plan(obs, PlanRequest(archive_to="/backup"))
    step = next(s for s in plan.steps if s.kind == "release-gpu")
    assert step.params.pids == tuple(pid for pid, _ in procs)
    return step, plan


def test_waits_for_the_driver_to_release_and_signals_nothing(sleeper):
    pid, st = sleeper
    step, plan = plan_for([sleeper])
    nv = FakeNVML({0: [pid], 1: [pid]}, release_after=3)
    ctx = Context(plan=plan, nvml=nv)
    assert gpu.ready(step, ctx) is None
    assert gpu.done(step, ctx) is False                       # query 1: still held
    out = gpu.run(step, ctx)
    assert out.status == "ok", out.detail
    assert out.data["held"] == [] and nv.queries == 4
    assert gpu.done(step, ctx) is True
    assert carry_out(step, ctx).status == "skipped"
    assert start_time(pid) == st                              # never signalled
    assert ctx.commands == []


def test_still_held_after_the_wait_fails_naming_the_gpus(sleeper):
    pid, st = sleeper
    step, plan = plan_for([sleeper])
    step = replace(step, params=replace(step.params, wait_s=0.1))
    ctx = Context(plan=plan, nvml=FakeNVML({0: [], 1: [pid]}))
    out = carry_out(step, ctx)
    assert out.status == "failed"
    assert f"pid {pid}: GPU 1 (GPU-00000001) 40960 MiB" in out.detail
    assert out.data["held"] == [{"pid": pid, "gpu": 1, "uuid": "GPU-00000001",
                                 "memory_bytes": 40 * 2**30}]
    assert gpu.done(step, ctx) is False
    assert start_time(pid) == st


def test_a_context_left_by_a_gone_process_counts_a_reused_pid_does_not(sleeper):
    pid, st = sleeper
    gone = _free_pid()
    step, plan = plan_for([(pid, st + 1), (gone, 12345)])     # pid: another process now
    step = replace(step, params=replace(step.params, wait_s=0.05))
    ctx = Context(plan=plan, nvml=FakeNVML({0: [pid]}))
    assert gpu.done(step, ctx) is True
    ctx = Context(plan=plan, nvml=FakeNVML({0: [pid, gone]}))
    assert gpu.done(step, ctx) is False
    out = carry_out(step, ctx)
    assert out.status == "failed" and f"pid {gone}: GPU 0" in out.detail
    assert f"pid {pid}:" not in out.detail


def test_without_nvml_it_cannot_confirm_and_says_so(sleeper):
    step, plan = plan_for([sleeper])
    ctx = Context(plan=plan, nvml=NoDriver())
    assert gpu.done(step, ctx) is False
    out = carry_out(step, ctx)
    assert out.status == "skipped"
    assert out.detail.startswith("no NVML: NVML unavailable: Driver Not Loaded")


def test_without_nvml_an_open_nvidia_device_fails(tmp_path):
    """A captured /proc where the planned process still has /dev/nvidia0 open."""
    pid, st = 4242, 777
    proc = tmp_path / "proc"
    (proc / str(pid) / "fd").mkdir(parents=True)
    fields = ["S"] + ["0"] * 18 + [str(st)] + ["0"] * 30
    (proc / str(pid) / "stat").write_text(f"{pid} (python3 x) " + " ".join(fields) + "\n")
    os.symlink("/dev/nvidia0", proc / str(pid) / "fd" / "7")
    os.symlink("/dev/nvidiactl", proc / str(pid) / "fd" / "8")
    os.symlink("/data/models/x", proc / str(pid) / "fd" / "9")
    step, plan = plan_for([(pid, st)])
    host = Host.under(str(tmp_path))
    out = carry_out(step, Context(plan=plan, host=host, nvml=NoDriver()))
    assert out.status == "failed"
    assert f"pid {pid}: /dev/nvidia0, /dev/nvidiactl" in out.detail
    # the same pid as another process (another start time): not the planned one
    step2, plan2 = plan_for([(pid, st + 1)])
    assert carry_out(step2, Context(plan=plan2, host=host, nvml=NoDriver())).status == "skipped"


def test_pynvml_not_installed(sleeper, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)          # import pynvml fails
    step, plan = plan_for([sleeper])
    out = carry_out(step, Context(plan=plan))
    assert out.status == "skipped" and "not installed" in out.detail


def _free_pid():
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid += 1
    return pid
