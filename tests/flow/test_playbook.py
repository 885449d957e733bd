"""Fleets in playbooks: the ``vacate.volume`` collection run by the real ``ansible-playbook``
against a real OpenSSH server on 127.0.0.1 under two names (one far side on CPython 3.8, one
on the system's python3) and a port nothing listens on. Ansible does the fan-out; vacate
decides on the controller (:mod:`vacate.flow.playbook`).

What a user checks: every reachable host answered with the verdict ``check --inventory``
gives (the same document, connection labels and timings aside), the dead one reported by
Ansible as unreachable, nothing left on the targets (Ansible's ``remote_tmp`` emptied by
Ansible), check mode; a rolling retirement (``serial: 1``) stops at the first host whose check
is not safe, the hosts before it planned, those after it untouched; ``become: true`` from an
unprivileged login (a real sudo) runs the modules as root, who sees every process;
``max_fail_percentage: 0`` stops a batch at a failed check, ``throttle: 1`` runs the check one
host at a time."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from harness import collection, extras, sshd, sudoer
from harness.holders import Holders
from harness.inventories import delayed_inventory
from harness.volumes import can_loop_mount, make_volume

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(not sshd.available(), reason="needs openssh-server")]

PY38 = os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python3.8")


@pytest.fixture
def volumes():
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    made = []
    try:
        for _ in range(2):
            v = make_volume("ext4")
            made.append(v)
            os.makedirs(os.path.join(v.mountpoint, "data"))
            with open(os.path.join(v.mountpoint, "data", "a.jsonl"), "wb") as f:
                f.write(os.urandom(4096))
        yield made
    finally:
        for v in made:
            v.close()


def inventory(path, server, hosts: dict[str, dict]) -> str:
    lines = ["[fleet]"]
    for name, v in hosts.items():
        lines.append(" ".join([name, *(f"{k}={x}" for k, x in v.items())]))
    lines += ["[fleet:vars]", f"ansible_ssh_common_args='-F {server.config}'"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def fleet(server) -> dict[str, dict]:
    return {"web1": {"ansible_host": "127.0.0.1", "ansible_port": server.port,
                     "ansible_python_interpreter": PY38},
            "web2": {"ansible_host": "vacate-test",
                     "ansible_python_interpreter": "/usr/bin/python3"},
            "dead": {"ansible_host": "127.0.0.1", "ansible_port": sshd.free_port(),
                     "ansible_python_interpreter": "/usr/bin/python3"}}


CHECK = """\
- hosts: fleet
  gather_facts: false
  tasks:
    - name: Is the volume still used?
      vacate.volume.check:
        path: "{{ vol }}"
        scan_tree: false
      register: usage
    - name: Keep each answer
      ansible.builtin.copy:
        content: "{{ usage | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        mode: "0644"
      delegate_to: localhost
      check_mode: false
"""


def recap(stdout: str) -> dict[str, dict[str, int]]:
    out = {}
    for line in stdout.split("PLAY RECAP", 1)[-1].splitlines():
        m = re.match(r"^(\S+)\s+:\s+(.*)$", line)
        if m:
            out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return out


def comparable(doc: dict) -> dict:
    """A check document without what depends on the door: how the host was reached, the
    time it took, and Ansible's own keys."""
    doc = dict(doc)
    for k in ("elapsed_s", "changed", "safe_to_unmount", "blockers", "next_actions",
              "invocation", "failed", "msg", "_ansible_no_log", "_ansible_delegated_vars"):
        doc.pop(k, None)
    if "problems" in doc:
        doc["warnings"] = doc.pop("problems")
    doc["host"] = {k: v for k, v in doc["host"].items() if k not in ("via", "ssh", "python")}
    return doc


def test_check_on_the_fleet_the_same_answer_as_check_inventory(installed, server, volumes,
                                                               tmp_path):
    busy = volumes[0].mountpoint
    inv = inventory(tmp_path / "hosts.ini", server, fleet(server))
    (tmp_path / "check.yml").write_text(CHECK)
    out, rtmp = tmp_path / "out", tmp_path / "remote-tmp"
    out.mkdir()
    (tmp_path / "checkmode").mkdir()
    env = installed.environ(ANSIBLE_PIPELINING="1", ANSIBLE_REMOTE_TMP=str(rtmp))
    holders = Holders(busy)
    try:
        holders.fd(os.path.join(busy, "data", "a.jsonl"))
        r = collection.playbook(installed, "-i", inv, str(tmp_path / "check.yml"),
                                "-e", f"vol={busy}", "-e", f"out={out}", "--forks", "3",
                                env=env)
        door = subprocess.run([sys.executable, "-m", "vacate", "check", "--no-scan", "--json",
                               "--inventory", inv, busy], capture_output=True, text=True,
                              env=env, timeout=300, check=False)
        checked = collection.playbook(installed, "-i", inv, str(tmp_path / "check.yml"),
                                      "-e", f"vol={busy}", "-e", f"out={tmp_path}/checkmode",
                                      "--check", "--limit", "web1", env=env)
    finally:
        holders.close()
    said = r.stdout + r.stderr
    # the dead host is Ansible's to report: unreachable; the others answered, unchanged
    assert r.returncode == 4, said[-4000:]
    counts = recap(r.stdout)
    assert sorted(counts) == ["dead", "web1", "web2"], said[-4000:]
    assert counts["dead"]["unreachable"] == 1 and counts["dead"]["ok"] == 0
    for n in ("web1", "web2"):      # changed: the copy of the answer, never the check
        assert (counts[n]["ok"], counts[n]["changed"], counts[n]["failed"],
                counts[n]["unreachable"]) == (2, 1, 0, 0), said[-4000:]
    assert "UNREACHABLE!" in r.stdout and "Connection refused" in r.stdout
    got = {n: json.loads((out / f"{n}.json").read_text()) for n in ("web1", "web2")}
    assert sorted(os.listdir(out)) == ["web1.json", "web2.json"]
    for name, d in got.items():
        assert d["changed"] is False and d["safe_to_unmount"] is False
        assert d["schema"] == "vacate.check/1" and d["inventory_hostname"] == name
        assert d["target"]["mountpoint"] == busy
        assert d["blockers"] and len(d["next_actions"]) == len(d["blockers"])
        assert any(c["type"] == "process" and "fd" in c["access"] for c in d["consumers"])
    assert got["web1"]["host"]["via"] == "web1"
    # one result, two doors: check --inventory says the same of the hosts it reached
    assert door.returncode == 1, door.stderr[-3000:]
    docs = {d["inventory_hostname"]: d for d in json.loads(door.stdout)}
    assert docs["dead"]["error"]["kind"] == "unreachable"
    for name in ("web1", "web2"):
        assert comparable(got[name]) == comparable(docs[name])
        assert got[name]["blockers"] == docs[name]["verdict"]["blockers"]
    # nothing left on the targets: Ansible's remote_tmp is emptied by Ansible
    assert not os.path.exists(rtmp) or os.listdir(rtmp) == []
    # check mode: the same answer, nothing refused
    assert checked.returncode == 0, (checked.stdout + checked.stderr)[-3000:]
    assert json.loads((tmp_path / "checkmode" / "web1.json").read_text())[
        "safe_to_unmount"] is False


ROLLING = """\
- hosts: fleet
  serial: 1
  gather_facts: false
  tasks:
    - name: Is the volume still used?
      vacate.volume.check:
        path: "{{ vol }}"
        scan_tree: false
      register: usage
      failed_when: not usage.safe_to_unmount
    - name: Plan its retirement
      vacate.volume.plan:
        path: "{{ vol }}"
        dest: "{{ plans }}/{{ inventory_hostname }}.plan"
      register: planned
"""


def test_serial_1_stops_a_rolling_retirement_at_the_first_unsafe_host(installed, server,
                                                                       volumes, tmp_path):
    busy, idle = volumes[0].mountpoint, volumes[1].mountpoint
    base = fleet(server)["web1"]
    inv = inventory(tmp_path / "hosts.ini", server, {
        "first": {**base, "vol": idle}, "second": {**base, "vol": busy},
        "third": {**base, "vol": idle}})
    (tmp_path / "rolling.yml").write_text(ROLLING)
    plans = tmp_path / "plans"
    env = installed.environ(ANSIBLE_PIPELINING="1")
    holders = Holders(busy)
    try:
        holders.fd(os.path.join(busy, "data", "a.jsonl"))
        dry = collection.playbook(installed, "-i", inv, str(tmp_path / "rolling.yml"),
                                  "-e", f"plans={plans}", "--check", "--limit", "first",
                                  env=env)
        assert dry.returncode == 0, (dry.stdout + dry.stderr)[-3000:]
        assert not plans.exists()           # check mode: the plan said, not written
        r = collection.playbook(installed, "-i", inv, str(tmp_path / "rolling.yml"),
                                "-e", f"plans={plans}", env=env)
    finally:
        holders.close()
    said = r.stdout + r.stderr
    assert r.returncode == 2, said[-4000:]
    got = recap(r.stdout)
    assert got["first"]["ok"] == 2 and got["first"]["changed"] == 1, said[-4000:]
    assert got["second"]["failed"] == 1 and got["second"]["ok"] == 0
    assert "third" not in got                  # never reached: the play stopped there
    assert sorted(os.listdir(plans)) == ["first.plan"]
    plan = json.loads((plans / "first.plan").read_text())
    assert plan["target"]["mountpoint"] == idle and plan["steps"]


OBSERVE = """\
- hosts: fleet
  gather_facts: false
  tasks:
    - name: Small enough for the result
      vacate.volume.observe:
        path: "{{ vol }}"
      register: small
    - name: Bounded to 1000 bytes of result; the rest in a file here
      vacate.volume.observe:
        path: "{{ vol }}"
        max_result_bytes: 1000
        dest: "{{ out }}/{{ inventory_hostname }}.json"
      register: large
    - name: Keep both results
      ansible.builtin.copy:
        content: "{{ {'small': small, 'large': large} | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}.results"
        mode: "0644"
      delegate_to: localhost
"""


def test_observe_bounds_what_the_result_holds(installed, server, volumes, tmp_path):
    """...with the host's port and interpreter in a vaulted host_vars file: Ansible's own
    variables, vault included, reach the modules as they reach any."""
    vol = volumes[1].mountpoint
    inv_dir = tmp_path / "inventory"
    (inv_dir / "host_vars").mkdir(parents=True)
    web1 = dict(fleet(server)["web1"])
    secret = {k: web1.pop(k) for k in ("ansible_port", "ansible_python_interpreter")}
    inventory(inv_dir / "hosts.ini", server, {"web1": web1})
    (tmp_path / "vault-pass").write_text("s3cret\n")
    vaulted = inv_dir / "host_vars" / "web1.yml"
    vaulted.write_text("".join(f"{k}: {v}\n" for k, v in secret.items()))
    subprocess.run([extras.tool("ansible-vault", "ansible-core"), "encrypt",
                    "--vault-password-file", str(tmp_path / "vault-pass"), str(vaulted)],
                   check=True, capture_output=True, env=installed.environ())
    assert vaulted.read_text().startswith("$ANSIBLE_VAULT")
    (tmp_path / "observe.yml").write_text(OBSERVE)
    out = tmp_path / "out"
    out.mkdir()
    r = collection.playbook(installed, "-i", str(inv_dir), str(tmp_path / "observe.yml"),
                            "--vault-password-file", str(tmp_path / "vault-pass"),
                            "-e", f"vol={vol}", "-e", f"out={out}",
                            env=installed.environ(ANSIBLE_PIPELINING="1"))
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    got = json.loads((out / "web1.results").read_text())
    small, large = got["small"], got["large"]
    assert small["changed"] is False and small["observation_file"] is None
    assert small["observation"]["schema"] == "vacate.observation/1"
    assert small["observation"]["target"]["path"] == vol
    assert small["observation"]["host"]["python"] == ""      # (the module: no ssh label)
    assert small["observation"]["host"]["vacate_version"]
    assert large["observation"] is None and large["size_bytes"] > 1000
    assert large["observation_file"] == str(out / "web1.json")
    assert large["summary"]["target"]["mountpoint"] == vol
    # the file is an observation vacate decides from, here
    door = subprocess.run([sys.executable, "-m", "vacate", "check", "--json", "--from",
                           str(out / "web1.json")], capture_output=True, text=True,
                          env=installed.environ(), timeout=120, check=False)
    assert door.returncode in (0, 1), door.stderr[-3000:]       # decided: safe, or in use
    assert json.loads(door.stdout)["target"]["path"] == vol


PLAN = """\
- hosts: fleet
  gather_facts: false
  tasks:
    - name: Plan the retirement
      vacate.volume.plan:
        path: "{{ vol }}"
        dest: "{{ plans }}/{{ inventory_hostname }}.plan"
        delete: [cache]
        keep: [data]
      register: planned
    - name: Keep what the plan came to
      ansible.builtin.copy:
        content: "{{ planned | to_json }}"
        dest: "{{ plans }}/{{ inventory_hostname }}.planned"
        mode: "0644"
      delegate_to: localhost
"""

APPLY = """\
- hosts: fleet
  gather_facts: false
  tasks:
    - name: Apply the approved plan (as root already; no sudo here)
      vacate.volume.apply:
        plan: "{{ plans }}/{{ inventory_hostname }}.plan"
        plan_sha256: "{{ sha }}"
      register: applied
    - name: Keep what the apply came to
      ansible.builtin.copy:
        content: "{{ applied | to_json }}"
        dest: "{{ plans }}/{{ inventory_hostname }}.{{ run }}"
        mode: "0644"
      delegate_to: localhost
      check_mode: false
"""


def test_apply_on_one_host_with_a_holder(installed, server, volumes, tmp_path):
    vol = volumes[1].mountpoint
    os.makedirs(os.path.join(vol, "cache"))
    for i in range(20):
        with open(os.path.join(vol, "cache", f"{i}.bin"), "wb") as f:
            f.write(os.urandom(1024))
    inv = inventory(tmp_path / "hosts.ini", server, {"web1": fleet(server)["web1"]})
    (tmp_path / "plan.yml").write_text(PLAN)
    (tmp_path / "apply.yml").write_text(APPLY)
    plans = tmp_path / "plans"
    plans.mkdir()
    env = installed.environ(ANSIBLE_PIPELINING="1")
    holders = Holders(vol)
    try:
        pid = holders.fd(os.path.join(vol, "data", "a.jsonl"))
        r = collection.playbook(installed, "-i", inv, str(tmp_path / "plan.yml"),
                                "-e", f"vol={vol}", "-e", f"plans={plans}", env=env)
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
        planned = json.loads((plans / "web1.planned").read_text())
        sha = planned["plan_sha256"]
        assert not planned["blocked"], planned

        def apply(run, *more, sha=sha):
            return collection.playbook(installed, "-i", inv, str(tmp_path / "apply.yml"),
                                       "-e", f"plans={plans}", "-e", f"sha={sha}",
                                       "-e", f"run={run}", *more, env=env)

        # a plan that is not the one approved: refused, nothing asked of the host
        wrong = apply("wrong", sha="0" * 64)
        assert wrong.returncode == 2 and "is not the plan approved" in wrong.stdout
        # a plan made for another machine (its machine-id), approved as it is: refused
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        text = (plans / "web1.plan").read_text()
        mid = planned["machine_id"]
        assert mid and text.count(mid) >= 1
        (elsewhere / "web1.plan").write_text(text.replace(mid, "0" * len(mid)))
        foreign = collection.playbook(
            installed, "-i", inv, str(tmp_path / "apply.yml"), "-e", f"plans={elsewhere}",
            "-e", "sha=" + hashlib.sha256((elsewhere / "web1.plan").read_bytes()).hexdigest(),
            "-e", "run=foreign", env=env)
        assert foreign.returncode == 2, foreign.stdout[-3000:]
        assert f"the plan was made on machine {'0' * len(mid)}" in foreign.stdout
        assert "nothing was changed" in foreign.stdout
        # check mode and diff: the dry run, each step said, nothing changed
        dry = apply("dry", "--check", "--diff")
        assert dry.returncode == 0, (dry.stdout + dry.stderr)[-4000:]
        said = json.loads((plans / "web1.dry").read_text())
        assert said["changed"] is False and said["journal"] is None
        assert [s["id"] for s in said["steps"]] == [s["id"] for s in planned["steps"]]
        assert planned["steps"][0]["summary"] in dry.stdout         # --diff shows the steps
        assert os.path.ismount(vol) and os.path.exists(f"/proc/{pid}")
        assert not os.path.exists(str(plans / "web1.plan") + ".journal")
        # the apply: the holder ended, the cache deleted, the volume unmounted; the journal here
        done = apply("done")
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        got = json.loads((plans / "web1.done").read_text())
        assert got["changed"] is True and got["complete"] is True, got
        assert got["journal"] == str(plans / "web1.plan") + ".journal"
        assert os.path.exists(got["journal"])
        assert not os.path.ismount(vol)
        # again: nothing to do, nothing changed
        again = apply("again")
        assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
        got = json.loads((plans / "web1.again").read_text())
        assert got["changed"] is False and all(s["earlier"] for s in got["steps"]
                                               if s["kind"] != "check"), \
            [(s["id"], s["status"], s["earlier"], s["detail"]) for s in got["steps"]]
    finally:
        holders.close()


def test_a_second_apply_is_refused_and_a_dropped_connection_resumes(installed, server,
                                                                     volumes, tmp_path):
    """A holder that ignores TERM keeps the first step busy for its grace period (30 s: a
    second apply, and a direct ask of the far lock beside it, each wait 15 s for the far
    lock before they are refused): a second apply of the same plan from another controller
    directory is refused meanwhile; the connection of the first is then cut (its ssh
    processes killed): that step fails, and the rerun asks the host whether it is done and
    finishes the apply."""
    vol = volumes[1].mountpoint
    os.makedirs(os.path.join(vol, "cache"))
    inv = inventory(tmp_path / "hosts.ini", server, {"web1": fleet(server)["web1"]})
    (tmp_path / "plan.yml").write_text(PLAN.replace("keep: [data]", "keep: [data]\n"
                                                    "        grace: 30"))
    (tmp_path / "apply.yml").write_text(APPLY)
    plans, other = tmp_path / "plans", tmp_path / "other"
    plans.mkdir()
    other.mkdir()
    cp = tmp_path / "cp"
    env = installed.environ(ANSIBLE_PIPELINING="1", ANSIBLE_SSH_CONTROL_PATH_DIR=str(cp))
    holders = Holders(vol)
    try:
        holders.sh("stubborn", f"trap '' TERM; exec 3<'{vol}/data/a.jsonl'")
        r = collection.playbook(installed, "-i", inv, str(tmp_path / "plan.yml"),
                                "-e", f"vol={vol}", "-e", f"plans={plans}", env=env)
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
        sha = json.loads((plans / "web1.planned").read_text())["plan_sha256"]
        shutil.copy(plans / "web1.plan", other / "web1.plan")
        tool = extras.tool("ansible-playbook", "ansible-core")

        def start(where, run):
            return subprocess.Popen([tool, "-i", inv, str(tmp_path / "apply.yml"), "-e",
                                     f"plans={where}", "-e", f"sha={sha}", "-e", f"run={run}"],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, env=env)
        first = start(plans, "first")
        journal = str(plans / "web1.plan") + ".journal"
        deadline = time.monotonic() + 60
        while not (os.path.exists(journal) and "01-end-process" in Path(journal).read_text()):
            assert time.monotonic() < deadline and first.poll() is None, \
                first.communicate()[0][-3000:]
            time.sleep(0.2)
        # the far side's lock, asked directly as another apply would (another token), and
        # beside it a second apply from elsewhere through the module: each waits for the
        # lock, then is refused
        ansible = extras.tool("ansible", "ansible-core")
        asked = subprocess.Popen([ansible, "-i", inv, "web1", "-m", "vacate.volume.act", "-a",
                                  json.dumps({"op": "apply_done",
                                              "args": {"step": "01-end-process"},
                                              "sha256": sha, "token": "elsewhere:/plans/x"})],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env)
        second = start(other, "second")
        busy = asked.communicate(timeout=120)[0]
        assert "another vacate apply of this plan" in busy, busy[-3000:]
        # the second apply is refused, nothing changed
        said = second.communicate(timeout=120)[0]
        assert second.returncode == 2, said[-3000:]
        assert "nothing was changed" in said or "nothing was done" in said, said[-3000:]
        assert not (other / "web1.second").exists()
        # the first one's connection cut while its step runs
        cut = ssh_processes(str(cp))
        assert cut, "no ssh process of the first apply to cut"
        for pid in cut:
            os.kill(pid, signal.SIGKILL)
        said = first.communicate(timeout=120)[0]
        assert first.returncode == 2, said[-3000:]
        got = json.loads((plans / "web1.first").read_text()) if \
            (plans / "web1.first").exists() else None
        assert "01-end-process" in said and "a rerun resumes there" in said, said[-3000:]
        assert got is None or got["steps"][0]["status"] == "failed"
        # the rerun: the step asked again (done once its holder is gone), the rest carried out
        deadline = time.monotonic() + 120
        while True:
            again = start(plans, "again")
            said = again.communicate(timeout=300)[0]
            if again.returncode == 0 or "another vacate apply" not in said \
                    or time.monotonic() > deadline:
                break
            time.sleep(2)             # the cut step's process there still ends its step
        assert again.returncode == 0, said[-3000:]
        got = json.loads((plans / "web1.again").read_text())
        assert got["complete"] is True and not os.path.ismount(vol), got
    finally:
        holders.close()


def ssh_processes(needle: str) -> list[int]:
    """The ssh processes (Ansible's ControlMaster and its clients) naming ``needle``: by
    their command name, as the master renames its command line (``ssh: PATH [mux]``)."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if pid.isdigit() and comm == b"ssh" and needle.encode() in cmdline:
            out.append(int(pid))
    return out


BECOME = """\
- hosts: fleet
  become: true
  gather_facts: false
  tasks:
    - name: Who runs the module
      ansible.builtin.command: id -u
      register: who
      changed_when: false
    - name: Is the volume still used?
      vacate.volume.check:
        path: "{{ vol }}"
        scan_tree: false
      register: usage
      failed_when: false
    - name: Keep the answer
      ansible.builtin.copy:
        content: "{{ {'uid': who.stdout, 'usage': usage} | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}-{{ run }}.json"
        mode: "0644"
      delegate_to: localhost
      become: false
"""


@pytest.mark.skipif(not sudoer.available(), reason="needs root, sudo and useradd")
def test_become_runs_the_check_as_root_through_a_real_sudo(installed, volumes, tmp_path):
    """Logged in as a throwaway unprivileged user, ``become: true`` (sudo, no password) runs
    the module as root: it sees the root-owned process that holds the volume; the same
    check without ``become`` cannot look into root's processes and says so."""
    busy = volumes[0].mountpoint
    os.chmod(os.path.dirname(busy), 0o755)      # (make_volume's directory is root's alone)
    # an sshd of its own: the user reads its authorized_keys, so nothing of it under
    # pytest's root-only directories
    sdir = tempfile.mkdtemp(prefix="vacate-become-sshd-")
    os.chmod(sdir, 0o755)
    holders = Holders(busy)
    server = None
    try:
        server = sshd.start(os.path.join(sdir, "sshd"))
        os.chmod(server.dir, 0o755)
        with sudoer.sudoer() as user:
            inv = inventory(tmp_path / "hosts.ini", server, {"web1": {
                "ansible_host": "127.0.0.1", "ansible_port": server.port,
                "ansible_user": user.name, "ansible_python_interpreter": "/usr/bin/python3"}})
            (tmp_path / "become.yml").write_text(BECOME)
            out = tmp_path / "out"
            out.mkdir()
            # no ControlPersist: nothing of the user's left logged in when it is removed
            env = installed.environ(ANSIBLE_PIPELINING="1",
                                    ANSIBLE_SSH_ARGS="-o ControlMaster=no")
            pid = holders.fd(os.path.join(busy, "data", "a.jsonl"))

            (tmp_path / "plain.yml").write_text(BECOME.replace("become: true",
                                                               "become: false", 1))

            def play(run):
                r = collection.playbook(installed, "-i", inv, str(tmp_path / f"{run}.yml"),
                                        "-e", f"vol={busy}", "-e", f"out={out}",
                                        "-e", f"run={run}", env=env)
                assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
                return json.loads((out / f"web1-{run}.json").read_text())

            plain = play("plain")
            became = play("become")
    finally:
        holders.close()
        if server is not None:
            server.stop()
        shutil.rmtree(sdir, ignore_errors=True)
    # the user and its sudoers drop-in are gone
    assert not os.path.exists(f"/etc/sudoers.d/vacate-test-{user.name[2:]}")
    assert subprocess.run(["id", user.name], capture_output=True, check=False).returncode
    assert plain["uid"] == str(user.uid) and became["uid"] == "0"
    # as root: the holder found, the volume in use
    u = became["usage"]
    assert u["safe_to_unmount"] is False, u
    assert any(c["type"] == "process" and "fd" in c["access"] for c in u["consumers"]), u
    # as the plain user: root's processes are out of sight (the holder's among them): could
    # not tell, never "safe"
    p = plain["usage"]
    assert not any(c["type"] == "process" for c in p["consumers"]), p
    assert p["safe_to_unmount"] is None and p["verdict"]["safe_to_unmount"] is None, p
    assert p["verdict"]["blockers"] == []
    assert {"code": "permission-denied", "path": f"/proc/{pid}", "blocks_verdict": True} in [
        {k: x.get(k) for k in ("code", "path", "blocks_verdict")}
        for x in p["verdict"]["unknowns"]], p["verdict"]["unknowns"][:5]


GUARDED = """\
- hosts: fleet:slow
  serial: 3
  max_fail_percentage: 0
  gather_facts: false
  tasks:
    - name: Before the check
      ansible.builtin.set_fact:
        t0: "{{ now().timestamp() }}"
    - name: Is the volume still used? (one host at a time)
      vacate.volume.check:
        path: "{{ vol }}"
        scan_tree: false
      register: usage
      throttle: 1
    - name: Keep each answer
      ansible.builtin.copy:
        content: "{{ {'t0': t0 | float, 't1': now().timestamp(), 'usage': usage} | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        mode: "0644"
      delegate_to: localhost
"""


def test_max_fail_percentage_stops_the_batch_and_throttle_runs_one_host_at_a_time(
        installed, server, volumes, tmp_path):
    """``serial: 3`` with ``max_fail_percentage: 0``: one host of three whose check fails to
    look (its path is not there), and no host goes on to the next task; the same play on
    three live hosts, each a second away, with ``throttle: 1`` on the check: the check takes
    at least three seconds (one host after another), and every host goes on.

    (An unreachable host would not do for the first: Ansible counts only failed hosts
    against ``max_fail_percentage``, ansible/ansible#56265; ``any_errors_fatal`` stops on
    either.)"""
    idle = volumes[1].mountpoint
    (tmp_path / "guarded.yml").write_text(GUARDED)
    # no ControlPersist: every connection of the check pays the delay
    env = installed.environ(ANSIBLE_PIPELINING="1", ANSIBLE_SSH_ARGS="-o ControlMaster=no")

    def play(inv, out, *more):
        out.mkdir()
        t = time.monotonic()
        r = collection.playbook(installed, "-i", inv, str(tmp_path / "guarded.yml"),
                                "-e", f"out={out}", "--forks", "3", *more, env=env)
        return r, time.monotonic() - t

    base = fleet(server)["web1"]
    hosts = {"web1": {**base, "vol": idle}, "web2": {**base, "vol": idle},
             "web3": {**base, "vol": os.path.join(idle, "not-there")}}
    stopped, _ = play(inventory(tmp_path / "broken.ini", server, hosts), tmp_path / "broken")
    said = stopped.stdout + stopped.stderr
    assert stopped.returncode == 2, said[-4000:]
    counts = recap(stopped.stdout)
    assert sorted(counts) == ["web1", "web2", "web3"], said[-4000:]
    assert (counts["web3"]["ok"], counts["web3"]["failed"]) == (1, 1), said[-4000:]
    for n in ("web1", "web2"):             # the set_fact and the check; not the copy
        assert (counts[n]["ok"], counts[n]["changed"], counts[n]["failed"]) == (2, 0, 0), \
            said[-4000:]
    assert "Keep each answer" not in stopped.stdout, said[-4000:]
    assert os.listdir(tmp_path / "broken") == []

    delay, names = 1.0, ["h1", "h2", "h3"]

    def throttled(limit, run):
        (tmp_path / "guarded.yml").write_text(GUARDED.replace("throttle: 1",
                                                              f"throttle: {limit}"))
        log = tmp_path / f"{run}.log"
        inv = delayed_inventory(tmp_path / f"{run}.ini", server, names, delay, log=str(log))
        r, wall = play(inv, tmp_path / run, "-e", f"vol={idle}")
        said = r.stdout + r.stderr
        assert r.returncode == 0, said[-4000:]
        assert sorted(os.listdir(tmp_path / run)) == [f"{n}.json" for n in names]
        got = {n: json.loads((tmp_path / run / f"{n}.json").read_text()) for n in names}
        for n, d in got.items():
            assert d["usage"]["safe_to_unmount"] is True, d
            assert d["usage"]["inventory_hostname"] == n
        # the check began on all three at once (t0); the first copy after all three checks
        took = min(d["t1"] for d in got.values()) - min(d["t0"] for d in got.values())
        spans = sorted(tuple(map(float, line.split())) for line in
                       log.read_text().splitlines())
        assert len(spans) >= len(names), spans
        overlaps, open_until = 0, spans[0][1]
        for start, end in spans[1:]:          # connections that began while one was open
            overlaps += start < open_until
            open_until = max(open_until, end)
        return took, wall, overlaps

    # throttle 1: not two connections open at once, one host after another
    took, wall, overlaps = throttled(1, "one")
    assert overlaps == 0, overlaps
    assert took >= len(names) * delay and wall >= len(names) * delay
    # without it: the three hosts' connections at once
    took_all, _, overlaps = throttled(0, "all")
    assert overlaps >= len(names) - 1, overlaps
    assert took_all < took, (took_all, took)
