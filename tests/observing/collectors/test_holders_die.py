"""The test harness's holder processes die with the test process: a ``kill -9`` of the process
that started them (pytest killed by a timeout) leaves none of them running, so no stray
holder keeps a later test's volume busy."""

import json
import os
import signal
import subprocess
import sys
import time

from harness.paths import TESTS

STARTER = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from harness.holders import Crowd, Holders
d = sys.argv[2]
open(os.path.join(d, "f"), "w").write("held")
os.mkdir(os.path.join(d, "on"))
h = Holders(d)
pids = [h.fd(os.path.join(d, "f")), h.cwd(d), h.py_mmap(os.path.join(d, "f"))]
crowd = Crowd(os.path.join(d, "on"), 3, 2)
pids += sorted(crowd.on | crowd.off) + [crowd.proc.pid]
print(json.dumps(pids), flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_holders_and_crowds_die_when_the_test_process_is_killed(tmp_path):
    starter = subprocess.Popen([sys.executable, "-c", STARTER, TESTS, str(tmp_path)],
                               stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(starter.stdout.readline())
        assert len(pids) == 9 and all(alive(p) for p in pids)
    finally:
        starter.send_signal(signal.SIGKILL)
        starter.wait()
    end = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    left = [p for p in pids if alive(p)]
    for p in left:                     # do not leave them behind when the test fails
        os.kill(p, signal.SIGKILL)
    assert left == []
