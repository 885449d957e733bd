"""The migrate story in a booted systemd box: a model server (a unit mmapping weights on the
volume), the plan that moves it to a destination, and what the box shows afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile

import pytest

from harness.systemd_box import start_box
from harness.waiting import wait_for
from vacate.flow.plan import plan as make_plan_file

PY = "/usr/bin/python3"

N = "[Unit]\nDefaultDependencies=no\n"

INSTALL = "[Install]\nWantedBy=vacate-box.target\n"

SERVER = ("import mmap, os, sys, time\n"
          "d = os.environ['MODEL']\n"
          "f = open(os.path.join(d, 'weights.bin'), 'rb')\n"
          "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
          "time.sleep(1e9)\n")


def unit_files(vol: str, work: str) -> dict:
    return {
        "qwen.service": f"{N}[Service]\nRestart=always\nRestartSec=0.1\n"
                        f"Environment=MODEL={vol}/models/qwen ADMIN_A=1\n"
                        f"ExecStart={PY} {work}/server.py\n{INSTALL}",
        # the admin's own drop-ins: vacate's must sort after both, and leave them alone
        "qwen.service.d/override.conf": "[Service]\nEnvironment=ADMIN_B=2\n",
        "qwen.service.d/50-limits.conf": "[Service]\nLimitNOFILE=4096\n",
    }


def mapped_under(path: str) -> set[int]:
    """Pids that map or hold a file under ``path``."""
    out = set()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/maps") as f:
                if any(f" {path}/" in line for line in f):
                    out.add(int(p))
        except OSError:
            continue
    return out


def box_cmd(b, *argv) -> subprocess.CompletedProcess:
    return subprocess.run(["nsenter", "-t", str(b.pid1), "-a", *argv], capture_output=True,
                          text=True, timeout=30, check=False)


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def model_on(vol: str, work: str, mb: int, shards: int = 0) -> None:
    """A model of ``mb`` MiB of weights (and ``shards`` more files) on the volume, and the
    server that maps it in ``work``."""
    os.makedirs(f"{vol}/models/qwen/sub")
    with open(f"{vol}/models/qwen/weights.bin", "wb") as f:
        f.write(os.urandom(mb << 20))
    for n in range(shards):
        with open(f"{vol}/models/qwen/shard-{n:02d}.bin", "wb") as f:
            f.write(os.urandom(256 << 10))
    with open(f"{vol}/models/qwen/config.json", "w") as f:
        f.write('{"architectures": ["Qwen3ForCausalLM"]}\n')
    os.link(f"{vol}/models/qwen/config.json", f"{vol}/models/qwen/sub/config.json")
    with open(f"{work}/server.py", "w") as f:
        f.write(SERVER)


@contextlib.contextmanager
def model_box(units, *, vol_mb: int, model_mb: int, shards: int = 0, dest: str = "shared",
              servers: int = 1, **box):
    """A booted systemd whose units (``units(vol, work)``: the box's files) serve a model on
    a loop volume, once ``servers`` processes map it: (box, volume, its mount point, an
    empty DEST under ``work``, work)."""
    from harness.volumes import can_loop_mount, make_volume
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4", size_mb=vol_mb)
    work = tempfile.mkdtemp(prefix="vacate-migrate-")
    try:
        vol = v.mountpoint
        model_on(vol, work, model_mb, shards)
        where = os.path.join(work, dest)
        os.makedirs(where)
        b = start_box(**units(vol, work), **box)
        try:
            wait_for(lambda: len(mapped_under(vol)) >= servers, "the servers to map the model")
            yield b, v, vol, where, work
        finally:
            b.close()
    finally:
        v.close()
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def story(request):
    """A booted systemd running qwen.service from a model on a loop volume (its
    ``request.param``, when given: how many more shard files the model has)."""
    with model_box(lambda vol, work: {"units": unit_files(vol, work)}, vol_mb=64, model_mb=3,
                   shards=getattr(request, "param", 0), dest="shared/models",
                   enable=("qwen.service",)) as got:
        yield got


def unit_text(b) -> str:
    with open(os.path.join(b.units_dir, "qwen.service")) as f:
        return f.read()


def plan_to(vol: str, dest: str, work: str) -> str:
    path = os.path.join(work, "plan.json")
    p = make_plan_file(vol, migrations={"models/qwen": dest}, outputs=(path,))
    with open(path, "w") as f:
        f.write(p.dumps())
    return path


@contextlib.contextmanager
def looked_at(v):
    """The retired volume mounted read-only elsewhere, to see what is left on it."""
    look = tempfile.mkdtemp(prefix="vacate-look-")
    try:
        subprocess.run(["mount", "-o", "ro", v.device, look], check=True)
        try:
            yield look
        finally:
            subprocess.run(["umount", look], check=True)
    finally:
        os.rmdir(look)
