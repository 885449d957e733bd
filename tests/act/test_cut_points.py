"""vacate's crash-safe writers cut at every step (harness/lazyfs.py): ``fsio.write_atomic``
and the apply journal's writer, run by a program that says what each call that returned has
promised; the machine goes down right after its 1st, 2nd, ... change to the filesystem, and
what is left must keep every promise made before it went down.

The promises: a ``write_atomic`` that returned leaves that file's contents or a later one's
(whole, never half, never none); a journal record whose write returned is there, in order,
after the ones before it (``Journal.__enter__`` returned: the journal and its first record)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from harness.lazyfs import can_fuse
from harness.paths import SRC

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not can_fuse(), reason="needs root, /dev/fuse and mfusepy")]

ROUNDS = 3
SHA = "ab" * 32

# prints a promise after each call that returned; it stops at the first error (EIO once the
# filesystem is down)
WRITER = textwrap.dedent(f"""
    import sys
    from vacate.observing import fsio
    from vacate.act.journal import Journal
    d = sys.argv[1]
    if sys.argv[2] == "no-dir-fsync":       # the step a cut test must miss
        import os, stat
        real = os.fsync
        os.fsync = lambda fd: None if stat.S_ISDIR(os.fstat(fd).st_mode) else real(fd)
    def promise(*what):
        print(*what, flush=True)
    def contents(i):
        return (b"version %d " % i) * 500
    fsio.write_atomic(d + "/state", contents(0))
    promise("atomic", 0)
    with Journal(d + "/plan.journal", "{SHA}") as j:
        promise("journal", 1)
        for i in range(1, {ROUNDS} + 1):
            j.intent("s%d" % i, "delete")
            promise("journal", 2 * i)
            fsio.write_atomic(d + "/state", contents(i))
            promise("atomic", i)
            j.outcome("s%d" % i, "ok", "done")
            promise("journal", 2 * i + 1)
""")

EVENTS = ["begin"] + ["intent", "outcome"] * ROUNDS


def _run_writer(d: str, how: str) -> tuple[int, list[tuple[str, int]], str]:
    p = subprocess.run([sys.executable, "-c", WRITER, d, how], capture_output=True, text=True,
                       check=False,
                       timeout=60, env={**os.environ, "PYTHONPATH": SRC})
    promised = [(w, int(n)) for w, n in (line.split() for line in p.stdout.splitlines())]
    return p.returncode, promised, p.stderr


def _broken_promises(d: str, promised: list[tuple[str, int]]) -> list[str]:
    from vacate.act.journal import Journal
    out = []
    atomic = [n for w, n in promised if w == "atomic"]
    journal = [n for w, n in promised if w == "journal"]
    state = os.path.join(d, "state")
    if os.path.exists(state):
        with open(state, "rb") as f:
            got = f.read()
        versions = [i for i in range(ROUNDS + 1) if got == (b"version %d " % i) * 500]
        if not versions:
            out.append(f"state is no version's whole contents ({len(got)} bytes)")
        elif atomic and versions[0] < atomic[-1]:
            out.append(f"state is version {versions[0]}, older than the promised "
                       f"{atomic[-1]}")
    elif atomic:
        out.append(f"state is gone, version {atomic[-1]} was promised")
    recs = Journal(os.path.join(d, "plan.journal"), SHA).records()
    events = [r["event"] for r in recs]
    if events != EVENTS[:len(events)]:
        out.append(f"the journal's records are not a prefix of the run's: {events}")
    if journal and len(recs) < journal[-1]:
        out.append(f"the journal has {len(recs)} records, {journal[-1]} were promised")
    return out


def _cut_everywhere(lazyfs, how: str) -> tuple[int, dict]:
    """The writer run once whole, then cut after each of its steps in turn: how many steps
    it takes, and the promises broken at each cut that broke one."""
    m = lazyfs.mountpoint

    def fresh(name: str) -> str:
        d = os.path.join(m, name)
        os.mkdir(d)
        for p in (d, m):
            fd = os.open(p, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        return d

    d = fresh(f"{how}-whole")
    lazyfs.arm(0)
    rc, promised, err = _run_writer(d, how)
    steps = lazyfs.thaw()["steps"]
    assert rc == 0, err
    assert len(promised) == 2 + 3 * ROUNDS and steps > len(promised)

    broken = {}
    for n in range(1, steps + 1):
        d = fresh(f"{how}-cut-{n}")
        lazyfs.arm(n)
        rc, promised, err = _run_writer(d, how)
        got = lazyfs.thaw()
        assert got["cut"], f"step {n} of {steps}: no cut was made ({got})"
        assert rc != 0 or n == steps, f"step {n}: the writer did not see the cut"
        if why := _broken_promises(d, promised):
            broken[n] = (promised[-1:] or ["nothing promised"], why)
    return steps, broken


def test_write_atomic_and_the_journal_keep_their_promises_at_every_cut_point(lazyfs):
    steps, broken = _cut_everywhere(lazyfs, "real")
    assert not broken, "\n".join(f"cut after step {n} of {steps}, last promise {p}: {w}"
                                 for n, (p, w) in broken.items())


def test_the_cut_points_catch_write_atomic_without_its_directory_fsync(lazyfs):
    _, broken = _cut_everywhere(lazyfs, "no-dir-fsync")
    whys = [w for _, ws in broken.values() for w in ws]
    assert any(w.startswith("state is gone") for w in whys), broken
    # the journal's own directory fsync is taken out too: its first record goes with it
    assert any(w.startswith("the journal has 0 records") for w in whys), broken
