"""Kernel users on real volumes: a swap file, a loop device backed by a file on the volume, a
nested mount, a bind mount of a subdirectory elsewhere; active NFS exports from etab."""

import os
import subprocess
import tempfile

import pytest
from harness.holders import Holders
from harness.volumes import can_loop_mount, make_volume

from vacate.observing.collectors import kernel, mounts
from vacate.observing.host import Host
from vacate.observing.model.mount import Target
from vacate.observing.parsers import mountinfo
from vacate.output.next_steps import for_consumer as said


@pytest.fixture(params=["ext4", "xfs", "btrfs"])
def kvol(request):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume(request.param)
    h = Holders(v.mountpoint)
    bind_at = tempfile.mkdtemp(prefix="vacate-bind-")
    bound = False
    try:
        m = v.mountpoint
        os.makedirs(f"{m}/images")
        os.makedirs(f"{m}/shared")
        h.swapfile(f"{m}/swapfile", request.param)
        dev = h.loop_device(f"{m}/images/nested.img")
        nested = v.mount_tmpfs("scratch")
        subprocess.run(["mount", "--bind", f"{m}/shared", bind_at], check=True)
        bound = True
        yield v, dev, nested, bind_at
    finally:
        if bound:
            subprocess.run(["umount", bind_at], check=False)
        os.rmdir(bind_at)
        h.close()
        v.close()


@pytest.mark.root
def test_kernel_users_found_with_actions(kvol):
    v, dev, nested, bind_at = kvol
    m = v.mountpoint
    target = mounts.resolve_target(m)
    cons, problems = kernel.collect(Host.local(), target)
    by = {c.id: c for c in cons}
    swap = by[f"swap:{m}/swapfile"]
    assert swap.live and swap.paths == (f"{m}/swapfile",)
    assert said(swap) == f"swapoff {m}/swapfile"
    loop = by[f"loop-device:{dev}"]
    assert loop.paths == (f"{m}/images/nested.img",)
    assert said(loop) == f"losetup -d {dev}"
    nest = [c for c in cons if c.type == "mount" and c.attrs.nested]
    assert [c.name for c in nest] == [nested]
    assert said(nest[0]) == f"umount {nested}"
    binds = [c for c in cons if c.type == "mount" and c.name == bind_at]
    assert len(binds) == 1 and binds[0].paths == (f"{m}/shared",)
    assert said(binds[0]) == f"umount {bind_at}"
    assert not problems
    # nothing else of the host is claimed (other loop devices, other swaps)
    assert {c.type for c in cons} == {"swap", "loop-device", "mount"}
    assert len([c for c in cons if c.type == "loop-device"]) == 1


@pytest.mark.root
def test_mounted_loop_device_action_unmounts_first(kvol):
    v, dev, _nested, _b = kvol
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    mp = tempfile.mkdtemp(prefix="vacate-loopmnt-")
    try:
        subprocess.run(["mount", dev, mp], check=True)
        try:
            target = mounts.resolve_target(v.mountpoint)
            cons, _ = kernel.collect(Host.local(), target)
            loop = next(c for c in cons if c.id == f"loop-device:{dev}")
            assert said(loop) == f"umount {mp} && losetup -d {dev}"
        finally:
            subprocess.run(["umount", mp], check=False)
    finally:
        os.rmdir(mp)


def test_nfs_etab_active_exports(tmp_path):
    """etab as nfs-utils writes it, on a captured tree."""
    root = tmp_path
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "self" / "mountinfo").write_text(
        "22 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
        "95 22 259:5 / /data rw - ext4 /dev/nvme1n1 rw\n")
    (root / "var" / "lib" / "nfs").mkdir(parents=True)
    (root / "var" / "lib" / "nfs" / "etab").write_text(
        "/data/eagle3\t10.0.0.0/24(rw,sync,wdelay,hide,nocrossmnt,secure,root_squash)\n"
        "/srv/other\t*(ro,sync)\n"
        "/data/models\\040x\tgpu1.lan(ro,sync)\n")
    ms, _ = mountinfo.parse((root / "proc" / "self" / "mountinfo").read_text())
    target = Target("/data", ms[1], 0, None, None, None, True, "", None, (), ())
    cons = kernel.nfs_active(Host.under(str(root)), target, ms)
    assert [(c.id, c.paths) for c in cons] == [
        ("nfs-export:etab:/data/eagle3:10.0.0.0/24", ("/data/eagle3",)),
        ("nfs-export:etab:/data/models x:gpu1.lan", ("/data/models x",)),
    ]
    assert said(cons[0]) == "exportfs -u 10.0.0.0/24:/data/eagle3"
    assert cons[0].live


def test_swaps_parse_escaped_and_deleted(tmp_path):
    root = tmp_path
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "self" / "mountinfo").write_text(
        "22 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
        "95 22 259:5 / /data rw - ext4 /dev/nvme1n1 rw\n")
    (root / "proc" / "swaps").write_text(
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/dev/nvme0n1p3                          partition\t8388604\t\t0\t\t-2\n"
        "/data/swap\\040file                     file\t\t65532\t\t1024\t\t-3\n"
        "/data/old.swap (deleted)                file\t\t65532\t\t0\t\t-4\n"
        "/swapfile                               file\t\t65532\t\t0\t\t-5\n")
    ms, _ = mountinfo.parse((root / "proc" / "self" / "mountinfo").read_text())
    target = Target("/data", ms[1], 0, None, None, None, True, "", None, (), ())
    cons = kernel.swaps(Host.under(str(root)), target, ms)
    assert [c.paths[0] for c in cons] == ["/data/swap file", "/data/old.swap"]
    assert cons[0].attrs.used_kb == 1024
    assert cons[1].evidence[0].deleted
