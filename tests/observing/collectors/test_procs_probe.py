"""The fast first look over /proc (``procs_probe``): on a real btrfs volume with holders of
every kind and a crowd of plain sleepers, the pass split across threads (C) or a forked child
(Python) finds exactly what the single pass finds, the C look and the Python look agree pid for
pid, every real holder is a candidate, and kernel threads and plain sleepers are not. Most
tests run twice: with the C module (``_fastproc``) and with the Python look alone."""

import os
import subprocess
import sys

import pytest
from harness.holders import MMAP_ONLY, Crowd, Holders
from harness.volumes import can_loop_mount, make_volume

from vacate.observing.collectors import forking, mounts, procs, procs_probe
from vacate.observing.host import Host

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def crowd_volume():
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("btrfs")
    h = Holders(v.mountpoint)
    crowd = None
    try:
        m = v.mountpoint
        os.makedirs(f"{m}/work")
        with open(f"{m}/work/data.txt", "w") as f:
            f.write("x\n" * 4000)
        h.fd(f"{m}/work/data.txt")
        h.mmap_only(f"{m}/work/data.txt")
        h.cwd(f"{m}/work")
        h.deleted(f"{m}/work/gone.tmp")
        h.private_ns_bind(f"{m}/work", "data.txt")
        subprocess.run(["btrfs", "-q", "subvolume", "create", f"{m}/sub"], check=True)
        with open(f"{m}/sub/f", "w") as f:
            f.write("y" * 8192)
        h.spawn("submmap", [sys.executable, "-c", MMAP_ONLY, f"{m}/sub/f",
                            h._flag("submmap")], ready=h._flag("submmap"))
        # enough processes for the split: 20 sleepers on the volume, the rest elsewhere
        crowd = Crowd(f"{m}/work", 20, procs_probe.SPLIT_MIN + 50)
        assert len(crowd.on) == 20
        yield m, mounts.resolve_target(m), {p.pid for p in h.procs.values()} | crowd.on, \
            crowd.off
    finally:
        if crowd is not None:
            crowd.close()
        h.close()
        v.close()


@pytest.fixture(params=["c", "python"])
def impl(request, monkeypatch):
    """The look in C (skipped where it was not built) or in Python alone."""
    if request.param == "c":
        if procs_probe._fastproc is None:
            pytest.skip("the C look was not built")
    else:
        monkeypatch.setattr(procs_probe, "_fastproc", None)
    return request.param


def _running(early) -> bool:
    """The early look is still out: C threads not joined, or a child not reaped."""
    return early.job is not None or early.child > 0


def test_c_look_is_built():
    """The install builds the C look where a compiler is (scripts/test-deps.sh installs one):
    without it the look runs in Python, correct but slower, and this says so."""
    assert procs_probe._fastproc is not None, (
        "vacate.observing.collectors._fastproc was not built: reinstall with a C compiler and the Python"
        " headers")


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


@pytest.mark.slow
def test_c_look_and_python_look_agree(crowd_volume):
    """The C look (one thread and several) gives the Python look's candidates, namespaces and
    count over the whole real /proc: holders of every kind, kernel threads, a private mount
    namespace, the crowd. Processes of other suites may exit in between: only those may
    differ."""
    if procs_probe._fastproc is None:
        pytest.skip("the C look was not built")
    m, target, holders, others = crowd_volume
    ns = os.readlink("/proc/self/ns/mnt")
    tokens = (f" {target.mount.major:02x}:{target.mount.minor:02x} ".encode(),)
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    py = procs_probe.probe("/proc", pids, (m,), tokens, ns, True)
    for threads in (0, 1, 2, 3):
        c = procs_probe._c_result(procs_probe._c_start("/proc", pids, (m,), tokens, ns, True,
                                                       threads))
        differ = set(py.candidates) ^ set(c.candidates)
        assert not [p for p in differ if _alive(p)], (threads, differ)
        assert c.candidates == sorted(c.candidates)
        assert holders <= set(c.candidates) and not (others & set(c.candidates))
        assert {k: v for k, v in c.namespaces.items() if _alive(v)} == \
            {k: v for k, v in py.namespaces.items() if _alive(v)}
        assert abs(c.count - py.count) <= len([p for p in pids if not _alive(p)])
    nothing = procs_probe._c_result(procs_probe._c_start("/proc", [], (m,), tokens, ns, True, 2))
    assert nothing.candidates == [] and nothing.count == 0


def _is_kthread(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            flags = int(f.read().rsplit(")", 1)[1].split()[6])
    except OSError:
        return False
    return bool(flags & procs_probe.PF_KTHREAD)


def _collect(target, split: bool, monkeypatch):
    monkeypatch.setattr(procs_probe, "SPLIT_MIN", 1 if split else 10**9)
    return procs.collect(Host.local(), target)


def test_split_pass_finds_what_the_single_pass_finds(crowd_volume, monkeypatch, impl):
    if forking.cpus() < 2:
        pytest.skip("one CPU: the pass is never split")
    _m, target, holders, _others = crowd_volume
    one = _collect(target, False, monkeypatch)
    two = _collect(target, True, monkeypatch)
    ids = {c.id for c in one.consumers}
    assert ids == {c.id for c in two.consumers}
    assert holders <= {c.attrs.pid for c in two.consumers}
    assert dict(one.namespaces) == dict(two.namespaces)
    assert abs(one.processes - two.processes) <= 5      # others' processes come and go
    assert not [p for p in two.problems if p.blocks_verdict]


def test_probe_flags_every_holder_and_leaves_out_plain_sleepers(crowd_volume, impl):
    m, target, holders, others = crowd_volume
    ns = os.readlink("/proc/self/ns/mnt")
    tokens = (f" {target.mount.major:02x}:{target.mount.minor:02x} ".encode(),)
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    got = procs_probe.probe_split("/proc", pids, (m,), tokens, ns, True)
    cands = set(got.candidates)
    assert holders <= cands
    assert not (others & cands)
    kthreads = {p for p in pids if _is_kthread(p)}
    assert kthreads and not (kthreads & cands)
    assert ns in got.namespaces and len(got.namespaces) >= 2   # ours and the private one


def test_a_broken_child_report_is_refused():
    with pytest.raises(ValueError):
        procs_probe._decode(b"n 3\nx garbage")
    back = procs_probe._decode(procs_probe._encode(procs_probe.probe("/proc", [], (), (), None,
                                                                     False)))
    assert back.count == 0 and back.candidates == [] and back.namespaces == {}


def test_early_look_started_before_the_target_is_resolved(crowd_volume, monkeypatch, impl):
    """The CLI starts the first look before its imports (C threads, or a forked child): the
    result is the normal pass's, and a guess that does not match the resolved target is thrown
    away (threads joined, child reaped)."""
    if forking.cpus() < 2 and impl == "python":
        pytest.skip("one CPU: nothing is forked early")
    m, target, holders, _others = crowd_volume
    monkeypatch.setattr(procs_probe, "SPLIT_MIN", 1)
    early = procs_probe.Early.start(f"{m}/work")
    assert early is not None and early.key[0] == {m} and _running(early)
    child = early.child
    got = procs.collect(Host.local(), target, early=early)
    assert not _running(early)
    if impl == "python":
        with pytest.raises(ChildProcessError):
            os.waitpid(child, os.WNOHANG)             # joined and reaped
    plain = procs.collect(Host.local(), target)
    assert {c.id for c in got.consumers} == {c.id for c in plain.consumers}
    assert holders <= {c.attrs.pid for c in got.consumers}
    # started for another volume (/): not used, the child is reaped, the pass still right
    wrong = procs_probe.Early.start("/")
    assert wrong is not None and wrong.key[0] != {m}
    child = wrong.child
    again = procs.collect(Host.local(), target, early=wrong)
    assert not _running(wrong)
    if impl == "python":
        with pytest.raises(ChildProcessError):
            os.waitpid(child, os.WNOHANG)
    assert {c.id for c in again.consumers} == {c.id for c in plain.consumers}


def test_check_command_with_the_early_look(crowd_volume):
    """``vacate check --json`` as a user runs it (the early look started in the CLI's entry
    point) reports every holder."""
    import json

    m, _target, holders, _others = crowd_volume
    r = subprocess.run([sys.executable, "-m", "vacate", "check", "--json", "--no-scan",
                        "--no-config", m], capture_output=True, text=True, check=False)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert holders <= {c["pid"] for c in doc["consumers"] if c["type"] == "process"}


def test_entry_point_starts_the_look_for_check_only(crowd_volume, impl):
    """``vacate check [flags] PATH`` starts the first look before argparse is imported; it is
    handed over for that path only, and ended (threads joined, child reaped) when nobody takes
    it."""
    if forking.cpus() < 2 and impl == "python":
        pytest.skip("one CPU: nothing is forked early")
    m, _target, _holders, _others = crowd_volume
    procs_probe.start_for_argv(["scan", m])
    assert procs_probe._pending is None
    procs_probe.start_for_argv(["check", "--json", "--no-scan", m])
    early = procs_probe.take_pending(m)
    assert early is not None and early.path == m and _running(early)
    early.close()
    assert not _running(early)
    assert procs_probe.take_pending(m) is None                 # handed over once
    procs_probe.start_for_argv(["check", m])
    pending = procs_probe._pending
    child = pending.child
    assert procs_probe.take_pending(f"{m}/work") is None       # another spelling: not used
    assert not _running(pending)                               # ...and ended
    if impl == "python":
        with pytest.raises(ChildProcessError):
            os.waitpid(child, os.WNOHANG)
    procs_probe.start_for_argv(["check", "--help"])
    assert procs_probe._pending is None
    procs_probe.start_for_argv(["check", m])
    pending = procs_probe._pending
    child = pending.child
    procs_probe.close_pending()                                # --help, an early error
    assert not _running(pending)
    if impl == "python":
        with pytest.raises(ChildProcessError):
            os.waitpid(child, os.WNOHANG)
