"""Container 129 of the story, for real: an LXC container started from a Proxmox-style
config, its ``mp0`` a loop-mounted volume at /data, a process mmapping the model there."""

from __future__ import annotations

import contextlib
import json
import os

import pytest

from harness import pve, systemd_box
from harness.volumes import can_loop_mount, make_volume

MODEL = "models/Qwen3.5-397B-A17B-NVFP4"

SERVE = """import mmap, sys, time
f = open(sys.argv[1], 'rb')
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
f.close()
time.sleep(100000)
"""

CONF = """arch: amd64
cores: 32
features: nesting=1
hostname: sglang
memory: 262144
mp0: {volume},mp=/data,backup=0
net0: name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:21:07,ip=10.1.230.174/24,type=veth
ostype: debian
rootfs: local:129/subvol-129-disk-0.subvol,size=64G
swap: 0
unprivileged: 0
"""

STORAGE = """dir: local
\tpath {root}
\tcontent iso,vztmpl,backup,rootdir,images
"""


ZFSPOOL = """
zfspool: scratch
\tpool {pool}
\tcontent rootdir,images
\tmountpoint {mnt}
"""


class _DatasetVolume:
    """A zfs-fuse dataset as the volume: its mountpoint; closed with its pool."""

    def __init__(self, mountpoint: str):
        self.mountpoint = mountpoint

    def close(self) -> None:
        import subprocess

        subprocess.run(["chattr", "-i", self.mountpoint], capture_output=True, check=False)


def why_not() -> str | None:
    if not can_loop_mount():
        return "needs root and losetup"
    if not systemd_box.available():
        return "needs systemd and cgroups for a container"
    return pve.why_not()


@contextlib.contextmanager
def container_129(tmp_path, shared=None, files=None, qwen=None, binds=(), volume=None,
                  pool=None):
    """Container 129 serving the model from the volume at ``/data``; ``shared``: a host
    directory that is the container's ``mp1`` at ``/shared`` as well; ``volume``: the
    arguments of its volume's ``make_volume`` (a bigger one); ``files``: more files
    of the container's ``/etc/systemd/system`` (name -> text; ``->`` makes a symlink);
    ``qwen``: the server's unit, when not the story's; ``binds``: more (host directory,
    directory) bind-mounted inside the container only, over a directory the host has (the
    container's own files where it would share the host's). Yields (volume, host, box,
    config). ``pool``: a zfs-fuse pool (tests/harness/zfs_pool.py) whose dataset
    ``subvol-129-disk-0`` is the volume instead, ``mp0: scratch:subvol-129-disk-0`` on
    zfspool storage ``scratch``, as the story has it (the volume is then that dataset's
    mountpoint)."""
    why = why_not()
    if why:
        pytest.skip(why)
    vol = make_volume("ext4", **(volume or {})) if pool is None else \
        _DatasetVolume(pool.create("subvol-129-disk-0"))
    m = vol.mountpoint
    os.makedirs(f"{m}/{MODEL}")
    with open(f"{m}/{MODEL}/config.json", "w") as f:
        json.dump({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe"}, f)
    with open(f"{m}/{MODEL}/model-00001-of-00001.safetensors", "wb") as f:
        f.write(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      " + os.urandom(1 << 16))
    os.makedirs(f"{m}/eagle3/draft-ckpt")
    with open(f"{m}/eagle3/draft-ckpt/weights.bin", "wb") as f:
        f.write(os.urandom(4096))
    host = pve.make(str(tmp_path))
    made_data = not os.path.exists("/data")
    if made_data:
        os.mkdir("/data")          # an empty mount point on the host; the bind is the box's
    made_shared = shared is not None and not os.path.exists("/shared")
    if made_shared:
        os.mkdir("/shared")
    # the container's root filesystem on a dir storage, as the host has it when it is stopped
    rootfs = tmp_path / "vz" / "images" / "129" / "subvol-129-disk-0.subvol"
    units = rootfs / "etc" / "systemd" / "system"
    os.makedirs(units / "multi-user.target.wants")
    host.write_storage(STORAGE.format(root=tmp_path / "vz") + (
        "" if pool is None else ZFSPOOL.format(pool=pool.name, mnt=pool.mountpoint)))
    text = CONF.format(volume=m if pool is None else "scratch:subvol-129-disk-0")
    if pool is not None:
        text = text.replace(",backup=0\n", "\n")
    if shared is not None:
        text = text.replace("\nnet0:", f"\nmp1: {shared},mp=/shared,backup=0\nnet0:")
    conf = host.write_ct(129, text)
    kimi = ("[Unit]\nDescription=SGLang Kimi with an EAGLE-3 draft\n[Service]\n"
            "ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path "
            "/data/models/Kimi-K2 --speculative-draft-model-path /data/eagle3/draft-ckpt\n"
            "[Install]\nWantedBy=multi-user.target\n")
    (units / "sglang-kimi.service").write_text(kimi)
    binds = ((m, "/data"),) + (((shared, "/shared"),) if shared is not None else ()) + \
        tuple(binds)
    box = None
    try:
        box = systemd_box.start_box(
            {"sglang-qwen.service": qwen or (
                "[Unit]\nDescription=SGLang Qwen3.5 NVFP4\n[Service]\n"
                f"ExecStart=/usr/bin/python3 /etc/systemd/system/serve.py "
                f"/data/{MODEL}/model-00001-of-00001.safetensors\n"),
             "sglang-kimi.service": kimi},
            files={"serve.py": SERVE, **(files or {})}, enable=("sglang-qwen.service",),
            cgroup="lxc.payload.129", binds=binds)
        host.running(129, box.pid1)
        yield vol, host, box, conf
    finally:
        if box is not None:
            box.close()
        host.close()
        if made_data:
            os.rmdir("/data")
        if made_shared:
            os.rmdir("/shared")
        vol.close()


def _wait_serving(box, timeout: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = box.systemctl("is-active", "sglang-qwen.service")
        if r.stdout.strip() == "active":
            time.sleep(0.5)         # the server maps its shard
            return
        time.sleep(0.2)
    raise AssertionError("sglang-qwen did not start in the box")
