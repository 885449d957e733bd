"""``vacate plan --host … --free-volume``: what freeing the dataset depends on (its
snapshots, their holds and clones, its children) is read on the far host, through the same
observing layer sent over ssh (run by CPython 3.8 where pyenv has it), and is the local
plan's; a held snapshot blocks both, named."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from harness import sshd
from harness.archives import run
from harness.retire import cli

PY38 = os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python3.8")

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not sshd.available(), reason="needs openssh-server")]


@pytest.fixture
def server(tmp_path_factory):
    s = sshd.start(str(tmp_path_factory.mktemp("sshd")))
    yield s
    s.stop()


def test_the_datasets_snapshots_read_far_side_are_the_local_ones(server, pool, tmp_path):
    mnt = pool.create("subvol-400-disk-0")
    ds = f"{pool.name}/subvol-400-disk-0"
    with open(f"{mnt}/a.txt", "w") as f:
        f.write("a\n")
    for snap in ("daily", "kept"):
        run("zfs", "snapshot", f"{ds}@{snap}")
    run("zfs", "hold", "backup", f"{ds}@kept")
    (tmp_path / "dest").mkdir()
    args = [mnt, "--archive-to", str(tmp_path / "dest"), "--archive-format", "zfs",
            "--verify-pool", pool.name, "--free-volume", "--json"]
    rc, out, err = cli("plan", *args, "-o", str(tmp_path / "here.plan"))
    assert rc == 4, err
    here = json.loads(out)
    python = ["--python", PY38] if os.path.exists(PY38) else []
    r = subprocess.run([sys.executable, "-m", "vacate", "plan", "--host", "vacate-test",
                        *python, *args, "-o", str(tmp_path / "far.plan")],
                       capture_output=True, text=True, timeout=180, env=server.environ(),
                       check=False)
    assert r.returncode == 4, r.stderr[-3000:]
    far = json.loads(r.stdout)
    assert far["observation"]["dataset"] == here["observation"]["dataset"]
    assert [s["name"] for s in far["observation"]["dataset"]["snapshots"]] == ["daily", "kept"]
    for doc in (here, far):
        assert any(f"{ds}@kept is held" in b for b in doc["blocked"]), doc["blocked"]
        assert doc["steps"][-1]["params"]["snapshots"] == ["daily"]


@pytest.mark.slow
def test_a_plan_made_over_ssh_frees_the_dataset_far_side(server, pool, tmp_path):
    """The destroy runs on the far host and reads there what the journal (kept here) says
    of the verify before it."""
    mnt = pool.create("subvol-401-disk-0")
    ds = f"{pool.name}/subvol-401-disk-0"
    with open(f"{mnt}/a.txt", "w") as f:
        f.write("a\n")
    (tmp_path / "dest").mkdir()
    plan = str(tmp_path / "far.plan")
    env = server.environ()
    r = subprocess.run([sys.executable, "-m", "vacate", "plan", "--host", "vacate-test", mnt,
                        "--archive-to", str(tmp_path / "dest"), "--archive-format", "zfs",
                        "--verify-pool", pool.name, "--free-volume", "-o", plan],
                       capture_output=True, text=True, timeout=180, env=env, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([sys.executable, "-m", "vacate", "apply", plan, "--yes", "--json"],
                       capture_output=True, text=True, timeout=300, env=env, check=False)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    steps = {s["kind"]: s for s in json.loads(r.stdout)["done"]["steps"]}
    assert steps["destroy-dataset"]["status"] == "ok", steps["destroy-dataset"]
    assert run("zfs", "list", ds, check=False).returncode != 0
