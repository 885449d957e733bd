"""``apply`` of a plan made over ssh: the steps run on the far host (a real OpenSSH server on
127.0.0.1; CPython 3.8 there, run with ``-I -S``, so only what vacate sends can run), the
journal stays beside the plan here, and a connection that drops (the ssh client killed, or
the sshd serving it) fails the step in progress; the rerun connects again and ends in the
same state as an apply that was never interrupted, with never two far workers at once."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from harness import sshd
from harness.far_watch import far_processes, ppid
from harness.holders import Holders
from harness.retire import cli, fill, restore_with_stock_tools, tree_hashes
from harness.volumes import can_loop_mount, make_volume

from vacate.observing.model.journal import path_for, read_records

PY38 = os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python3.8")
VACATE = [sys.executable, "-m", "vacate"]

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not sshd.available(), reason="needs openssh-server")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = sshd.start(str(tmp_path_factory.mktemp("sshd")))
    _SSHD[:] = [s.proc.pid]
    yield s
    s.stop()
    _SSHD.clear()


def far_python() -> str:
    return PY38 if os.path.exists(PY38) else "/usr/bin/python3"


class Far:
    """A volume on the 'far' host (this machine, reached over ssh): files to delete and to
    keep, and holders of several kinds."""

    def __init__(self, tmp: str, cache_files: int = 3000):
        self.tmp = tmp
        self.vol = make_volume("ext4", size_mb=160)
        self.m = m = self.vol.mountpoint
        self.holders = Holders(m)
        fill(m, cache_files=cache_files, weights_mb=24)   # runs/ archived, cache/ deleted
        os.makedirs(f"{m}/work")
        with open(f"{m}/w.bin", "wb") as f:
            f.write(os.urandom(1 << 20))
        self.backup = os.path.join(tmp, "backup")    # a path on the far host
        self.holders.fd(f"{m}/notes.txt")
        self.holders.mmap_only(f"{m}/w.bin")
        self.holders.cwd(f"{m}/work")
        self.holders.loop_device(f"{m}/disk.img")
        self.holders.deleted(f"{m}/work/gone.bin")
        self.holders.swapfile(f"{m}/swapfile", "ext4")
        self.before = tree_hashes(m)
        self.plan = os.path.join(tmp, "far.plan")

    def make_plan(self, server) -> dict:
        rc, out, err = cli("plan", self.m, "--host", "vacate-test", "--python", far_python(),
                           "--delete", "cuda.run", "--delete", "cache", "--keep", "notes.txt",
                           "--keep", "w.bin", "--keep", "work", "--keep", "disk.img",
                           "--keep", "swapfile", "--archive-to", self.backup,
                           "--grace", "2", "-o", self.plan, "--json")
        assert rc == 0, err
        return json.loads(out)

    def assert_retired(self) -> None:
        m = self.m
        assert not os.path.ismount(m), f"{m} is still mounted"
        look = os.path.join(self.tmp, "look")
        os.makedirs(look, exist_ok=True)
        subprocess.run(["mount", "-o", "ro", self.vol.device, look], check=True)
        try:
            left = tree_hashes(look)
        finally:
            subprocess.run(["umount", look], check=True)
        for path, h in self.before.items():
            if path.split("/", 1)[0] in ("cuda.run", "cache"):
                assert path not in left, f"{path} was to be deleted"
            elif path == "swapfile":        # kept; the kernel writes its header at swapoff
                assert path in left
            else:
                assert left.get(path) == h, f"{path} changed or went missing"

        # the archive written there restores with stock tools (zstd, tar, sha256sum)
        out = os.path.join(self.tmp, "restored")
        os.makedirs(out, exist_ok=True)
        restore_with_stock_tools(os.path.join(self.backup, "runs"), out)
        assert tree_hashes(os.path.join(out, "runs")) == {
            k[len("runs/"):]: v for k, v in self.before.items() if k.startswith("runs/")}
        shutil.rmtree(out)

    def close(self) -> None:
        self.holders.close()
        self.vol.close()


@pytest.fixture
def far(tmp_path, server, monkeypatch):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    monkeypatch.setenv("VACATE_SSH_ARGS", f"-F {server.config}")
    f = Far(str(tmp_path))
    yield f
    f.close()


@pytest.mark.slow
def test_plan_and_apply_over_ssh_retire_a_volume_with_the_journal_here(far, server):
    plan = far.make_plan(server)
    assert plan["observation"]["host"]["ssh"] == "vacate-test"
    from vacate.flow import apply as ap

    seen = []
    result = ap.apply(far.plan, progress=lambda step, done, total, what: seen.append(
        (step.kind, done, total)))
    assert ap.exit_code(result) == 0, [(s.id, s.status, s.detail) for s in result.steps]
    far.assert_retired()
    # the far side's progress reached here while the step ran there
    assert any(kind == "delete" and total > 0 for kind, _done, total in seen), seen
    again = ap.apply(far.plan)      # a rerun of a finished apply: each step found done there
    redone = [(s.id, s.status, s.detail) for s in again.steps
              if not s.earlier and s.kind != "check"]        # a check looks again each time
    assert ap.exit_code(again) == 0 and not redone, redone
    rc, out, _err = cli("report", far.plan)
    assert rc == 0 and "vacate-test" in out, out[-2000:]
    recs = read_records(path_for(far.plan))           # the journal is here, beside the plan
    done = {r["step"] for r in recs if r.get("event") == "outcome" and r["status"] == "ok"}
    assert {s["id"] for s in plan["steps"] if s["kind"] == "delete"} <= done
    assert not far_here()
    with open(far.plan, "rb") as f:        # what the far side kept of the plan is gone
        sha = hashlib.sha256(f.read()).hexdigest()
    assert not os.path.exists(f"/var/tmp/vacate/apply-{sha[:32]}")


@pytest.mark.slow
def test_apply_refuses_another_host_and_a_local_plan_given_a_host(far, server, tmp_path):
    far.make_plan(server)
    rc, _out, err = cli("apply", far.plan, "--yes", "--host", "127.0.0.1:1")
    assert rc == 2 and "not 127.0.0.1:1" in err, err
    assert os.path.ismount(far.m)
    assert not os.path.exists(path_for(far.plan))


def far_here() -> list[int]:
    """The far processes of this module's sshd (not another run's on this machine)."""
    return far_processes(under=_SSHD[0]) if _SSHD else far_processes()


_SSHD: list[int] = []


def _children(pid: int) -> list[int]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _victim(apply_pid: int, which: str) -> int | None:
    """The ssh client vacate started, or the sshd process serving that session."""
    client = next((c for c in _children(apply_pid) if _comm(c) == "ssh"), None)
    if which == "client":
        return client
    far = far_here()
    top = [p for p in far if ppid(p) not in far]     # the supervisor, not the worker
    return ppid(top[0]) if top else None


@pytest.mark.slow
@pytest.mark.parametrize("which", ["client", "sshd"])
def test_a_dropped_connection_at_every_step_then_a_rerun_ends_retired(far, server, which):
    plan = far.make_plan(server)
    steps = [s["id"] for s in plan["steps"]]
    cut = 0
    for _ in range(len(steps) + 3):
        before = read_records(path_for(far.plan))
        done = {r["step"] for r in before if r.get("event") == "outcome" and r["status"] == "ok"}
        p = subprocess.Popen([*VACATE, "apply", far.plan, "--yes"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        # the cut lands in the first step not yet done that this run begins (an intent it
        # writes, never one an earlier run left); the victim is looked for until it is there
        end = time.monotonic() + 120
        victim = None
        while time.monotonic() < end and p.poll() is None and victim is None:
            if any(r.get("event") == "intent" and r.get("step") not in done
                   for r in read_records(path_for(far.plan))[len(before):]):
                victim = _victim(p.pid, which)
            if victim is None:
                time.sleep(0.002)
        if victim is not None:
            os.kill(victim, signal.SIGKILL)
        _out, err = p.communicate(timeout=120)
        if p.returncode == 0:
            break                       # it finished before the connection could be cut
        assert p.returncode == 1, err
        assert "vacate-test" in err.replace("\n", ""), err    # the failed step names the host
        cut += 1
        deadline = time.monotonic() + 20
        while far_here() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not far_here(), "a far worker outlived its connection"
    # a short step may end before the cut lands: the cut then falls in the next one
    assert cut >= len(steps) // 2, f"the connection was cut in {cut} of {len(steps)} steps"
    rc, _out, err = cli("apply", far.plan, "--yes")
    assert rc == 0, err
    far.assert_retired()


@pytest.mark.slow
def test_a_second_worker_for_the_same_plan_is_refused_while_one_lives(far, server):
    """A survivor of a dropped connection (here: a far worker holding the plan, alive) keeps
    the plan's lock there: an apply meanwhile waits for it, then is refused, changing
    nothing."""
    from vacate.remote import Remote
    from vacate.remote.ssh import SshTarget

    far.make_plan(server)
    with open(far.plan, "rb") as f:
        raw = f.read()
    survivor = Remote(SshTarget.parse("vacate-test", python=far_python()), act=True)
    try:
        got = survivor.call("apply_begin", plan=raw.decode("ascii"),
                            sha256=hashlib.sha256(raw).hexdigest(), files={})
        rc, _out, err = cli("apply", far.plan, "--yes")
        assert rc == 2 and "another vacate apply of this plan is running there" in err, err
        assert f"pid {got['pid']}" in err
        assert os.path.ismount(far.m) and os.path.exists(f"{far.m}/cuda.run")
        assert not os.path.exists(path_for(far.plan))    # no journal: nothing was begun
    finally:
        survivor.close()


@pytest.mark.slow
def test_a_far_host_without_zstd_is_named_when_the_plan_is_made(far, server, tmp_path):
    """The archive is written on the far host with its zstd command: where it has none the
    plan says so up front, blocked with the package to install, and apply refuses it before
    anything is changed (never an archive that fails half-way)."""
    wrapper = tmp_path / "python-without-zstd"
    wrapper.write_text(f"#!/bin/sh\nPATH=/nonexistent exec {far_python()} \"$@\"\n")
    wrapper.chmod(0o755)
    rc, out, err = cli("plan", far.m, "--host", "vacate-test", "--python", str(wrapper),
                       "--archive", "cache", "--archive-to", str(tmp_path / "backup"),
                       "-o", far.plan, "--json")
    plan = json.loads(out)
    assert any("install the package zstd there" in b for b in plan["blocked"]), plan["blocked"]
    rc, _out, err = cli("apply", far.plan, "--yes")
    assert rc == 2 and "zstd" in err, err
    assert os.path.ismount(far.m) and os.path.exists(f"{far.m}/cache/a/00000.bin")
    assert not os.path.exists(tmp_path / "backup")
