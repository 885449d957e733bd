"""Ctrl-C (SIGINT) and SIGTERM sent to a real `vacate apply`: it says the step it stopped in
and the command that resumes, exits 130 / 143 (the exit-code table lists both), and that
command then finishes the retirement."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from harness.paths import README
from harness.retire import Story
from harness.volumes import can_loop_mount

from vacate.observing.model.journal import path_for, read_records

pytestmark = pytest.mark.root



@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_apply_names_its_step_and_the_resume_command(tmp_path, sig, code):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    s = Story(str(tmp_path), cache_files=20000, weights_mb=96, size_mb=400)
    try:
        plan = s.make_plan()
        first = next(st["id"] for st in plan["steps"] if st["kind"] == "archive")
        p = subprocess.Popen([sys.executable, "-m", "vacate", "apply", s.plan, "--yes"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 120
        while time.monotonic() < end and p.poll() is None and not any(
                r.get("event") == "intent" and r.get("step") == first
                for r in read_records(path_for(s.plan))):
            time.sleep(0.002)
        time.sleep(0.02)
        assert p.poll() is None, "finished before the signal"
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
        assert p.returncode == code, err
        assert f"stopped in step {first}" in err, err
        resume = f"vacate apply {s.plan} --yes"
        assert resume in err
        rc = subprocess.run([sys.executable, "-m", "vacate", *resume.split()[1:]],
                            capture_output=True, text=True, check=False)
        assert rc.returncode == 0, rc.stderr
        s.assert_retired()
    finally:
        s.close()


def test_the_exit_code_table_lists_the_interruptions():
    with open(README) as f:
        text = f.read()
    assert "130" in text and "143" in text
