"""`vacate plan` on a real volume: refusals (not a mount point, destination or plan file on
the volume), the document's shape, and the identities it records for what it would touch."""

import io
import json
import os

import pytest
from harness.holders import Holders
from harness.volumes import can_loop_mount, make_volume

from vacate.cli.env import Env
from vacate.cli.main import main


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), Env(stdout=out, stderr=err))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def vol(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4")
    h = Holders(v.mountpoint)
    m = v.mountpoint
    try:
        os.makedirs(f"{m}/work/run1")
        with open(f"{m}/work/run1/weights.bin", "wb") as f:
            f.write(os.urandom(1 << 16))
        with open(f"{m}/requirements-freeze.txt", "w") as f:
            f.write("torch==2.9.0\n")
        h.fd(f"{m}/work/run1/weights.bin")
        yield m, tmp_path
    finally:
        h.close()
        v.close()


@pytest.mark.root
def test_refusals_change_nothing(vol):
    m, tmp = vol
    before = sorted(os.listdir(m))
    assert run_cli("plan", f"{m}/work")[0] == 2                          # not a mount point
    rc, _, err = run_cli("plan", m, "--archive-to", f"{m}/backup")
    assert rc == 2 and "on the volume being retired" in err
    rc, _, err = run_cli("plan", m, "--archive-to", str(tmp), "-o", f"{m}/plan.json")
    assert rc == 2 and "on the volume being retired" in err
    rc, _, err = run_cli("plan", m, "--archive-to", str(tmp), "--delete", "nope")
    assert rc == 2 and "matches no item" in err
    assert sorted(os.listdir(m)) == before


@pytest.mark.root
def test_the_plan_document(vol):
    m, tmp = vol
    rc, out, err = run_cli("plan", m, "--json")
    assert rc == 4, err                         # items to archive, and nowhere to put them
    assert "--archive-to" in json.loads(out)["blocked"][0]
    plan_file = tmp / "retire.plan"
    rc, out, err = run_cli("plan", m, "--archive-to", str(tmp / "backup"), "--delete",
                           "requirements-freeze.txt", "-o", str(plan_file), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert json.loads(plan_file.read_text()) == doc
    assert doc["schema"] == "vacate.plan/1" and doc["target_path"] == m
    items = {i["path"]: i for i in doc["items"]}
    assert items[f"{m}/requirements-freeze.txt"]["action"] == "delete"
    assert items[f"{m}/work"]["action"] == "archive"
    assert items[f"{m}/lost+found"]["action"] == "keep"
    st = os.stat(f"{m}/work")
    ident = items[f"{m}/work"]["identity"]
    assert (ident["dev"], ident["ino"], ident["files"]) == (st.st_dev, st.st_ino, 1)
    assert len(ident["digest"]) == 64
    entries = items[f"{m}/requirements-freeze.txt"]["entries"]
    assert entries["schema"] == "vacate.entries-file/1" and entries["entries"] == 1
    assert entries["file"] == f"vacate-entries-{entries['sha256']}.jsonl.gz"
    assert (tmp / entries["file"]).stat().st_size == entries["bytes"]      # beside the plan
    kinds = [s["kind"] for s in doc["steps"]]
    assert kinds.index("end-process") < kinds.index("archive") < kinds.index("delete")
    assert kinds[-3:] == ["unmount", "lock-dir", "check"]
    # for people: the items and the steps as commands
    rc, out, _ = run_cli("plan", m, "--archive-to", str(tmp / "backup"))
    assert rc == 0 and "kill -TERM" in out and f"umount {m}" in out
