"""``vacate plan --ct 129 /data --free-volume`` from the Proxmox host, the story's path: CT
129 real (tests/harness/ct129.py), its ``mp0`` the zfs-fuse dataset ``subvol-129-disk-0`` on
zfspool storage ``scratch`` (tests/harness/zfs_pool.py), ``pct`` the stand-in with
pve-container's rules (tests/harness/pve.py). Applied while the container runs, mp0's
removal stays pending and the freeing fails naming the restart; the operator restarts it
(the stand-in's shutdown applies the pending deletion as Proxmox's poststop hook does:
``unused0``; the box boots again); a rerun frees the volume with a real ``zfs destroy -r``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from harness.ct129 import MODEL, _wait_serving, container_129
from harness.systemd_box import boot_again

VACATE = [sys.executable, "-m", "vacate"]
pytestmark = [pytest.mark.root, pytest.mark.slow]


def _vacate(*args, env) -> tuple[int, dict | str]:
    r = subprocess.run([*VACATE, *args], capture_output=True, text=True, timeout=300, env=env,
                       check=False)
    try:
        return r.returncode, json.loads(r.stdout)
    except ValueError:
        return r.returncode, r.stdout + r.stderr


def _exists(ds: str) -> bool:
    return subprocess.run(["zfs", "list", "-H", ds], capture_output=True,
                          check=False).returncode == 0


def test_the_story_freed_through_pct_after_the_operator_restarts_the_container(
        pool, tmp_path):
    with container_129(tmp_path, pool=pool) as (vol, host, box, conf):
        ds = f"{pool.name}/subvol-129-disk-0"
        _wait_serving(box)
        env = host.environ()
        plan = str(tmp_path / "story.plan")
        dest = tmp_path / "cold"
        dest.mkdir()
        rc, doc = _vacate("plan", "--ct", "129", "/data", "--delete", MODEL, "--archive-to",
                          str(dest), "--free-volume", "-o", plan, "--grace", "2", "--json",
                          env=env)
        assert isinstance(doc, dict), doc
        assert doc["blocked"] == [], (doc["blocked"], [(i["path"], i["action"], i["status"], i["exclude"], i["files"]) for i in doc["items"]])
        assert rc == 0, doc
        assert doc["steps"][-1]["kind"] == "free-guest-volume", [s["kind"] for s in doc["steps"]]
        rc, got = _vacate("apply", plan, "--yes", "--json", env=env)
        steps = {s["kind"]: s for s in got["done"]["steps"]}
        assert steps["free-guest-volume"]["status"] == "failed", got["done"]["steps"]
        assert "CT 129 must restart for the pending removal of mp0 to take effect (pct " \
               "reboot 129); then rerun vacate apply" in steps["free-guest-volume"]["detail"]
        assert _exists(ds) and not os.path.exists(f"{vol.mountpoint}/{MODEL}")
        calls = host.calls()
        assert not any(c.startswith(("shutdown", "stop", "reboot", "start")) for c in calls)
        # the operator's pct reboot 129: the stand-in shuts it down and applies the pending
        # change as Proxmox's poststop hook does; the box boots again as its config now
        # says (no mp0: nothing at /data), which the stand-in cannot do itself
        r = subprocess.run(["pct", "shutdown", "129"], env=env, capture_output=True,
                           text=True, check=False)
        assert r.returncode == 0, r.stderr
        with open(conf) as f:
            text = f.read()
        assert "unused0: scratch:subvol-129-disk-0" in text and "mp0:" not in text, text
        boot_again(box, hide=(vol.mountpoint,))      # LXC's root has no host mounts
        host.running(129, box.pid1)
        rc, got = _vacate("apply", plan, "--yes", "--json", env=env)
        assert rc in (0, 4), got                     # 4: the person's restart step is shown
        steps = {s["kind"]: s for s in got["done"]["steps"]}
        assert steps["free-guest-volume"]["status"] == "ok", got["done"]["steps"]
        assert not [s for s in got["done"]["steps"] if s["status"] == "failed"]
        assert not _exists(ds)
        with open(conf) as f:
            assert "unused" not in f.read()
