"""The /proc pass on a captured tree (a Host pointing at a directory): what cannot exist here
(NVIDIA GPUs, a Proxmox CT, a docker container) laid out as the kernel shows it, and NVML
through a fake with pynvml's functions."""

import json
import os

import pytest
from harness.nvml import FakeNVML

from vacate.observing.collectors import procs
from vacate.observing.host import Host
from vacate.observing.model.mount import Target
from vacate.observing.parsers import mountinfo
from vacate.output.next_steps import for_consumer as said

MOUNTINFO = (
    "22 1 259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw\n"
    "95 22 0:52 /subvol-129-disk-0 /data rw,noatime - zfs scratch/subvol-129-disk-0 rw,xattr\n"
)
DOCKER_ID = "4f2a1d6c9b8e7f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182"


def _proc(root, pid, comm, *, cgroup, fds=(), maps="", cwd="/", exe="/usr/bin/python3.11",
          uid=1000, start=4242):
    d = os.path.join(root, "proc", str(pid))
    os.makedirs(os.path.join(d, "fd"))
    os.makedirs(os.path.join(d, "ns"))
    fields = ["S", "1", str(pid), str(pid), "0", "-1", "4194560"] + ["0"] * 12 + [str(start)]
    with open(os.path.join(d, "stat"), "w") as f:
        f.write(f"{pid} ({comm}) " + " ".join(fields) + " 0 0\n")
    with open(os.path.join(d, "cmdline"), "wb") as f:
        f.write(b"python3\0-m\0sglang.launch_server\0--model-path\0/data/models/qwen\0"
                b"--api-key\0sk-abcdefghijklmnopqrstuvwxyz012345\0")
    with open(os.path.join(d, "status"), "w") as f:
        f.write(f"Name:\t{comm}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    with open(os.path.join(d, "cgroup"), "w") as f:
        f.write(cgroup)
    with open(os.path.join(d, "maps"), "w") as f:
        f.write(maps)
    for n, target in enumerate(fds):
        os.symlink(target, os.path.join(d, "fd", str(n)))
    os.symlink("/", os.path.join(d, "root"))
    os.symlink(cwd, os.path.join(d, "cwd"))
    os.symlink(exe, os.path.join(d, "exe"))
    os.symlink("mnt:[4026531841]", os.path.join(d, "ns", "mnt"))


@pytest.fixture
def captured(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "proc", "self"))
    with open(os.path.join(root, "proc", "self", "mountinfo"), "w") as f:
        f.write(MOUNTINFO)
    os.makedirs(os.path.join(root, "etc"))
    with open(os.path.join(root, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/bash\nml:x:1000:1000::/home/ml:/bin/bash\n")
    weights = "/data/models/qwen/model-00001-of-00005.safetensors"
    _proc(root, 2001, "python3", cgroup="0::/system.slice/sglang-qwen.service\n",
          fds=["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm",
               "socket:[123]", "/data/models/qwen/config.json"],
          maps=f"7f0000000000-7f0010000000 r--s 00000000 00:34 131 {weights}\n"
               "7f2000000000-7f2000001000 r-xp 00000000 103:02 77 /usr/lib/libc.so.6\n")
    _proc(root, 2002, "python3", cgroup="0::/lxc/129/ns/system.slice/trainer.service\n",
          fds=["/data/eagle3/out/ckpt.pt (deleted)"], uid=100000)
    _proc(root, 2003, "node", cgroup=f"0::/system.slice/docker-{DOCKER_ID}.scope\n",
          fds=["/srv/other/file"], cwd="/data/work")
    _proc(root, 2004, "bash", cgroup="0::/user.slice/user-1000.slice/session-3.scope\n",
          fds=["/dev/nvidia2"], cwd="/home/ml")
    ddir = os.path.join(root, "var", "lib", "docker", "containers", DOCKER_ID)
    os.makedirs(ddir)
    with open(os.path.join(ddir, "config.v2.json"), "w") as f:
        json.dump({"Name": "/web", "ID": DOCKER_ID}, f)
    ms, _ = mountinfo.parse(MOUNTINFO)
    target = Target("/data", ms[1], 0, None, None, None, False, "noatime", "scratch/subvol-129-disk-0",
                    (), ())
    return Host.under(root), target




def test_captured_tree_holders(captured):
    host, target = captured
    nv = FakeNVML()
    found = procs.collect(host, target, nvml=nv)
    by = {c.attrs.pid: c for c in found.consumers}
    assert set(by) == {2001, 2002, 2003}          # 2004 holds a GPU but nothing on /data
    q = by[2001]
    assert q.attrs.unit == "sglang-qwen.service" and q.attrs.container is None
    assert q.attrs.access == ["fd", "mmap"]
    assert q.attrs.user == "ml"
    assert "/data/models/qwen/model-00001-of-00005.safetensors" in q.paths
    assert "sk-abcdef" not in q.attrs.cmdline and "--model-path /data/models/qwen" in \
        q.attrs.cmdline
    assert [g["index"] for g in q.attrs.gpus] == [0, 1]      # not nvidiactl / nvidia-uvm
    assert q.attrs.gpus[1]["name"] == "NVIDIA H100 80GB HBM3"
    assert q.attrs.gpus[1]["memory_bytes"] == 41 * 2**30
    assert q.attrs.gpus[0]["uuid"] == "GPU-00000000"
    assert nv.calls == ["init", "shutdown"]
    ct = by[2002]
    assert ct.attrs.container == {"type": "lxc", "name": "129", "ctid": 129}
    assert ct.attrs.unit == "trainer.service"
    assert ct.attrs.deleted_paths == ["/data/eagle3/out/ckpt.pt"]
    assert ct.attrs.user is None                               # a shifted uid
    d = by[2003]
    assert d.attrs.access == ["cwd"] and d.paths == ("/data/work",)
    assert d.attrs.container == {"type": "docker", "name": DOCKER_ID, "docker_name": "web"}


def test_nvml_absent_keeps_device_fds(captured):
    host, target = captured

    class Broken(FakeNVML):
        def nvmlInit(self):
            raise self.NVMLError("Driver Not Loaded")

    found = procs.collect(host, target, nvml=Broken())
    q = next(c for c in found.consumers if c.attrs.pid == 2001)
    assert q.attrs.gpus == [{"device": "/dev/nvidia0", "index": 0},
                               {"device": "/dev/nvidia1", "index": 1}]
    assert "Driver Not Loaded" in q.attrs.gpu_note


def test_next_actions_follow_unit_and_container(captured):
    host, target = captured
    found = procs.collect(host, target, nvml=FakeNVML())
    by = {c.attrs.pid: c for c in found.consumers}
    assert said(by[2001]) == "systemctl stop sglang-qwen.service"
    assert said(by[2002]) == "pct exec 129 --keep-env 0 -- systemctl stop trainer.service"
    assert said(by[2003]) == "docker stop web"
