"""One request in a worker forked for it, within bounds (:mod:`vacate.observing.bounded`, what
the ``vacate.volume`` modules run on a target): the reply comes back as the work gave it; a
worker that stops (``SIGSTOP``) is cut after ``stall_s``, one that beats but never ends after
``deadline_s``, each said with what it was doing; nothing it started is left running."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from vacate.observing import beat, bounded


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_reply_is_the_works():
    assert bounded.run(lambda: {"ok": [1, "two"]}, "op") == {"ok": [1, "two"]}
    got = bounded.run(lambda: 1 / 0, "op")
    assert got["error"]["kind"] == "internal" and "ZeroDivisionError" in got["error"]["message"]


def test_a_stopped_worker_is_cut_after_the_stall_and_its_children_with_it(tmp_path):
    mark = tmp_path / "pid"

    def work():
        child = subprocess.Popen(["sleep", "300"])
        mark.write_text(str(child.pid))
        beat.doing("walking /nowhere")
        os.kill(os.getpid(), signal.SIGSTOP)
        return {"ok": None}
    t0 = time.monotonic()
    got = bounded.run(work, "observe", deadline_s=60, stall_s=1.5)
    took = time.monotonic() - t0
    assert 1.5 <= took < 6, took
    err = got["error"]
    assert err["kind"] == "stalled" and err["doing"] == "walking /nowhere", err
    assert "nothing came from vacate's worker for 1.5 s while walking /nowhere" in err["message"]
    sleeper = int(mark.read_text())
    end = time.monotonic() + 5
    while alive(sleeper) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(sleeper)


def test_a_worker_that_beats_but_never_ends_is_cut_at_the_deadline():
    def work():
        beat.doing("step s3 (delete)")
        while True:
            beat.counted(10, 0)
            time.sleep(0.01)
    t0 = time.monotonic()
    got = bounded.run(work, "apply_step", deadline_s=3, stall_s=30)
    assert 3 <= time.monotonic() - t0 < 8
    err = got["error"]
    assert err["kind"] == "deadline" and err["deadline_s"] == 3, err
    assert err["message"].startswith("vacate's deadline of 3 s passed while step s3 "
                                     "(delete) (10 entries, 0 bytes so far)"), err
