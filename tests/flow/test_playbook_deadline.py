"""vacate's own deadline on the Ansible path: the ``vacate.volume`` modules run by the real
``ansible-playbook`` against a real OpenSSH server on 127.0.0.1, the target's interpreter
watched (:mod:`harness.far_python`: its forks logged, its worker stopped with ``SIGSTOP`` on
request, as a worker an admin stopped or one stuck on a filesystem that does not answer).

What a user checks: a module whose worker hangs fails within its ``deadline`` (or its
``stall_timeout``, or a few seconds before the task's ``timeout``) and a few seconds more,
saying so with the host's name, the bound and what vacate was doing, and nothing of vacate is
left running on the target; an apply whose delete step is cut so has that step failed in
its journal, its lock there let go, and the rerun ends retired, the kept file kept."""

from __future__ import annotations

import fcntl
import json
import os
import time

import pytest
from harness import collection, sshd
from harness.big_volume import big_volume, fill, left_on
from harness.far_watch import events, none_left, wrapper
from harness.inventories import one_host
from harness.volumes import can_loop_mount, make_volume

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(not sshd.available(), reason="needs openssh-server")]

PYTHON = "/usr/bin/python3"


HANGS = """\
- hosts: fleet
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact: {t0: "{{ now().timestamp() }}"}
    - name: Observe, cut by vacate's deadline
      vacate.volume.observe: {path: "{{ vol }}", deadline: 3, stall_timeout: 120}
      register: by_deadline
      ignore_errors: true
    - ansible.builtin.set_fact: {t1: "{{ now().timestamp() }}"}
    - name: Check, cut by the worker's silence
      vacate.volume.check: {path: "{{ vol }}", scan_tree: false, stall_timeout: 3}
      register: by_stall
      ignore_errors: true
    - ansible.builtin.set_fact: {t2: "{{ now().timestamp() }}"}
    - name: Check, cut a few seconds before the task's timeout
      vacate.volume.check: {path: "{{ vol }}", scan_tree: false, stall_timeout: 120}
      timeout: 10
      register: by_timeout
      ignore_errors: true
    - ansible.builtin.set_fact: {t3: "{{ now().timestamp() }}"}
    - name: Keep what each came to
      ansible.builtin.copy:
        content: "{{ {'t': [t0, t1, t2, t3, now().timestamp()] | map('float') | list,
                      'by_deadline': by_deadline, 'by_stall': by_stall,
                      'by_timeout': by_timeout} | to_json }}"
        dest: "{{ out }}/web1.json"
        mode: "0644"
      delegate_to: localhost
"""


def test_a_module_whose_worker_hangs_fails_within_its_deadline(installed, server, tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    vol = make_volume("ext4")
    try:
        far, log = wrapper(str(tmp_path / "far"), PYTHON, "stop-worker")
        inv = one_host(tmp_path / "hosts.ini", server, far)
        (tmp_path / "hangs.yml").write_text(HANGS)
        out = tmp_path / "out"
        out.mkdir()
        r = collection.playbook(installed, "-i", inv, str(tmp_path / "hangs.yml"),
                                "-e", f"vol={vol.mountpoint}", "-e", f"out={out}",
                                env=installed.environ(ANSIBLE_PIPELINING="1"), timeout=300)
        said = r.stdout + r.stderr
        assert r.returncode == 0, said[-4000:]      # (each failure ignored, then kept)
        # every module run's worker stopped itself: three runs, three stops
        assert len(events(log, "stopping")) == 3, events(log)
        got = json.loads((out / "web1.json").read_text())
        t = got["t"]
        took = {"by_deadline": t[1] - t[0], "by_stall": t[2] - t[1], "by_timeout": t[3] - t[2]}
        # the deadline: 3 s, and a few more (the connection, the module's start, the kill)
        d = got["by_deadline"]
        assert d["failed"] is True and d["error"]["kind"] == "deadline", d
        assert d["msg"].startswith("web1: vacate's deadline of 3 s passed while answering "
                                   "observe: it was ended there"), d["msg"]
        assert 3 <= took["by_deadline"] < 3 + 10, took
        # the silence: 3 s without a heartbeat
        s = got["by_stall"]
        assert s["failed"] is True and s["safe_to_unmount"] is None, s
        assert "web1: nothing came from vacate's worker for 3 s while answering observe" \
            in s["msg"], s["msg"]
        assert 3 <= took["by_stall"] < 3 + 10, took
        # the task's timeout (10 s): vacate ends its run a quarter of it (2.5 s) before
        # Ansible would, and says why (not Ansible's "timed out")
        o = got["by_timeout"]
        assert o["failed"] is True and "web1: vacate's deadline of " in o["msg"], o
        assert float(o["msg"].split("deadline of ")[1].split(" s")[0]) <= 10 - 2.5, o["msg"]
        assert took["by_timeout"] < 10, took
        # nothing of vacate is left on the target: no worker, no module process
        none_left(log)
    finally:
        vol.close()


PLAN = """\
- hosts: fleet
  gather_facts: false
  tasks:
    - name: Plan the retirement
      vacate.volume.plan:
        path: "{{ vol }}"
        dest: "{{ plans }}/web1.plan"
        delete: [cache]
        keep: [keep.txt]
        grace: 2
      register: planned
    - name: Keep it
      ansible.builtin.copy:
        content: "{{ planned | to_json }}"
        dest: "{{ plans }}/web1.planned"
        mode: "0644"
      delegate_to: localhost
"""

APPLY = """\
- hosts: fleet
  gather_facts: false
  tasks:
    - name: Apply the approved plan
      vacate.volume.apply:
        plan: "{{ plans }}/web1.plan"
        plan_sha256: "{{ sha }}"
        deadline: "{{ deadline }}"
      register: applied
      ignore_errors: true
    - name: Keep what the apply came to
      ansible.builtin.copy:
        content: "{{ applied | to_json }}"
        dest: "{{ plans }}/web1.{{ run }}"
        mode: "0644"
      delegate_to: localhost
"""


def test_an_apply_cut_by_the_deadline_fails_its_step_and_the_rerun_ends_retired(
        installed, server, tmp_path):
    """30,000 entries to delete (past the delete's 10,000: it forks its deleters); the
    target's worker stops once it has forked the first, so the delete step is cut by the
    deadline (8 s, each run of a module there; the apply's other runs take under a
    second)."""
    vol = big_volume()
    try:
        m = vol.mountpoint
        fill(os.path.join(m, "cache"), dirs=60)
        with open(f"{m}/keep.txt", "w") as f:
            f.write("kept\n")
        far, log = wrapper(str(tmp_path / "far"), PYTHON)
        inv = one_host(tmp_path / "hosts.ini", server, far)
        plans = tmp_path / "plans"
        plans.mkdir()
        (tmp_path / "plan.yml").write_text(PLAN)
        (tmp_path / "apply.yml").write_text(APPLY)
        env = installed.environ(ANSIBLE_PIPELINING="1")
        r = collection.playbook(installed, "-i", inv, str(tmp_path / "plan.yml"),
                                "-e", f"vol={m}", "-e", f"plans={plans}", env=env, timeout=300)
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
        planned = json.loads((plans / "web1.planned").read_text())
        sha = planned["plan_sha256"]
        delete = [s["id"] for s in planned["steps"] if s["kind"] == "delete"]
        assert delete, planned["steps"]

        def apply(run, deadline):
            return collection.playbook(installed, "-i", inv, str(tmp_path / "apply.yml"),
                                       "-e", f"plans={plans}", "-e", f"sha={sha}",
                                       "-e", f"run={run}", "-e", f"deadline={deadline}",
                                       env=env, timeout=300)

        wrapper(str(tmp_path / "far"), PYTHON, "stop-at-delete")     # (the same path)
        t0 = time.monotonic()
        cut = apply("cut", 8)
        took = time.monotonic() - t0
        assert cut.returncode == 0, (cut.stdout + cut.stderr)[-4000:]
        assert events(log, "stopping"), events(log)
        got = json.loads((plans / "web1.cut").read_text())
        assert got["failed"] is True and got["complete"] is False, got
        step = {s["id"]: s for s in got["steps"]}[delete[0]]
        assert step["status"] == "failed", got["steps"]
        assert step["detail"].startswith("web1: vacate's deadline of 8 s passed while step "
                                         f"{delete[0]} (delete)"), step["detail"]
        assert f"step {delete[0]} (delete) failed" in got["msg"] and "a rerun resumes" in \
            got["msg"], got["msg"]
        assert took < 240, took
        # the journal here says it failed; the target kept nothing running, nor its lock
        from vacate.observing.model.journal import path_for, read_records

        records = read_records(path_for(str(plans / "web1.plan")))
        failed = [x for x in records if x.get("event") == "outcome" and x["status"] != "ok"]
        assert failed and failed[-1]["step"] == delete[0], failed
        none_left(log)
        lock = f"/run/vacate/apply-{sha[:32]}.lock"
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)       # free: nobody holds it
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        assert not os.path.exists(lock[:-len(".lock")] + ".lease")   # given back at its end
        assert os.path.ismount(m) and os.path.exists(f"{m}/cache")   # half deleted, at most
        # the rerun, the worker left alone: the delete asked again and finished, then the rest
        wrapper(str(tmp_path / "far"), PYTHON)
        again = apply("again", 600)
        assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
        got = json.loads((plans / "web1.again").read_text())
        assert got.get("failed") is not True and got["complete"] is True, got
        assert not os.path.ismount(m)
        none_left(log)
        assert left_on(vol, str(tmp_path / "look")) == {"keep.txt": "kept\n",
                                                        "lost+found": None}
    finally:
        vol.close()
