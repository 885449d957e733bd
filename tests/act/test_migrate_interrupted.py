"""``kill -9`` of a real ``vacate apply`` of a migration, at two fixed points: in the middle
of the first copy (after some files were copied and recorded) and between the repoint and
the start (the unit stopped, vacate's drop-in written). The kill is placed by a small
wrapper around the real command in its own process (as the read-back test flips a byte at
a fixed hook point): a monotonic clock cannot land between two steps reliably. Then
``vacate apply PLAN --yes`` again: it finishes without starting over, and ends as an
uninterrupted run does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from harness.migrate_box import (
    box_cmd,
    looked_at,
    mapped_under,
    plan_to,
    read,
    unit_text,
)
from harness.paths import SRC
from harness.retire import tree_hashes
from harness.waiting import wait_for

from vacate.act import migrate
from vacate.observing.model.journal import path_for, read_records, states_of

pytestmark = pytest.mark.root

SHARDS = 6
KILLED = """
import os, signal, sys
from vacate.act import copy_tree, migrate
from vacate.cli.env import Env
from vacate.cli.main import main

def die(*_a, **_k):
    os.kill(os.getpid(), signal.SIGKILL)

if sys.argv[2] == "between-repoint-and-start":
    migrate._RUN["start-unit"] = die
else:                       # mid-copy: each file recorded as copied, killed at the 4th
    copy_tree.FLUSH_S = 0.0
    real, n = copy_tree._copy_file, [0]
    def copy_file(*a, **k):
        n[0] += 1
        if n[0] == 4:
            die()
        return real(*a, **k)
    copy_tree._copy_file = copy_file
sys.exit(main(["apply", sys.argv[1], "--yes"], Env()))
"""


def vacate(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          check=False, env=env, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("story", [SHARDS], indirect=True)
@pytest.mark.parametrize("where", ["mid-copy", "between-repoint-and-start"])
def test_a_killed_migration_resumes_and_ends_as_an_uninterrupted_one(story, where):
    b, v, vol, dest, work = story
    unit_before = unit_text(b)
    source = tree_hashes(f"{vol}/models/qwen")
    plan_path = plan_to(vol, dest, work)

    killed = vacate("-c", KILLED, plan_path, where)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    states = states_of(read_records(path_for(plan_path)))
    cut = [sid for sid, st in states.items() if st.event == "intent"]
    assert len(cut) == 1, states                   # one step started, never finished
    if where == "mid-copy":
        assert cut == ["01-copy"]
        assert box_cmd(b, "systemctl", "is-active", "qwen.service").stdout.strip() == "active"
    else:
        assert states[cut[0]].event == "intent" and cut[0].endswith("start-unit")
        assert box_cmd(b, "systemctl", "is-active", "qwen.service").stdout.strip() != "active"
        d = os.path.join(b.units_dir, "qwen.service.d")
        assert any(n.endswith(migrate.DROPIN) for n in os.listdir(d))

    again = vacate("-m", "vacate", "apply", plan_path, "--yes")
    assert again.returncode == 0, again.stderr + again.stdout
    states = states_of(read_records(path_for(plan_path)))
    assert all(st.status in ("ok", "skipped") for st in states.values()), states
    if where == "mid-copy":
        # the three files recorded before the kill are not copied again
        first = states["01-copy"].data
        assert first["copied"] == SHARDS + 2 - 3, first
    # the end state of an uninterrupted run
    assert box_cmd(b, "systemctl", "is-active", "qwen.service").stdout.strip() == "active"
    assert wait_for(lambda: mapped_under(f"{dest}/qwen"), "the server to map the copy")
    assert not mapped_under(vol)
    assert not os.path.ismount(vol)
    assert unit_text(b) == unit_before
    copied = tree_hashes(f"{dest}/qwen")
    assert copied == source
    d = os.path.join(b.units_dir, "qwen.service.d")
    (ours,) = [n for n in os.listdir(d) if n.endswith(migrate.DROPIN)]
    assert f"Environment=MODEL={dest}/qwen ADMIN_A=1" in read(os.path.join(d, ours))
    with looked_at(v) as look:
        assert tree_hashes(f"{look}/models/qwen") == source      # left on the volume
