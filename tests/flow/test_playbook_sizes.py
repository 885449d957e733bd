"""The ``vacate.volume`` modules at the sizes people have: a real ext4 volume of 200,000
entries and more (past the walk's ``INLINE_ENTRIES``, the recognisers' 20,000 and the
delete's 10,000 batch), looked at, planned and retired by the real ``ansible-playbook``
against a real OpenSSH server on 127.0.0.1, one volume for the whole module.

What a user checks: the check module's verdict and consumers are ``vacate check --host``'s;
the observe module's real observation is larger than its ``max_result_bytes``, so the result
holds its summary and the file on the controller is what ``vacate observe --host`` writes
(timings and the door aside); plan and apply delete the 200,000-entry item, end the process
holding the volume, and leave it retired with the kept files kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from harness import collection, sshd
from harness.big_volume import ENTRIES, in_use, left_on
from harness.far_watch import events, none_left, worker_forks, wrapper
from harness.inventories import one_host

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(not sshd.available(), reason="needs openssh-server")]

TIMEOUT = 300           # a target that hangs fails here, long after a slow machine answers


@pytest.fixture(scope="module")
def volume():
    """200,000 entries of data, a model's config, and a file a process holds open (the last
    test retires it)."""
    with in_use() as got:
        yield got


def vacate(*args, env):
    return subprocess.run([sys.executable, "-m", "vacate", *args], capture_output=True,
                          text=True, env=env, timeout=TIMEOUT, check=False)


LOOK = """\
- hosts: fleet
  gather_facts: false
  tasks:
    - name: Is the volume still used?
      vacate.volume.check: {path: "{{ vol }}"}
      register: usage
    - name: Its observation, larger than the result may hold
      vacate.volume.observe:
        path: "{{ vol }}"
        max_result_bytes: "{{ bound }}"
        dest: "{{ out }}/web1.observation.json"
      register: seen
    - name: Keep both results
      ansible.builtin.copy:
        content: "{{ {'usage': usage, 'seen': seen} | to_json }}"
        dest: "{{ out }}/web1.json"
        mode: "0644"
      delegate_to: localhost
"""

BOUND = 64 << 10        # what observe's result may hold here: the real observation is more


def without_timings(doc):
    """An observation without what depends on the moment and the door (how long each part
    took, how the host was reached)."""
    if isinstance(doc, dict):
        out = {k: without_timings(v) for k, v in doc.items()
               if not (k.endswith("_s") or k in ("elapsed", "observed_at", "at", "took"))}
        if "machine_id" in out and "via" in out:          # the host, as it was reached
            for k in ("via", "python", "ssh"):
                out.pop(k, None)
        return out
    if isinstance(doc, list):
        return [without_timings(v) for v in doc]
    return doc


def play(installed, server, tmp_path, text: str, **extra) -> tuple[dict, str]:
    """``text`` played on ``web1`` (the test sshd, its interpreter watched), ``extra`` its
    variables and ``out`` a directory of its own; (what it kept in ``out/web1.json``, the
    watcher's log)."""
    far, log = wrapper(str(tmp_path / "far"), "/usr/bin/python3")
    inv = one_host(tmp_path / "hosts.ini", server, far)
    (tmp_path / "play.yml").write_text(text)
    out = tmp_path / "out"
    out.mkdir()
    given = [x for k, v in dict(extra, out=out).items() for x in ("-e", f"{k}={v}")]
    r = collection.playbook(installed, "-i", inv, str(tmp_path / "play.yml"), *given,
                            env=installed.environ(ANSIBLE_PIPELINING="1"), timeout=TIMEOUT)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return json.loads((out / "web1.json").read_text()), log


def test_check_and_observe_modules_at_200k_entries(installed, server, volume, tmp_path):
    vol, holder_pid = volume
    m = vol.mountpoint
    out = tmp_path / "out"
    got, log = play(installed, server, tmp_path, LOOK, vol=m, bound=BOUND)
    usage, seen = got["usage"], got["seen"]
    # the target's worker walked with its pool and recognised side by side, past their
    # thresholds, never forking under a thread
    assert worker_forks(log, "popen_fork.py") and worker_forks(log, "sidebyside.py"), \
        events(log)
    assert not events(log, "warning"), events(log, "warning")

    # the check: vacate check --host's verdict and consumers
    env = server.environ()
    door = vacate("check", "--host", "vacate-test", "--json", m, env=env)
    assert door.returncode == 1, door.stderr[-3000:]
    ref = json.loads(door.stdout)
    assert usage["safe_to_unmount"] is False and usage["verdict"] == ref["verdict"], \
        (usage["verdict"], ref["verdict"])
    assert usage["consumers"] == ref["consumers"]
    assert any(c["id"].startswith(f"process:{holder_pid}:") for c in usage["consumers"])
    data = {i["id"]: i for i in usage["items"]}["item:data"]
    assert data["files"] + data["dirs"] == ENTRIES + 1             # (data/ itself counts)

    # observe: past its bound, so the result holds the summary; the file is the observation
    # vacate observe --host writes
    print(f"observation: {seen['size_bytes']:,} bytes")
    assert seen["observation"] is None and seen["size_bytes"] > BOUND, \
        {k: v for k, v in seen.items() if k != "observation"}
    assert seen["observation_file"] == str(out / "web1.observation.json")
    assert seen["summary"]["target"]["mountpoint"] == m
    assert seen["summary"]["consumers"] == len(usage["consumers"])
    kept = json.loads((out / "web1.observation.json").read_text())
    assert len((out / "web1.observation.json").read_bytes()) == seen["size_bytes"]
    door = vacate("observe", "--host", "vacate-test", m, env=env)
    assert door.returncode == 0, door.stderr[-3000:]
    ref = json.loads(door.stdout)
    # (the machine's containers, as they stood at each moment: other tests' come and go)
    for doc in (kept, ref):
        doc.pop("containers", None)
    assert sorted(kept) == sorted(ref) and len(kept) > 5, sorted(kept)
    assert without_timings(kept) == without_timings(ref)


PLAN_AND_APPLY = """\
- hosts: fleet
  gather_facts: false
  tasks:
    - name: Plan the retirement
      vacate.volume.plan:
        path: "{{ vol }}"
        dest: "{{ out }}/web1.plan"
        delete: [data]
        keep: [notes.txt, models]
        grace: 2
      register: planned
    - name: Apply it, as approved
      vacate.volume.apply:
        plan: "{{ out }}/web1.plan"
        plan_sha256: "{{ planned.plan_sha256 }}"
      register: applied
    - name: Keep what they came to
      ansible.builtin.copy:
        content: "{{ {'planned': planned, 'applied': applied} | to_json }}"
        dest: "{{ out }}/web1.json"
        mode: "0644"
      delegate_to: localhost
"""


def ended(pid: int) -> bool:
    """``pid`` is gone, or a zombie its parent (the test) has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_plan_and_apply_modules_delete_200k_entries(installed, server, volume, tmp_path):
    vol, holder_pid = volume
    m = vol.mountpoint
    got, log = play(installed, server, tmp_path, PLAN_AND_APPLY, vol=m)
    planned, applied = got["planned"], got["applied"]
    assert [i["action"] for i in planned["items"] if i["path"].endswith("/data")] == ["delete"]
    assert any(s["kind"] == "delete" for s in planned["steps"]), planned["steps"]
    assert applied["complete"] is True and applied["changed"] is True, applied
    assert worker_forks(log, "delete.py"), events(log)     # deleters forked there
    none_left(log)
    assert not os.path.ismount(m)
    assert ended(holder_pid)
    assert left_on(vol, str(tmp_path / "look")) == {"lost+found": None, "models": None,
                                                    "notes.txt": "in use\n"}
