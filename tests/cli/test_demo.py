"""`vacate demo`: builds the story's /data (loop-mounted ext4 as root, a directory otherwise),
shows what vacate says about it, and leaves nothing behind unless --keep."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess

import pytest
from safetensors import safe_open

from vacate import demo
from vacate.cli.env import Env
from vacate.cli.main import main


def run_demo(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(["demo", *args], Env(stdout=out, stderr=err))
    return rc, out.getvalue(), err.getvalue()


def loop_backing_files() -> str:
    return subprocess.run(["losetup", "--list", "-n", "-O", "BACK-FILE"], capture_output=True,
                          text=True, check=True).stdout


def test_tree_is_the_story(tmp_path):
    d = demo.create(str(tmp_path))
    try:
        root = d.path
        model = os.path.join(root, demo.MODEL_PATH)
        with open(os.path.join(model, "model.safetensors.index.json")) as f:
            index = json.load(f)
        shards = sorted(n for n in os.listdir(model) if n.endswith(".safetensors"))
        assert set(index["weight_map"].values()) == set(shards)
        data_bytes = 0
        for name in shards:
            path = os.path.join(model, name)
            with open(path, "rb") as f:
                hlen = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(hlen))
            end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
            assert os.path.getsize(path) == 8 + hlen + end     # header + data, to the byte
            assert os.stat(path).st_blocks * 512 < 1 << 20     # and a hole for the data
            data_bytes += end
            with safe_open(path, "np") as st:   # the real library reads the header
                assert set(st.keys()) == {k for k, v in index["weight_map"].items()
                                          if v == name}
        assert index["metadata"]["total_size"] == data_bytes
        apparent = sum(os.path.getsize(os.path.join(model, n)) for n in shards)
        assert 200e9 < apparent < 250e9             # the story's 223 GB, give or take
        with open(os.path.join(model, "config.json")) as f:
            cfg = json.load(f)
        assert cfg["quantization_config"]["quant_algo"] == "NVFP4"
        with open(os.path.join(model, "hf_quant_config.json")) as f:
            assert json.load(f)["producer"]["name"] == "modelopt"
        run = os.path.join(root, demo.RUNFILE)
        assert os.path.getsize(run) == demo.RUNFILE_SIZE
        with open(run, "rb") as f:
            assert f.read(2) == b"#!" and b"Makeself" in f.read(200)
        with open(os.path.join(root, demo.FREEZE)) as f:
            freeze = f.read()
        assert re.search(r"^torch==[\d.]+\+cu128$", freeze, re.MULTILINE)
        assert 1000 < len(freeze) < 8000
        eagle = os.path.join(root, "eagle3")
        total = sum(os.path.getsize(os.path.join(dp, n)) for dp, _, fs in os.walk(eagle)
                    for n in fs)
        assert 4.7e12 < total < 4.9e12
        assert os.path.isdir(os.path.join(root, "lost+found"))
    finally:
        d.close()
    assert not os.path.exists(d.path)


def test_demo_in_a_directory_cleans_up(tmp_path):
    rc, out, err = run_demo("--dir", str(tmp_path))
    assert rc == 0, err
    assert "plain directory" in out
    assert "$ vacate scan" in out
    assert "Qwen3.5-397B-A17B-NVFP4" in out
    assert "cuda_13.0.1_580.82.07_linux.run" in out
    assert "shares its filesystem" in out and "$ vacate check" in out
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
@pytest.mark.root
def test_demo_as_root_is_a_loop_mounted_ext4_volume_and_leaves_nothing():
    rc, out, err = run_demo()
    assert rc == 0, err
    m = re.search(r"loop-mounted ext4 image at (\S+) \((/dev/loop\d+), image (\S+)\)", out)
    assert m, out
    path, _dev, image = m.groups()
    assert "(ext4)" in out
    assert not os.path.ismount(path) and not os.path.exists(image)
    # the story: the server's mmap of a shard blocks the unmount, with the next action...
    m = re.search(r"stand-in server \(pid (\d+)\) has stopped", out)
    assert m, out
    assert re.search(r"not safe to unmount: \d+ blocker", out), out
    assert f"next: kill -TERM {m.group(1)}" in out
    assert "model-00001-of-" in out.split("not safe to unmount")[1]
    # ...and once it has stopped, nothing uses the volume
    assert "safe to unmount: nothing uses it" in out.split("has stopped")[1]
    # the cold backup of the EAGLE-3 data reads back clean
    assert "$ vacate archive eagle3/data" in out
    assert re.search(r"eagle3-data: OK: 1 part", out), out
    assert not os.path.exists(f"/proc/{m.group(1)}")
    assert image not in loop_backing_files()
    # then retired: planned while the server ran again, applied, reported
    assert "$ vacate plan" in out and "$ vacate apply" in out and "$ vacate report" in out
    assert re.search(r"data: retired", out), out[-3000:]
    assert "gone:" in out and "archived, and left on the volume" in out


@pytest.mark.root
def test_demo_keep_leaves_it_mounted_and_says_how_to_remove_it():
    rc, out, err = run_demo("--keep")
    m = re.search(r"loop-mounted ext4 image at (\S+) \((/dev/loop\d+), image (\S+)\)", out)
    assert m, out
    path, dev, image = m.groups()
    try:
        assert rc == 0, err
        assert os.path.ismount(path) and image in loop_backing_files()
        assert f"umount {path}" in out and f"losetup -d {dev}" in out
        # the scan run by hand agrees with what the demo built
        o = io.StringIO()
        assert main(["scan", "--json", path], Env(stdout=o, stderr=io.StringIO())) == 0
        doc = json.loads(o.getvalue())
        assert doc["target"]["fstype"] == "ext4" and doc["target"]["source"] == dev
        names = {os.path.basename(i["path"]) for i in doc["items"]}
        assert {"models", "eagle3", demo.RUNFILE, demo.FREEZE, "lost+found"} <= names
    finally:
        subprocess.run(["umount", path], check=False)
        subprocess.run(["losetup", "-d", dev], check=False)
        subprocess.run(["rm", "-rf", os.path.dirname(path)], check=False)
