"""Stopping the containers that use the volume, through their own managers: a real dockerd
(a container with ``--restart always`` binding a directory of a loop volume: stopped, its
policy set to ``no``, and a daemon restart does not bring it back, while one only stopped
comes back), real LXC, and Proxmox's ``pct``/``qm`` behind a stand-in with their interface
(they cannot exist here)."""

import os
import signal
import textwrap

import pytest

from vacate.act import containers
from vacate.act.base import Context
from vacate.act.kind import carry_out
from vacate.decide.actions import actions_for
from vacate.observing.model.plan import Step
from vacate.observing.model.usage import Consumer


def as_steps(consumer):
    """The consumer's stop-container actions as the teardown makes them into steps."""
    return [Step(id=f"{i:02d}-stop-container", kind="stop-container",
                 summary=f"stop container {x.subject}", action=x, downtime=True,
                 precondition=x.precondition)
            for i, x in enumerate(actions_for(consumer, {}), 1) if x.kind == "stop-container"]


# -- docker, for real --------------------------------------------------------------------------
@pytest.fixture
def dockerd(tmp_path, monkeypatch):
    from harness.docker_box import why_not
    if why := why_not():
        pytest.skip(why)
    from harness.docker_box import start_daemon
    from harness.volumes import make_volume

    made = []
    try:
        vol = make_volume("ext4")
        made.append(vol)
        data_root = str(tmp_path / "docker-data")
        box = start_daemon(data_root=data_root)
        made.append(box)
        box.import_image()
        # apply runs `docker` as a person would: the client beside the daemon, this socket
        monkeypatch.setenv("PATH", "/usr/bin:" + os.environ["PATH"])
        monkeypatch.setenv("DOCKER_HOST", f"unix://{box.sock}")
        yield vol, box, data_root, made
    finally:
        for thing in reversed(made):
            thing.close()


def _restart_daemon(box, data_root, monkeypatch):
    from harness.docker_box import _children, start_daemon

    kids = _children(box.proc.pid)
    box.proc.send_signal(signal.SIGTERM)
    box.proc.wait(timeout=60)
    for k in kids:
        try:
            os.kill(k, signal.SIGKILL)
        except ProcessLookupError:
            pass
    again = start_daemon(data_root=data_root)
    again.containers = list(box.containers)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{again.sock}")
    return again


@pytest.mark.root
@pytest.mark.slow
def test_docker_container_is_stopped_and_stays_stopped_after_a_daemon_restart(dockerd,
                                                                            monkeypatch):
    from harness.docker_box import IMAGE

    from vacate.decide.plan import make_plan
    from vacate.decide.request import PlanRequest
    from vacate.observing.observe import observe

    vol, box, data_root, made = dockerd
    m = vol.mountpoint
    os.makedirs(f"{m}/models")
    for name in ("binder", "control"):
        box.run(name, "--restart", "always", "--stop-timeout", "1",
                "-v", f"{m}/models:/models", IMAGE, "sleep", "infinity")
    obs = observe(m, scan_tree=False)
    plan = make_plan(obs, PlanRequest(archive_to=str(os.path.dirname(data_root))))
    steps = [s for s in plan.steps if s.kind == "stop-container"
             and s.action.argv[-1] == "binder"]
    assert [s.action.argv for s in steps] == [("docker", "stop", "binder"),
                                              ("docker", "update", "--restart=no", "binder")]
    ctx = Context(plan)
    for s in steps:
        assert not containers.done(s, ctx) and containers.ready(s, ctx) is None
        out = carry_out(s, ctx)
        assert out.status == "ok", out
    assert box.inspect("binder", "{{.State.Running}} {{.HostConfig.RestartPolicy.Name}}") == \
        "false no"
    for s in steps:                                   # twice is once
        assert containers.done(s, ctx) and carry_out(s, ctx).status == "skipped"
    box.out("stop", "control")                         # only stopped: comes back with the daemon

    again = _restart_daemon(box, data_root, monkeypatch)
    made.append(again)
    assert again.inspect("control", "{{.State.Running}}") == "true"
    assert again.inspect("binder", "{{.State.Running}}") == "false"
    assert all(containers.done(s, ctx) for s in steps)

    # a container of that name that is another container now is refused
    again.docker("rm", "-f", "binder")
    assert containers.done(steps[0], ctx)             # gone: runs nothing, starts nothing
    again.run("binder", IMAGE, "sleep", "infinity")
    assert "is another container now" in containers.ready(steps[0], ctx)
    assert carry_out(steps[0], ctx).status == "failed"
    assert again.inspect("binder", "{{.State.Running}}") == "true"


# -- LXC, for real -----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.root
def test_lxc_container_is_stopped_with_lxc_stop():
    from harness.lxc_box import LXCPATH, make_box, why_not
    if why := why_not():
        pytest.skip(why)
    box = make_box(extra=["lxc.signal.halt = SIGKILL"])   # its init is a sleep: halt it now
    try:
        box.start()
        c = Consumer(id=f"lxc-container:{box.name}", type="lxc-container", name=box.name,
                     live=False, paths=(), evidence=(),
                     attrs={"lxcpath": LXCPATH, "running": True, "relations": ["mount-entry"]})
        (step,) = as_steps(c)
        assert step.action.argv == ("lxc-stop", "-n", box.name)
        ctx = Context(None)
        assert not containers.done(step, ctx) and containers.ready(step, ctx) is None
        assert carry_out(step, ctx).status == "ok"
        assert not box.running()
        assert carry_out(step, ctx).status == "skipped"
    finally:
        box.close()


# -- Proxmox: pct and qm cannot exist here; a stand-in with their interface ---------------------
FAKE_PVE = textwrap.dedent("""\
    #!/usr/bin/env python3
    # pct/qm as far as vacate uses them: status, stop, shutdown; guests in $FAKE_PVE_STATE
    import os, sys
    tool = os.path.basename(sys.argv[0])
    cmd, vmid = sys.argv[1], sys.argv[2]
    with open(os.path.join(os.environ["FAKE_PVE_STATE"], "calls"), "a") as f:
        f.write(" ".join(sys.argv[1:]) + "\\n")
    path = os.path.join(os.environ["FAKE_PVE_STATE"], f"{tool}-{vmid}")
    kind = "lxc" if tool == "pct" else "qemu-server"
    if not os.path.exists(path):
        print(f"Configuration file 'nodes/pve/{kind}/{vmid}.conf' does not exist",
              file=sys.stderr)
        sys.exit(2)
    state = open(path).read().strip()
    if cmd == "status":
        print(f"status: {'running' if state == 'hung' else state}")
    elif cmd == "shutdown" and state == "hung":
        print("shutdown failed: got timeout", file=sys.stderr)
        sys.exit(255)
    elif cmd in ("stop", "shutdown"):
        open(path, "w").write("stopped\\n")
    else:
        print(f"400 unknown command '{tool} {cmd}'", file=sys.stderr)
        sys.exit(255)
    """)


@pytest.fixture
def pve(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("pct", "qm"):
        (bindir / tool).write_text(FAKE_PVE)
        (bindir / tool).chmod(0o755)
    state = tmp_path / "pve"
    state.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_PVE_STATE", str(state))

    def guest(tool, vmid, status):
        (state / f"{tool}-{vmid}").write_text(status + "\n")
    return guest, state


def _pve_consumer(kind, vmid):
    """A guest whose disk is on the volume (a container's root disk: a mount point alone
    is removed while it runs, pending, without stopping it)."""
    keys = ["rootfs"] if kind == "pve-container" else ["mp0"]
    return Consumer(id=f"{kind}:{vmid}", type=kind, name=str(vmid), live=False, paths=(),
                    evidence=(), attrs={"vmid": vmid, "keys": keys, "running": True})


@pytest.mark.slow
def test_pct_and_qm_shutdown_through_their_interface(pve, monkeypatch):
    guest, state = pve
    guest("pct", 101, "running")
    guest("qm", 200, "running")
    guest("pct", 102, "hung")
    ctx = Context(None)
    (ct,) = as_steps(_pve_consumer("pve-container", 101))
    (vm,) = as_steps(_pve_consumer("pve-vm", 200))
    assert ct.action.argv == ("pct", "shutdown", "101") and vm.action.argv == \
        ("qm", "shutdown", "200")
    for s in (ct, vm):
        assert not containers.done(s, ctx) and containers.ready(s, ctx) is None
        assert carry_out(s, ctx).status == "ok"
        assert containers.done(s, ctx) and carry_out(s, ctx).status == "skipped"
    assert (state / "pct-101").read_text() == "stopped\n"
    assert (state / "qm-200").read_text() == "stopped\n"

    (hung,) = as_steps(_pve_consumer("pve-container", 102))
    out = carry_out(hung, ctx)
    assert out.status == "failed" and "got timeout" in out.detail and "pct stop 102" in out.detail
    # an LXC monitor found holding the volume: its container is stopped by pct stop
    monitor = Consumer(id="process:9:1", type="process", name="lxc monitor", live=True,
                       paths=(), evidence=(), attrs={"pid": 9, "start_time": 1,
                                                     "lxc_monitor": True,
                                                     "container": {"type": "lxc",
                                                                   "name": "102",
                                                                   "ctid": 102}})
    (stop,) = as_steps(monitor)
    assert stop.action.argv == ("pct", "stop", "102")
    assert carry_out(stop, ctx).status == "ok" and containers.done(hung, ctx)

    # a guest that is gone is done; a manager that is not there is not
    (gone,) = as_steps(_pve_consumer("pve-container", 999))
    assert containers.done(gone, ctx)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert not containers.done(ct, ctx) and "not found" in containers.ready(ct, ctx)
