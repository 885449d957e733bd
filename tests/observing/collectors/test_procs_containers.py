"""Processes inside real LXC containers, found from the host: one container binds the volume
at /data (its init holds a file there and works in a directory there), one has its rootfs on
the volume. Their container-relative paths must come back as host paths."""

import os
import re
import subprocess

import pytest

from vacate.observing.collectors import kernel, mounts, procs
from vacate.observing.host import Host

pytestmark = [pytest.mark.root, pytest.mark.slow]

HOLD = "#!/bin/sh\ncd /data/work\nexec 3</data/db/data.txt\nexec sleep infinity\n"


@pytest.fixture(scope="module")
def boxes():
    from harness.lxc_box import lxc_available, make_box
    from harness.volumes import make_volume
    if not lxc_available():
        pytest.skip("needs root and LXC (apt package lxc)")
    made = []
    try:
        vol = make_volume("ext4", size_mb=320)
        made.append(vol)
        m = vol.mountpoint
        os.makedirs(f"{m}/db")
        os.makedirs(f"{m}/work")
        with open(f"{m}/db/data.txt", "w") as f:
            f.write("x\n" * 1000)
        bind = make_box(extra=[f"lxc.mount.entry = {m} data none bind,create=dir 0 0",
                               "lxc.init.cmd = /hold.sh"])
        made.insert(0, bind)
        with open(f"{bind.rootfs}/hold.sh", "w") as f:
            f.write(HOLD)
        os.chmod(f"{bind.rootfs}/hold.sh", 0o755)
        onvol = make_box(rootfs_dir=f"{m}/images/130/rootfs")
        made.insert(0, onvol)
        pid_bind, pid_onvol = bind.start(), onvol.start()
        target = mounts.resolve_target(m)
        found = procs.collect(Host.local(), target)
        yield m, target, found, bind, pid_bind, onvol, pid_onvol
    finally:
        for x in made:
            x.close()


def test_container_process_with_host_paths(boxes):
    m, _t, found, bind, pid_bind, _o, _p = boxes
    c = next(c for c in found.consumers if c.attrs.pid == pid_bind)
    assert c.attrs.container == {"type": "lxc", "name": bind.name}
    assert {"fd", "cwd"} <= set(c.attrs.access)
    assert {f"{m}/db/data.txt", f"{m}/work"} <= set(c.paths)
    # the evidence keeps what the container sees
    assert any(e.detail == "/data/db/data.txt" for e in c.evidence)


def test_container_with_rootfs_on_the_volume(boxes):
    m, _t, found, _b, _pb, onvol, pid_onvol = boxes
    c = next(c for c in found.consumers if c.attrs.pid == pid_onvol)
    assert c.attrs.container["name"] == onvol.name
    assert {"root", "exe"} <= set(c.attrs.access)
    assert f"{m}/images/130/rootfs" in c.paths


def test_containers_listed_for_the_configured_audit(boxes):
    _m, _t, found, bind, pid_bind, onvol, pid_onvol = boxes
    roots = {(r.type, r.name): r.init_pid for r in found.containers}
    assert roots[("lxc", bind.name)] == pid_bind
    assert roots[("lxc", onvol.name)] == pid_onvol


def test_container_mounts_are_kernel_users(boxes):
    m, target, found, _b, _pid_bind, _o, _p = boxes
    cons, problems = kernel.collect(Host.local(), target, found.namespaces)
    data = [c for c in cons if c.type == "mount" and c.attrs.mountpoint == "/data"]
    assert data and data[0].paths == (m,)
    assert not [p for p in problems if p.blocks_verdict]


def test_finds_what_fuser_and_lsof_find(boxes):
    m, _t, found, _b, pid_bind, _o, pid_onvol = boxes
    ours = {c.attrs.pid for c in found.consumers}
    fuser = subprocess.run(["fuser", "-m", m], capture_output=True, text=True, check=False)
    lsof = subprocess.run(["lsof", "-t", "-n", "--", m], capture_output=True, text=True,
                          check=False)
    theirs = {int(x) for x in re.findall(r"\d+", fuser.stdout)} | \
        {int(x) for x in lsof.stdout.split()}
    assert theirs - {os.getpid()} <= ours
    assert {pid_bind, pid_onvol} <= ours


@pytest.fixture(scope="module")
def docker_held():
    from harness.docker_box import IMAGE, docker_available, start_daemon
    from harness.volumes import make_volume
    if not docker_available():
        pytest.skip("needs root and docker.io")
    made = []
    try:
        vol = make_volume("ext4")
        made.append(vol)
        m = vol.mountpoint
        os.makedirs(f"{m}/work")
        box = start_daemon()
        made.insert(0, box)
        box.import_image()
        cid = box.run("vol-holder", "-v", f"{m}:/data", "-w", "/data/work", IMAGE,
                      "sleep", "infinity")
        pid = int(box.inspect("vol-holder", "{{.State.Pid}}"))
        target = mounts.resolve_target(m)
        yield m, target, procs.collect(Host.local(), target), cid, pid
    finally:
        for x in made:
            x.close()


def test_docker_container_process_named_from_its_data_root(docker_held):
    m, _t, found, cid, pid = docker_held
    c = next(c for c in found.consumers if c.attrs.pid == pid)
    assert c.attrs.container == {"type": "docker", "name": cid, "docker_name": "vol-holder"}
    assert "cwd" in c.attrs.access and f"{m}/work" in c.paths
    from vacate.output.next_steps import for_consumer as said
    assert said(c) == "docker stop vol-holder"
