"""``vacate report`` of the tests' real environments: a real volume (tests/harness/retire.py's
story: ``runs/`` archived, ``cache/`` and ``cuda.run`` deleted, ``notes.txt`` kept) whose
configuration (a copy of ``/etc``) holds a disabled unit naming the archived checkpoint and
a crontab line naming the archive's folder; planned, applied and killed in the middle,
reported (a step left ``started``), applied again to the end, reported."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from harness.paths import SRC
from harness.retire import Story, tree_hashes
from harness.volumes import can_loop_mount

from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.host import Host
from vacate.observing.model.journal import path_for, read_records

pytestmark = [pytest.mark.root, pytest.mark.slow]

APPLY = """
import sys
from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.host import Host
sys.exit(main(["apply", sys.argv[1], "--yes"], Env(host=Host(etc=sys.argv[2], run=sys.argv[3]))))
"""


def cli(host: Host, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), Env(stdout=out, stderr=err, stdin=None, host=host))
    return rc, out.getvalue(), err.getvalue()


class Retiring:
    """The story's volume and a copy of /etc naming paths on it."""

    def __init__(self, tmp: str):
        self.s = s = Story(tmp, weights_mb=24)
        m = s.m
        self.etc = os.path.join(tmp, "etc")
        os.makedirs(f"{self.etc}/systemd/system")
        for name in ("passwd", "group"):
            shutil.copy2(f"/etc/{name}", self.etc)
        with open(f"{self.etc}/systemd/system/story-eval.service", "w") as f:
            f.write(f"[Unit]\nDescription=evaluate the story's checkpoint\n[Service]\n"
                    f"Type=oneshot\nExecStart=/usr/bin/python3 -m eval --checkpoint "
                    f"{m}/runs/exp1/ckpt/w.bin\n[Install]\nWantedBy=multi-user.target\n")
        with open(f"{self.etc}/crontab", "w") as f:
            f.write(f"SHELL=/bin/sh\n*/5 * * * * root {m}/runs/sync.sh\n")
        self.run = os.path.join(tmp, "run")
        os.makedirs(self.run)
        self.host = Host(etc=self.etc, run=self.run)

    def plan(self) -> None:
        s = self.s
        rc, _out, err = cli(self.host, "plan", s.m, "--archive-to", s.backup, "--delete",
                            "cuda.run", "--delete", "cache", "--keep", "notes.txt",
                            "--grace", "2", "-o", s.plan, "--json")
        assert rc == 0, err

    def apply_killed(self, intents: int) -> None:
        """A real apply in another process, killed -9 once its journal holds ``intents``
        intents."""
        env = dict(os.environ, PYTHONPATH=os.path.abspath(SRC))
        p = subprocess.Popen([sys.executable, "-c", APPLY, self.s.plan, self.etc, self.run],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        jpath = path_for(self.s.plan)
        try:
            end = time.monotonic() + 120
            while time.monotonic() < end and p.poll() is None:
                if sum(r.get("event") == "intent" for r in read_records(jpath)) >= intents:
                    os.kill(p.pid, signal.SIGKILL)
                    break
                time.sleep(0.001)
        finally:
            p.wait(timeout=60)

    def report(self, *extra: str) -> tuple[int, str, str]:
        return cli(self.host, "report", self.s.plan, *extra)


@pytest.fixture
def retiring(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    r = Retiring(str(tmp_path))
    yield r
    r.s.close()


def test_planned_interrupted_and_applied_again(retiring, tmp_path):
    r, s = retiring, retiring.s
    r.plan()
    # planned: what would happen, the space it would free, how long archiving takes, and
    # what it would take to get each item back
    rc, out, err = r.report("--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["source"] == "plan" and doc["done"]["steps"] == [] and doc["would"]
    est = doc["estimate"]
    assert est["freed_bytes"] > 0 and est["archive_bytes"] > 24 << 20
    assert {g["path"]: g["action"] for g in est["get_back"]} == {
        f"{s.m}/runs": "archive", f"{s.m}/cache": "delete", f"{s.m}/cuda.run": "delete"}
    rc, text, err = r.report()
    assert rc == 0, err
    assert "planned, not applied" in text and "what would be done" in text

    # killed in the middle of a step: that step is 'started', never read as done
    with open(s.plan) as f:
        plan = json.load(f)
    first_long = next(i for i, st in enumerate(plan["steps"]) if st["kind"] == "archive")
    r.apply_killed(first_long + 1)
    rc, out, err = r.report("--json")
    assert rc == 0, err
    doc = json.loads(out)
    started = doc["remains"]["started"]
    assert started, [(x["id"], x["status"]) for x in doc["done"]["steps"]]
    assert doc["source"] == "applied" and doc["complete"] is False
    assert any(f["status"] == "started" for f in doc["remains"]["failed"])
    assert doc["remains"]["left"]                       # and the steps not begun are listed
    rc, text, err = r.report()                          # the terminal renders every status
    assert rc == 0, err
    assert "applied in part" in text and "started, never finished" in text
    page = os.path.join(tmp_path, "interrupted.html")
    rc, _out, err = r.report("--html", page)
    assert rc == 0, err
    with open(page, encoding="utf-8") as f:
        assert "started, never finished" in f.read()

    # applied again, to the end
    rc, out, err = cli(r.host, "apply", s.plan, "--yes", "--json")
    assert rc == 0, err
    rc, out, err = r.report("--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["complete"] is True and doc["remains"]["started"] == []
    d = doc["done"]
    assert d["freed_bytes"] > 1 << 20 and d["expected_freed_bytes"] > 0
    assert d["deleted_bytes"] > 0 and {g["path"] for g in d["gone"]} == {
        f"{s.m}/cache", f"{s.m}/cuda.run"}
    (arc,) = d["archives"]
    assert arc["location"] == os.path.join(s.backup, "runs") and arc["verified_at"]
    # the disabled unit still names the archived checkpoint: file:line, the archive, the
    # part that holds it, and both restore commands, which restore exactly that path
    refs = {x["consumer"]: x for x in doc["remains"]["references"]}
    ev = refs["systemd-unit:story-eval.service"]
    assert ev["at"] == "/etc/systemd/system/story-eval.service:5"
    assert ev["path"] == f"{s.m}/runs/exp1/ckpt/w.bin"
    assert ev["archive"] == arc["location"] and ev["part"].endswith(".tar.zst")
    into = tempfile.mkdtemp(dir=str(tmp_path), prefix="stock-")
    subprocess.run(["sh", "-c", ev["stock_restore"]], cwd=into, check=True)
    assert tree_hashes(into)["runs/exp1/ckpt/w.bin"] == s.before["runs/exp1/ckpt/w.bin"]
    assert sorted(tree_hashes(into)) == ["runs", "runs/exp1", "runs/exp1/ckpt",
                                         "runs/exp1/ckpt/w.bin"]
    # the crontab line was commented out by apply's edit step: fixed, by that step
    assert "cron:/etc/crontab:2" not in refs
    (fixed,) = [x for x in d["fixed"] if x["consumer"] == "cron:/etc/crontab:2"]
    assert next(x for x in d["steps"] if x["id"] == fixed["fixed"])["kind"] == "edit-config"
    rc, text, err = r.report()
    assert rc == 0, err
    assert "retired" in text and "/etc/systemd/system/story-eval.service:5" in text
    assert "fixed by step" in text


def test_a_journal_of_another_plan_is_refused(retiring):
    r, s = retiring, retiring.s
    r.plan()
    with open(path_for(s.plan), "w") as f:
        f.write(json.dumps({"event": "begin", "schema": "vacate.journal/1",
                            "plan_sha256": "0" * 64}) + "\n")
    rc, out, err = r.report("--json")
    assert rc != 0 and out == "" and "another version of this plan" in err
