"""``vacate check`` on a host where a FUSE filesystem does not answer (its daemon stopped, as
with a dead ``sshfs``): the check of another volume still finishes in bounded time with the
full answer, and a check of the dead filesystem itself says "could not tell" (exit 3)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from harness.fusefs import can_fuse, fuse_mount, stopped
from harness.holders import Holders
from harness.volumes import can_loop_mount, make_volume

pytestmark = pytest.mark.root
ENTRY = "import sys; from vacate.cli.main import entry; entry()"
LIMIT_S = 30          # what a hang is, for this test (the deadline inside vacate is ~4 s)


def vacate(*argv: str, limit: float = LIMIT_S) -> tuple[int, str, str, float]:
    """Run the CLI as a user does, in its own session; a run past ``limit`` seconds is killed
    and fails the test (a hang)."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", ENTRY, *argv], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail(f"vacate {' '.join(argv)} did not finish in {limit} s")
    return p.returncode, out, err, time.monotonic() - t0


@pytest.fixture
def dead_fuse():
    """A FUSE filesystem with holders of every kind on it, then its daemon stopped:
    (mountpoint, {label: pid})."""
    if not can_fuse():
        pytest.skip("needs root, /dev/fuse, fusermount and mfusepy")
    top = tempfile.mkdtemp(prefix="vacate-fuse-")
    mnt = os.path.join(top, "mnt")
    os.mkdir(mnt)
    h = Holders(mnt)
    try:
        with fuse_mount(mnt) as daemon:
            with open(f"{mnt}/a", "w") as f:
                f.write("remote bytes\n")
            pids = {"fd": h.fd(f"{mnt}/a"), "cwd": h.cwd(mnt), "deleted": h.deleted(f"{mnt}/b")}
            flag = os.path.join(h.tmp, "ns.ready")
            # in a mount namespace of its own: its links are read by their mount, not by name
            pids["other-ns"] = h.spawn("ns", [
                "unshare", "-m", "--propagation", "private", "bash", "-c",
                f"exec 3<'{mnt}/a'; cd '{mnt}' && : > '{flag}' && exec sleep 1d"], ready=flag)
            with stopped(daemon):
                time.sleep(0.2)
                yield mnt, pids
    finally:
        h.close()
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def volume():
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4")
    h = Holders(v.mountpoint)
    try:
        with open(f"{v.mountpoint}/data.bin", "wb") as f:
            f.write(os.urandom(4096))
        yield v, h, h.fd(f"{v.mountpoint}/data.bin")
    finally:
        h.close()
        v.close()


def _pids(doc: dict) -> set[int]:
    return {c["pid"] for c in doc["consumers"] if c["type"] == "process"}


def test_other_volume_is_checked_in_bounded_time(volume, dead_fuse):
    v, _h, holder = volume
    _mnt, fuse_pids = dead_fuse
    rc, out, err, took = vacate("check", "--json", v.mountpoint)
    assert rc == 1, err
    doc = json.loads(out)
    assert doc["verdict"]["safe_to_unmount"] is False
    assert holder in _pids(doc)
    # the processes on the dead filesystem are not on this volume, and the kernel told so
    # without asking the filesystem: nothing about them is unknown
    assert not _pids(doc) & set(fuse_pids.values())
    assert doc["verdict"]["unknowns"] == []
    assert took < 15, f"took {took:.1f} s"


def test_other_volume_no_scan(volume, dead_fuse):
    v, _h, holder = volume
    rc, out, err, took = vacate("check", "--json", "--no-scan", "--no-config", v.mountpoint)
    assert rc == 1, err
    assert holder in _pids(json.loads(out))
    assert took < 15


@pytest.mark.slow
@pytest.mark.parametrize("where", ["", "sub/dir"])
def test_dead_filesystem_itself_cannot_be_told(dead_fuse, where):
    mnt, _ = dead_fuse
    path = os.path.join(mnt, where) if where else mnt
    rc, out, err, took = vacate("check", "--json", path)
    assert rc == 3, (out, err)
    # a script still gets the document: "could not tell", the mount named, the reason given
    doc = json.loads(out)
    assert doc["schema"] == "vacate.check/1"
    assert doc["verdict"]["safe_to_unmount"] is None and doc["verdict"]["blockers"] == []
    assert doc["target"]["mountpoint"] == mnt and doc["target"]["fstype"].startswith("fuse")
    assert doc["target"]["path"] == path and doc["consumers"] == [] and doc["items"] == []
    (why,) = doc["warnings"]
    assert why["code"] == "filesystem-not-answering" and why["blocks_verdict"] is True
    assert doc["verdict"]["unknowns"] == [why]
    assert "does not answer" in err and mnt in err
    assert took < 15, f"took {took:.1f} s"


def test_dead_filesystem_nested_in_volume(volume):
    """A dead FUSE mount below the volume: bounded time, and never "safe"."""
    if not can_fuse():
        pytest.skip("needs root, /dev/fuse, fusermount and mfusepy")
    v, h, _holder = volume
    h.stop("fd")                  # no holder: only the dead mount could make it "not safe"
    sub = os.path.join(v.mountpoint, "net")
    os.mkdir(sub)
    with fuse_mount(sub) as daemon, stopped(daemon):
        time.sleep(0.2)
        rc, out, err, took = vacate("check", "--json", "--no-config", v.mountpoint, limit=12)
    assert rc in (1, 3), (out, err)
    doc = json.loads(out)
    assert doc["verdict"]["safe_to_unmount"] is not True
    assert took < 15


@pytest.mark.slow
def test_loop_device_on_dead_fuse_is_a_warning(volume):
    """A loop device set up from another mount namespace (its path means nothing here) on a
    file of the dead filesystem: asking the kernel about its backing file would block; it
    is left out with a warning, and the volume, which answered, is still judged."""
    if not can_fuse():
        pytest.skip("needs root, /dev/fuse, fusermount and mfusepy")
    v, _h, holder = volume
    top = tempfile.mkdtemp(prefix="vacate-fuse-")
    mnt = os.path.join(top, "mnt")
    os.mkdir(mnt)
    dev = ""
    try:
        with fuse_mount(mnt) as daemon:
            with open(f"{mnt}/img", "wb") as f:
                f.write(bytes(1 << 20))
            dev = subprocess.run(
                ["unshare", "-m", "--propagation", "private", "sh", "-c",
                 (f"mkdir '{top}/ns' && mount --bind '{mnt}' '{top}/ns' && "
                  f"losetup -r -f --show '{top}/ns/img'")],
                capture_output=True, text=True, check=True).stdout.strip()
            try:
                with stopped(daemon):
                    time.sleep(0.2)
                    rc, out, err, took = vacate("check", "--json", "--no-config", v.mountpoint)
            finally:
                subprocess.run(["losetup", "-d", dev], capture_output=True, check=False)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert rc == 1, err
    doc = json.loads(out)
    assert holder in _pids(doc)
    warned = [w for w in doc["warnings"] if w["code"] == "unanswered-loop"]
    assert [w["path"] for w in warned] == [dev]
    assert doc["verdict"]["unknowns"] == []
    assert took < 15, f"took {took:.1f} s"


def test_dead_filesystem_in_a_home_dir(volume):
    """A dead sshfs in root's home (where people mount them): the search for symlinks into
    the volume must not enter it."""
    if not can_fuse():
        pytest.skip("needs root, /dev/fuse, fusermount and mfusepy")
    v, _h, holder = volume
    top = tempfile.mkdtemp(prefix="vacate-fuse-", dir="/root")
    mnt = os.path.join(top, "mnt")
    os.mkdir(mnt)
    try:
        with fuse_mount(mnt) as daemon, stopped(daemon):
            time.sleep(0.2)
            rc, out, err, _ = vacate("check", "--json", "--no-scan", v.mountpoint, limit=12)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert rc == 1, err
    assert holder in _pids(json.loads(out))
