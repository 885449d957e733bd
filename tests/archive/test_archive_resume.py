"""An archive killed (SIGKILL) at random points resumes to a correct result, and never leaves a
part that looks complete but is not."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
from harness.archives import (
    needs_tools,
    run,
    sha256sum_check,
    snapshot,
    snapshot_diff,
    stock_restore,
)

pytestmark = needs_tools("zstd", "tar", "sha256sum")


def _tree(root: str) -> str:
    src = os.path.join(root, "src")
    rnd = random.Random(5)
    for d in range(6):
        os.makedirs(os.path.join(src, f"dir{d}"))
        for i in range(25):
            with open(os.path.join(src, f"dir{d}", f"f{i:03d}.bin"), "wb") as f:
                f.write(rnd.randbytes(rnd.randint(0, 160_000)))
    with open(os.path.join(src, "dir3", "large.bin"), "wb") as f:
        f.write(rnd.randbytes(3 << 20))
    return src


def _cmd(src, dest):
    return [sys.executable, "-m", "vacate", "archive", src, "--to", dest, "--name", "bk",
            "--part-size", "256K", "--level", "12", "--json", "--no-progress"]


def _assert_no_fake_complete_part(adir: str) -> None:
    """Every part under its final name is a whole zstd frame holding a whole tar stream."""
    for n in sorted(os.listdir(adir)):
        if n.startswith("part-") and n.endswith(".tar.zst"):
            p = os.path.join(adir, n)
            t = subprocess.run(f'zstd -qdc "{p}" | tar -tf - >/dev/null', shell=True,
                               capture_output=True, check=False)
            assert t.returncode == 0, (n, t.stderr)


@pytest.mark.slow
def test_killed_archive_resumes_to_a_correct_result(tmp_path):
    src = _tree(str(tmp_path))
    before = snapshot(src)
    t0 = time.monotonic()
    ref = subprocess.run(_cmd(src, str(tmp_path / "ref")), capture_output=True, check=False)
    full = time.monotonic() - t0
    assert ref.returncode == 0, ref.stderr
    seed = int(time.time())
    rnd = random.Random(seed)
    dest = str(tmp_path / "dest")
    adir = os.path.join(dest, "bk")
    kills = 0
    for _ in range(20):
        if kills >= 4:
            break
        p = subprocess.Popen(_cmd(src, dest), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(rnd.uniform(0.05, full * 0.7))
        if p.poll() is not None:      # finished before the kill: start over, kill sooner
            p.communicate()
            shutil.rmtree(dest)
            full *= 0.7
            kills = 0
            continue
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        kills += 1
        if os.path.isdir(adir):
            _assert_no_fake_complete_part(adir)
    p = subprocess.run(_cmd(src, dest), capture_output=True, check=False)
    if p.returncode == 2 and b"already holds a complete archive" in p.stderr:
        pass            # the last uninterrupted start finished the job
    else:
        assert p.returncode == 0, (seed, p.stderr)
    assert kills >= 1, f"seed {seed}: never killed mid-run"
    v = subprocess.run([sys.executable, "-m", "vacate", "verify", adir, "--against", src,
                        "--json"], capture_output=True, check=False)
    assert v.returncode == 0, (seed, v.stdout[-3000:])
    out = str(tmp_path / "out")
    stock_restore(adir, out)
    assert sha256sum_check(adir, out).returncode == 0
    assert snapshot_diff(before, snapshot(os.path.join(out, "src"))) == [], seed
    assert not [n for n in os.listdir(adir) if n.startswith(".")]
    # the resumed archive holds the same entries as one written in a single run
    def entries(d):
        with open(os.path.join(d, "MANIFEST.jsonl")) as f:
            return sorted((e["path"], e.get("sha256")) for e in
                          map(json.loads, f.read().splitlines()[1:]))
    assert entries(adir) == entries(os.path.join(str(tmp_path / "ref"), "bk"))


def _killed_after_parts(src: str, dest: str, n: int) -> str:
    """Start an archive of ``src`` and kill it (SIGKILL) once ``n`` parts are there; returns
    the archive's directory."""
    adir = os.path.join(dest, "bk")
    p = subprocess.Popen(_cmd(src, dest), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        parts = os.listdir(adir) if os.path.isdir(adir) else []
        if sum(x.startswith("part-") for x in parts) >= n:
            break
        time.sleep(0.005)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    return adir


@pytest.mark.slow
def test_resume_skips_completed_parts(tmp_path):
    """Kill after some parts are done: the rerun reports them as resumed, not rewritten."""
    src = _tree(str(tmp_path))
    dest = str(tmp_path / "dest")
    adir = _killed_after_parts(src, dest, 3)
    done = {n: os.stat(os.path.join(adir, n)).st_mtime_ns for n in os.listdir(adir)
            if n.startswith("part-")}
    r = subprocess.run(_cmd(src, dest), capture_output=True, check=False)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["resumed_parts"] >= 3
    for n, mt in sorted(done.items())[:doc["resumed_parts"]]:
        assert os.stat(os.path.join(adir, n)).st_mtime_ns == mt     # untouched
    assert run("sha256sum", "-c", "PARTS.SHA256SUMS", cwd=adir).returncode == 0


def _as_earlier_vacate_wrote_it(side: str) -> None:
    """A sidecar in the form vacate wrote before its entries were streamed: one JSON object,
    the part's entries in it, no SHA256SUMS lines, no newline."""
    with open(side, "rb") as f:
        head = json.loads(f.readline())
        entries = [json.loads(f.readline()) for _ in range(head["part"]["entries"])]
    doc = {"part": head["part"], "inodes": head["inodes"], "entries": entries}
    with open(side, "w") as f:
        f.write(json.dumps(doc))


@pytest.mark.slow
def test_a_run_interrupted_under_an_earlier_sidecar_form_resumes(tmp_path):
    """The interrupted run's sidecars hold their entries in one JSON object (vacate before
    the writer streamed them): the rerun resumes after its parts, to the archive one run
    makes."""
    src = _tree(str(tmp_path))
    os.link(os.path.join(src, "dir0", "f001.bin"), os.path.join(src, "dir5", "z-link.bin"))
    ref = subprocess.run(_cmd(src, str(tmp_path / "ref")), capture_output=True, check=False)
    assert ref.returncode == 0, ref.stderr
    dest = str(tmp_path / "dest")
    adir = _killed_after_parts(src, dest, 4)
    state = os.path.join(adir, ".vacate-partial")
    sides = [n for n in os.listdir(state) if n.startswith("part-")]
    for n in sides:
        _as_earlier_vacate_wrote_it(os.path.join(state, n))
    r = subprocess.run(_cmd(src, dest), capture_output=True, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["resumed_parts"] >= 3
    for name in ("MANIFEST.jsonl", "SHA256SUMS", "PARTS.SHA256SUMS"):
        with open(os.path.join(adir, name), "rb") as a, \
                open(os.path.join(str(tmp_path / "ref"), "bk", name), "rb") as b:
            got, want = a.read().split(b"\n"), b.read().split(b"\n")
        if name == "MANIFEST.jsonl":        # the time each run started differs
            got[0], want[0] = (json.dumps({**json.loads(x), "created": ""}).encode()
                               for x in (got[0], want[0]))
        assert got == want, name
    assert run("sha256sum", "-c", "PARTS.SHA256SUMS", cwd=adir).returncode == 0
    out = str(tmp_path / "out")
    stock_restore(adir, out)
    assert sha256sum_check(adir, out).returncode == 0
