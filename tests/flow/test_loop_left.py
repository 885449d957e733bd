"""A volume on a loop device attached by hand (``losetup`` without autoclear) keeps its image
open after apply unmounts it: what remains says so, with the exact ``losetup -d``, and
running that command detaches it. A volume mounted with ``mount -o loop`` (autoclear) is
detached by the kernel at the unmount and nothing is said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest
from harness.volumes import can_loop_mount, make_volume

VACATE = [sys.executable, "-m", "vacate"]


def vacate(*args):
    return subprocess.run([*VACATE, *args], capture_output=True, text=True, timeout=300,
                          check=False)


def retire(mnt: str, tmp: str) -> tuple[subprocess.CompletedProcess, dict]:
    with open(os.path.join(mnt, "notes.txt"), "w") as f:
        f.write("keep me\n")
    plan = os.path.join(tmp, "v.plan")
    r = vacate("plan", mnt, "--archive-to", os.path.join(tmp, "bk"), "-o", plan)
    assert r.returncode == 0, r.stderr
    applied = vacate("apply", plan, "--yes")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    report = vacate("report", plan, "--json")
    return applied, json.loads(report.stdout)


@pytest.mark.slow
@pytest.mark.root
def test_a_hand_attached_loop_device_is_named_with_its_command(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4")            # attached with losetup -f --show: no autoclear
    try:
        applied, doc = retire(v.mountpoint, str(tmp_path))
        left = doc["remains"]["loop_device"]
        assert left == {"device": v.device, "backing_file": v.image,
                        "command": ["losetup", "-d", v.device]}
        out = " ".join(applied.stdout.split())
        assert f"still attached: {v.device} keeps {v.image} open" in out
        assert f"losetup -d {v.device}" in out
        subprocess.run(left["command"], check=True)
        assert not os.path.exists(f"/sys/block/{os.path.basename(v.device)}/loop/backing_file")
    finally:
        v.close()


@pytest.mark.slow
@pytest.mark.root
def test_an_autoclear_loop_device_goes_with_the_unmount(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    work = tempfile.mkdtemp(prefix="vacate-autoclear-")
    image, mnt = os.path.join(work, "vol.img"), os.path.join(work, "mnt")
    os.mkdir(mnt)
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
    subprocess.run(["mount", "-o", "loop", image, mnt], check=True)
    try:
        applied, doc = retire(mnt, str(tmp_path))
        assert doc["remains"]["loop_device"] is None
        assert "still attached" not in applied.stdout
    finally:
        subprocess.run(["umount", mnt], check=False, capture_output=True)
        subprocess.run(["chattr", "-i", mnt], check=False, capture_output=True)
        subprocess.run(["rm", "-rf", work], check=False)
