"""`vacate check` reads in the order people read: the verdict and the blockers first, then the
detail; a note that changes no verdict (PID 1 unreadable in a container) is said once, in
the detail, not as the last word."""

import io
import json

import pytest
from harness.holders import Holders
from harness.volumes import can_loop_mount, make_volume

from vacate.cli.env import Env
from vacate.cli.main import main


def run_cli(*argv, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), Env(stdout=out, stderr=err, stdin=stdin))
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.root
def test_the_verdict_and_blockers_come_first_and_a_note_once_in_the_detail(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4")
    h = Holders(v.mountpoint)
    try:
        for i in range(30):
            with open(f"{v.mountpoint}/f{i:02d}.txt", "w") as f:
                f.write("x\n")
        pid = h.fd(f"{v.mountpoint}/f00.txt")
        rc, out, err = run_cli("observe", v.mountpoint)
        assert rc == 0, err
        doc = json.loads(out)
        note = {"code": "pid1-unreadable", "message": "PID 1 (this machine's init) cannot be "
                "read (Permission denied): the verdict does not wait on it", "path": "/proc/1",
                "blocks_verdict": False}
        doc["problems"] += [note, dict(note)]
        obs = tmp_path / "obs.json"
        obs.write_text(json.dumps(doc))
        rc, out, err = run_cli("check", "--from", str(obs))
        assert rc == 1, err
        lines = out.splitlines()
        verdict = next(i for i, ln in enumerate(lines) if "not safe to unmount" in ln)
        blocker = next(i for i, ln in enumerate(lines) if f"pid {pid}" in ln)
        table = next(i for i, ln in enumerate(lines) if "f29.txt" in ln)
        assert verdict < blocker < table, out
        assert out.count("PID 1 (this machine's init) cannot be read") == 1, out
        notes = [i for i, ln in enumerate(lines) if "PID 1" in ln]
        assert verdict < notes[0] and notes[0] != len(lines) - 1, out
    finally:
        h.close()
        v.close()
