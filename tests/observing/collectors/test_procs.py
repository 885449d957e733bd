"""Live users on real loop volumes (ext4, xfs, btrfs with a subvolume): one holder process of
each access kind; vacate must find each with the right access kind and the host path, and find
everything ``fuser -vm`` and ``lsof`` find."""

import os
import re
import subprocess

import pytest
from harness.holders import Holders
from harness.volumes import can_loop_mount, make_volume

from vacate.observing.collectors import kernel, mounts, procs
from vacate.observing.host import Host
from vacate.output.next_steps import for_consumer as said

pytestmark = pytest.mark.root


@pytest.fixture(scope="module", params=["ext4", "xfs", "btrfs"])
def held(request):
    """A volume with one holder of every kind, the pids by label, and what vacate found."""
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    fs = request.param
    v = make_volume(fs)
    h = Holders(v.mountpoint)
    try:
        m = v.mountpoint
        for d in ("db", "work"):
            os.makedirs(os.path.join(m, d))
        with open(f"{m}/db/data.txt", "w") as f:
            f.write("line\n" * 2000)
        with open(f"{m}/db/blob.bin", "wb") as f:
            f.write(os.urandom(8192))
        with open(f"{m}/work/app.log", "w") as f:
            f.write("start\n")
        h.fd(f"{m}/db/data.txt")
        h.writer(f"{m}/work/app.log")
        h.py_mmap(f"{m}/db/blob.bin")
        h.mmap_only(f"{m}/db/data.txt")
        h.shared_lib(f"{m}/lib")
        h.cwd(f"{m}/work")
        h.exe(f"{m}/bin")
        h.deleted(f"{m}/db/scratch.tmp")
        _, ns_where = h.private_ns_bind(f"{m}/work", "app.log")
        if fs == "btrfs":
            subprocess.run(["btrfs", "-q", "subvolume", "create", f"{m}/subvol-129-disk-0"],
                           check=True)
            with open(f"{m}/subvol-129-disk-0/f", "w") as f:
                f.write("x" * 5000)
            h.sh("subvolfd", f"exec 3<'{m}/subvol-129-disk-0/f'")
            h.spawn("subvolmmap", ["python3", "-c", __import__("harness.holders").holders.MMAP_ONLY,
                                   f"{m}/subvol-129-disk-0/f", h._flag("subvolmmap")],
                    ready=h._flag("subvolmmap"))
        target = mounts.resolve_target(m)
        found = procs.collect(Host.local(), target)
        pids = {label: p.pid for label, p in h.procs.items()}
        yield fs, m, target, found, pids, ns_where, h
    finally:
        h.close()
        v.close()


def _by_pid(found):
    return {c.attrs.pid: c for c in found.consumers}


EXPECT = {   # label: (access kinds that must be there, path below the volume, deleted)
    "fd": ({"fd"}, "db/data.txt", False),
    "writer": ({"fd"}, "work/app.log", False),
    "pymmap": ({"fd", "mmap"}, "db/blob.bin", False),
    "mmaponly": ({"mmap"}, "db/data.txt", False),
    "lib": ({"mmap"}, "lib/libc.so.6", False),
    "cwd": ({"cwd"}, "work", False),
    "exe": ({"exe", "mmap"}, "bin/sleeper", False),
    "deleted": ({"fd"}, "db/scratch.tmp", True),
    "nsbind": ({"fd", "cwd"}, "work/app.log", False),
    "subvolfd": ({"fd"}, "subvol-129-disk-0/f", False),
    "subvolmmap": ({"mmap"}, "subvol-129-disk-0/f", False),
}


@pytest.mark.parametrize("label", sorted(EXPECT))
def test_each_holder_found_with_access_and_host_path(held, label):
    fs, m, _t, found, pids, _w, _h = held
    if label not in pids:
        pytest.skip(f"{label} only on btrfs")
    access, rel, deleted = EXPECT[label]
    c = _by_pid(found).get(pids[label])
    assert c is not None, f"{label} (pid {pids[label]}) not found on {fs}"
    assert access <= set(c.attrs.access)
    want = os.path.join(m, rel)
    assert want in c.paths
    assert (want in c.attrs.deleted_paths) is deleted
    assert c.id == f"process:{pids[label]}:{c.attrs.start_time}"


def test_mapping_only_holder_has_no_fd(held):
    _fs, _m, _t, found, pids, _w, _h = held
    c = _by_pid(found)[pids["mmaponly"]]
    assert c.attrs.access == ["mmap"]


def test_writer_is_marked_writing(held):
    _fs, _m, _t, found, pids, _w, _h = held
    by = _by_pid(found)
    assert by[pids["writer"]].attrs.writing is True
    assert by[pids["fd"]].attrs.writing is False


def test_private_namespace_paths_translated(held):
    """The namespaced process sees only a bind of work/ at a path of its own; its evidence
    keeps that path, its consumer paths are the host's."""
    _fs, m, _t, found, pids, ns_where, _h = held
    c = _by_pid(found)[pids["nsbind"]]
    assert set(c.paths) == {f"{m}/work", f"{m}/work/app.log"}
    assert any(e.detail == f"{ns_where}/app.log" for e in c.evidence)


def test_bind_in_private_namespace_is_a_kernel_user(held):
    _fs, m, target, found, pids, ns_where, _h = held
    cons, problems = kernel.collect(Host.local(), target, found.namespaces)
    ms = [c for c in cons if c.type == "mount" and c.attrs.mountpoint == ns_where]
    assert len(ms) == 1 and ms[0].paths == (f"{m}/work",)
    assert said(ms[0]) == f"nsenter -t {pids['nsbind']} -m umount {ns_where}"
    assert not [p for p in problems if p.blocks_verdict]


def test_only_expected_problems(held):
    _fs, _m, _t, found, _p, _w, _h = held
    assert {p.code for p in found.problems} <= {"pid1-unreadable"}


def test_user_cmdline_and_identity(held):
    _fs, m, _t, found, pids, _w, _h = held
    c = _by_pid(found)[pids["exe"]]
    assert c.attrs.user == "root" and c.attrs.uid == 0
    assert c.attrs.cmdline == f"{m}/bin/sleeper 1d"
    with open(f"/proc/{pids['exe']}/stat", "rb") as f:
        data = f.read()
    assert c.attrs.start_time == int(data[data.rfind(b")") + 2:].split()[19])


def _fuser_pids(m):
    r = subprocess.run(["fuser", "-m", m], check=False, capture_output=True, text=True)
    return {int(x) for x in re.findall(r"\d+", r.stdout)}


def _lsof_pids(m):
    r = subprocess.run(["lsof", "-t", "-n", "--", m], check=False,
                       capture_output=True, text=True)
    return {int(x) for x in r.stdout.split()}


def test_finds_everything_fuser_and_lsof_find_and_more(held):
    fs, m, _t, found, pids, _w, _h = held
    ours = set(_by_pid(found))
    fuser, lsof = _fuser_pids(m), _lsof_pids(m)
    me = os.getpid()
    assert (fuser - {me}) <= ours, f"fuser found {sorted(fuser - ours)} that vacate missed"
    assert (lsof - {me}) <= ours, f"lsof found {sorted(lsof - ours)} that vacate missed"
    assert set(pids.values()) <= ours
    # ... and more: on btrfs both miss the holders inside the subvolume (its own st_dev)
    if fs == "btrfs":
        assert {pids["subvolfd"], pids["subvolmmap"]} - fuser
        assert {pids["subvolfd"], pids["subvolmmap"]} - lsof


def test_an_unreadable_pid_1_is_said_in_words_a_user_can_act_on():
    """Issue 31: "the host's init is unreadable here" left a user asking what it means for
    the verdict and what to do."""
    from vacate.observing.collectors.procs import _Pass
    from vacate.observing.host import Host

    p = _Pass(Host(), None, (0, 0), (), (), None)
    p.denied(1, PermissionError(13, "Permission denied"))
    (note,) = p.problems
    assert note.code == "pid1-unreadable" and not note.blocks_verdict
    said = note.message
    assert "PID 1" in said and "Permission denied" in said
    assert "verdict does not wait" in said                 # what it means for the answer
    assert "run vacate where PID 1 can be read" in said    # what to do about it
