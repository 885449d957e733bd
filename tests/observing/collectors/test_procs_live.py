"""The whole real /proc of this machine: read with only the expected exceptions, while
processes come and go, and as an unprivileged user (unknown is never safe)."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from vacate.decide.verdict import verdict
from vacate.observing.collectors import mounts, procs
from vacate.observing.host import Host


def _root_target():
    return mounts.resolve_target("/", Host.local())


def test_whole_proc_read_with_only_expected_exceptions():
    found = procs.collect(Host.local(), _root_target())
    n = len([p for p in os.listdir("/proc") if p.isdigit()])
    assert found.processes >= n // 4          # kernel threads are skipped, the rest are read
    # the only thing allowed to go wrong: the host's PID 1 being unreadable here
    assert {p.code for p in found.problems} <= {"pid1-unreadable"}
    assert not [p for p in found.problems if p.blocks_verdict]
    # this test's own interpreter is skipped; its parent shell's cwd is on / and is found
    assert all(c.attrs.pid != os.getpid() for c in found.consumers)
    assert any(c.attrs.pid == os.getppid() for c in found.consumers)


@pytest.mark.slow
def test_processes_exiting_while_read_are_skipped_silently():
    stop = threading.Event()
    spawned = []

    def churn():
        while not stop.is_set():
            p = subprocess.Popen(["sleep", f"0.0{len(spawned) % 7}"])
            spawned.append(p)
            if len(spawned) > 40:
                spawned.pop(0).wait()

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    try:
        target = _root_target()
        end = time.monotonic() + 2.0
        rounds = 0
        while time.monotonic() < end:
            found = procs.collect(Host.local(), target)
            assert {p.code for p in found.problems} <= {"pid1-unreadable"}, [
                p.message for p in found.problems]
            rounds += 1
    finally:
        stop.set()
        t.join()
        for p in spawned:
            p.wait()
    assert rounds >= 3


def test_pid_that_is_gone_gives_nothing():
    p = subprocess.Popen(["true"])
    p.wait()
    found = procs.collect(Host.local(), _root_target(), pids=[p.pid])
    assert found.consumers == () and found.problems == ()


@pytest.mark.root
def test_unprivileged_reader_cannot_tell():
    """As nobody, other users' processes are unreadable: a blocking problem each, and the
    verdict is 'could not tell' (None), never 'safe'."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to nobody")
    target = _root_target()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # child: drop privileges, read /proc, report
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            found = procs.collect(Host.local(), target)
            v = verdict((), found.problems)
            doc = {"codes": sorted({p.code for p in found.problems}),
                   "blocking": sum(p.blocks_verdict for p in found.problems),
                   "safe": v.safe_to_unmount}
            os.write(w, json.dumps(doc).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        doc = json.loads(f.read() or "{}")
    os.waitpid(pid, 0)
    assert "permission-denied" in doc["codes"]
    assert doc["blocking"] >= 1
    assert doc["safe"] is None


def test_a_zombie_counts_as_exited():
    """A process that exited but was not yet waited for (a zombie) still has its /proc
    directory; what reading it says then varies, and it holds nothing: it is skipped."""
    p = subprocess.Popen(["sleep", "0"])
    try:
        for _ in range(100):
            with open(f"/proc/{p.pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    break
            time.sleep(0.01)
        assert procs._exited(f"/proc/{p.pid}")
    finally:
        p.wait()
    assert procs._exited(f"/proc/{p.pid}")                  # reaped: gone
    assert not procs._exited(f"/proc/{os.getpid()}")


def test_a_hostile_command_line_is_redacted_in_one_pass(tmp_path):
    """A holder whose command line is a megabyte of ``pass:pass:…`` (and a real password at
    its end): the check answers (each key was once followed to its word's end again, n^2,
    hours for this one), the password is masked, and nothing else is lost."""
    held = tmp_path / "held"
    held.mkdir()
    args = ["pass:" * 26000 for _ in range(8)] + ["--password=hunter2-0001"]
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *args],
                         cwd=held)
    try:
        r = subprocess.run([sys.executable, "-m", "vacate", "check", "--json", "--no-scan",
                            "--no-config", str(held)],
                           check=False, capture_output=True, text=True, timeout=60)
        doc = json.loads(r.stdout)
        mine = [c for c in doc["consumers"] if c.get("pid") == p.pid]
        assert len(mine) == 1, r.stderr[-2000:]
        shown = mine[0]["cmdline"]
        assert "hunter2-0001" not in r.stdout
        assert " pass:<redacted> pass:<redacted> " in shown and "--password=<redacted>" in shown
    finally:
        p.kill()
        p.wait()
