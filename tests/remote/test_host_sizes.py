"""``--host`` and ``--ct`` at the sizes people have: a real volume of 200,000 entries and more
(past the walk's in-process start, ``INLINE_ENTRIES``, past the recognisers' and the delete's
thresholds for working side by side), looked at and retired over a real OpenSSH server on
127.0.0.1, with CPython 3.8, Debian's ``python3`` and CPython 3.13 as far sides.

What a user checks: ``scan``, ``check``, ``observe``, ``plan`` and ``apply`` answer (a far side
that forks while a thread holds a lock hangs forever here: every command is bounded by a
timeout, so a hang fails the test, never the suite), the far answers equal the local ones,
the far side really works in parallel (its walkers, recognisers and deleters are forked
processes) without ever forking under a thread (CPython 3.12+'s warning is made an error),
a far worker that stops is a named stall that ends the command with exit 3 and leaves
nothing behind on either side, one stuck host costs a fleet only its own row, and a far
walk's progress shows here on a terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time

import pytest
from harness import extras, sshd
from harness.big_volume import ENTRIES, big_volume, fill, in_use, left_on
from harness.far_watch import events, none_left, worker_forks, wrapper

VACATE = [sys.executable, "-m", "vacate"]
PYTHONS = {"3.8": os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python3.8"),
           "debian": "/usr/bin/python3",
           "3.13": os.path.expanduser("~/.pyenv/versions/3.13.0/bin/python3.13")}
TIMEOUT = 240          # a far side that hangs fails here, long after a slow machine answers

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(not sshd.available(), reason="needs openssh-server")]


def far_pythons() -> list:
    return [pytest.param(p, id=k) for k, p in PYTHONS.items() if os.path.exists(p)]


def vacate(*args, env=None, timeout=TIMEOUT):
    return subprocess.run([*VACATE, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


def no_fork_warning(log: str) -> None:
    assert not events(log, "warning"), events(log, "warning")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = sshd.start(str(tmp_path_factory.mktemp("sshd")))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def volume():
    """200,000 entries of data, a model's config, and a file a process holds open."""
    with in_use() as got:
        yield got


@pytest.mark.parametrize("python", far_pythons())
def test_scan_check_and_observe_of_200k_entries_over_ssh(volume, server, python, tmp_path):
    vol, holder_pid = volume
    m = vol.mountpoint
    env = server.environ()
    far, log = wrapper(str(tmp_path / "far"), python)

    local = vacate("scan", "--json", m, env=dict(env, VACATE_NO_C="1"))
    r = vacate("scan", "--host", "vacate-test", "--python", far, "--json", "--no-recognise", m,
               env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    got, want = json.loads(r.stdout)["totals"], json.loads(local.stdout)["totals"]
    assert got["entries"] >= ENTRIES and got["entries"] == want["entries"]
    for k in ("files", "dirs", "disk_bytes", "apparent_bytes"):
        assert got[k] == want[k], k
    # the far walk was shared among forked walkers, and never forked under a thread
    assert len(worker_forks(log, "popen_fork.py")) >= 2, events(log)
    no_fork_warning(log)

    os.remove(log)
    r = vacate("scan", "--host", "vacate-test", "--python", far, "--json", m, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["totals"]["entries"] == want["entries"]
    # the recognisers looked at the volume's items side by side there
    assert worker_forks(log, "sidebyside.py"), events(log)
    no_fork_warning(log)

    os.remove(log)
    r = vacate("check", "--host", "vacate-test", "--python", far, "--json", m, env=env)
    here = vacate("check", "--json", m, env=env)
    assert r.returncode == here.returncode == 1, r.stderr[-3000:]
    doc, ref = json.loads(r.stdout), json.loads(here.stdout)
    assert doc["verdict"]["safe_to_unmount"] is False
    holder = f"process:{holder_pid}:"
    assert any(c["id"].startswith(holder) for c in doc["consumers"])
    assert sorted(c["id"] for c in doc["consumers"]) == sorted(c["id"] for c in ref["consumers"])

    def items(d):
        return [{k: i[k] for k in ("id", "kind", "status", "apparent_bytes", "disk_bytes",
                                   "files", "dirs")} for i in d["items"]]
    assert items(doc) == items(ref)
    no_fork_warning(log)

    out = tmp_path / "obs.json"
    r = vacate("observe", "--host", "vacate-test", "--python", far, "-o", str(out), m, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    obs = json.loads(out.read_text())
    assert obs["schema"].startswith("vacate.observation/")
    assert obs["host"]["via"] == "vacate-test"
    assert any(c["id"].startswith(holder) for c in obs["consumers"])
    none_left(log)


def planned(vol, server, far: str, tmp_path) -> tuple[str, dict]:
    """On ``vol``: 200,000 entries to delete (``cache``) and a file to keep; the plan made
    over ssh with ``far`` as the far python (its path, its document)."""
    m = vol.mountpoint
    fill(os.path.join(m, "cache"))
    with open(f"{m}/keep.txt", "w") as f:
        f.write("kept\n")
    plan = str(tmp_path / "big.plan")
    r = vacate("plan", m, "--host", "vacate-test", "--python", far, "--delete", "cache",
               "--keep", "keep.txt", "--archive-to", str(tmp_path / "backup"), "--grace", "2",
               "-o", plan, "--json", env=server.environ())
    assert r.returncode == 0, r.stderr[-3000:]
    return plan, json.loads(r.stdout)


@pytest.mark.parametrize("python", far_pythons())
def test_plan_and_apply_delete_200k_entries_over_ssh(server, python, tmp_path):
    vol = big_volume()
    try:
        m = vol.mountpoint
        env = server.environ()
        far, log = wrapper(str(tmp_path / "far"), python)
        plan, doc = planned(vol, server, far, tmp_path)
        deletes = [s for s in doc["steps"] if s["kind"] == "delete"]
        assert deletes, [s["kind"] for s in doc["steps"]]
        os.remove(log)
        r = vacate("apply", plan, "--yes", env=env)
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
        assert not os.path.ismount(m)
        assert left_on(vol, str(tmp_path / "look")) == {"keep.txt": "kept\n",
                                                        "lost+found": None}
        # the delete was shared among forked deleters there, never forked under a thread
        assert worker_forks(log, "delete.py"), events(log)
        no_fork_warning(log)
        none_left(log)
    finally:
        vol.close()


def test_an_entries_file_comes_back_in_pieces_whole(volume, server, tmp_path, monkeypatch):
    """``plan --host``'s entries file crosses in pieces: the 200,000 entries' file (~1 MB)
    fetched 64 KiB at a time from the far side is the file a local recording writes."""
    import hashlib

    from vacate import remote
    from vacate.observing.entries import write_entries_file
    from vacate.remote.ssh import SshTarget

    vol, _ = volume
    data = os.path.join(vol.mountpoint, "data")
    dev = os.lstat(vol.mountpoint).st_dev
    monkeypatch.setenv("VACATE_SSH_ARGS", f"-F {server.config}")
    monkeypatch.setattr(remote, "ENTRIES_PIECE", 64 << 10)
    asked = []
    for d in ("far", "here"):
        os.mkdir(tmp_path / d)
    with remote.Remote(SshTarget.parse("vacate-test", python=PYTHONS["debian"])) as far:
        call = far.call

        def counted(op, on_note=None, **args):
            asked.append(op)
            return call(op, on_note, **args)
        far.call = counted
        got = far.write_entries(data, dev=dev, directory=str(tmp_path / "far"))
    here = write_entries_file(data, dev=dev, directory=str(tmp_path / "here"))
    with open(tmp_path / "far" / got.file, "rb") as f:
        body = f.read()
    assert asked.count("entries_piece") == -(-len(body) // (64 << 10)) >= 8, asked
    assert hashlib.sha256(body).hexdigest() == got.sha256 == here.sha256
    assert (got.entries, got.file) == (here.entries, here.file)


def test_a_stopped_far_worker_is_a_named_stall_and_nothing_is_left(volume, server, tmp_path):
    vol, _ = volume
    far, log = wrapper(str(tmp_path / "far"), PYTHONS["debian"], "stop-worker")
    t0 = time.monotonic()
    r = vacate("scan", "--host", "vacate-test", "--python", far, "--stall-timeout", "3",
               vol.mountpoint, env=server.environ(), timeout=60)
    took = time.monotonic() - t0
    assert events(log, "stopping"), events(log)
    assert r.returncode == 3, (r.stdout + r.stderr)[-3000:]
    assert "vacate-test" in r.stderr and "nothing came for 3 s" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert took < 3 + 20, took
    # the stopped worker and the supervisor are gone there (SIGKILL ends a stopped process)
    none_left(log)


def test_a_far_worker_stopped_in_a_delete_fails_the_step_and_the_rerun_finishes(server,
                                                                                   tmp_path):
    vol = big_volume()
    try:
        m = vol.mountpoint
        env = server.environ()
        far, log = wrapper(str(tmp_path / "far"), PYTHONS["debian"])
        plan, _doc = planned(vol, server, far, tmp_path)
        wrapper(str(tmp_path / "far"), PYTHONS["debian"], "stop-at-delete")  # (same path)
        r = vacate("apply", plan, "--yes", "--stall-timeout", "3", env=env)
        assert events(log, "stopping"), events(log)
        assert r.returncode not in (0, 4), (r.stdout + r.stderr)[-3000:]
        said = r.stdout + r.stderr
        assert "nothing came for 3 s" in said and "vacate-test" in said, said[-3000:]
        assert "Traceback" not in said
        none_left(log)
        from vacate.observing.model.journal import path_for, read_records

        records = read_records(path_for(plan))
        failed = [x for x in records if x.get("event") == "outcome" and x["status"] != "ok"]
        assert failed and "delete" in failed[-1]["step"], failed
        assert "while step" in failed[-1]["detail"] and "(delete)" in failed[-1]["detail"]
        assert os.path.ismount(m) and os.path.exists(f"{m}/cache")   # half deleted, at most
        # the rerun, with a worker that does not stop, goes on from there and ends retired
        wrapper(str(tmp_path / "far"), PYTHONS["debian"])
        r = vacate("apply", plan, "--yes", env=env)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        assert not os.path.ismount(m)
        none_left(log)
    finally:
        vol.close()


def test_a_far_walk_shows_its_progress_on_a_terminal(volume, server, tmp_path):
    vol, _ = volume
    far, _log = wrapper(str(tmp_path / "far"), PYTHONS["debian"], "slow-walk")
    argv = [*VACATE, "scan", "--host", "vacate-test", "--python", far, "--no-recognise",
            vol.mountpoint]
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=slave, env=server.environ())
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
            elif p.poll() is not None:
                break
        assert p.wait(timeout=TIMEOUT) == 0
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    text = seen.decode("utf-8", "replace")
    assert "walking" in text and "vacate-test" in text and " entries" in text, text[-2000:]
    # and not where stderr is no terminal
    r = vacate("scan", "--host", "vacate-test", "--python", far, "--no-recognise",
               vol.mountpoint, env=server.environ())
    assert r.returncode == 0 and " entries," not in r.stderr, r.stderr[-2000:]


def test_one_stalled_host_costs_a_fleet_only_its_own_row(volume, server, tmp_path):
    """A fleet at size: the healthy host's 200,000 entries walked there, the stuck one's
    row said as a stall, within the stall deadline and not the fleet's."""
    extras.tool("ansible-inventory", "ansible-core")     # (vacate finds it beside itself)
    vol, _ = volume
    stuck, log = wrapper(str(tmp_path / "stuck"), PYTHONS["debian"], "stop-worker")
    inv = tmp_path / "hosts.ini"
    inv.write_text("[fleet]\n"
                   f"good ansible_host=vacate-test ansible_python_interpreter=/usr/bin/python3\n"
                   f"stuck ansible_host=vacate-test ansible_python_interpreter={stuck}\n"
                   "[all:vars]\n"
                   f"ansible_ssh_common_args=-F {server.config}\n")
    env = dict(os.environ)
    env.pop("VACATE_SSH_ARGS", None)
    t0 = time.monotonic()
    r = vacate("check", "--json", "--inventory", str(inv), "--stall-timeout", "3",
               vol.mountpoint, env=env, timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stderr[-3000:]      # the good host's answer: in use
    docs = {d["inventory_hostname"]: d for d in json.loads(r.stdout)}
    assert docs["good"]["verdict"]["safe_to_unmount"] is False
    data = {i["id"]: i for i in docs["good"]["items"]}["item:data"]
    assert data["files"] + data["dirs"] == ENTRIES + 1             # (data/ itself counts)
    bad = docs["stuck"]
    assert bad["verdict"]["safe_to_unmount"] is None and bad["error"]["kind"] == "stalled", bad
    assert "nothing came for 3 s" in bad["error"]["message"]
    assert took < 60, took
    none_left(log)


def test_scan_and_check_through_ct_of_200k_entries(tmp_path):
    """The Proxmox host's own seat: ``--ct 129 /data`` walks the container's volume from the
    host, past the walk's thresholds, with its C loops and with the Python ones."""
    from harness.ct129 import _wait_serving, container_129

    with container_129(tmp_path, volume={"size_mb": 400, "inodes": ENTRIES + 30_000}) as got:
        vol, host, box, _conf = got
        fill(os.path.join(vol.mountpoint, "data"))
        _wait_serving(box)
        env = host.environ()
        r = vacate("check", "--ct", "129", "/data", "--json", env=env)
        assert r.returncode == 1, r.stderr[-3000:]
        doc = json.loads(r.stdout)
        assert doc["host"]["via"] == "CT 129"
        assert any(c["type"] == "process" and c.get("unit") == "sglang-qwen.service"
                   for c in doc["consumers"]), [c["id"] for c in doc["consumers"]]
        data = {i["id"]: i for i in doc["items"]}["item:data"]
        assert data["files"] + data["dirs"] == ENTRIES + 1      # (data/ itself counts)
        r = vacate("scan", "--ct", "129", "/data", "--json", env=dict(env, VACATE_NO_C="1"))
        assert r.returncode == 0, r.stderr[-3000:]
        scanned = json.loads(r.stdout)
        assert scanned["totals"]["entries"] > ENTRIES
        again = {i["id"]: i for i in scanned["items"]}["item:data"]
        assert (again["files"], again["dirs"]) == (data["files"], data["dirs"])


@pytest.mark.skipif(not os.path.exists(PYTHONS["3.13"]), reason="pyenv has no CPython 3.13")
def test_the_watching_far_python_makes_a_fork_under_threads_an_error(tmp_path):
    """The harness the tests above trust: under 3.13 a fork while a thread runs ends the far
    process (exit 70) and is logged, as the old far worker's walk pool would have."""
    far, log = wrapper(str(tmp_path / "far"), PYTHONS["3.13"])
    code = ("import os, threading, time\n"
            "threading.Thread(target=time.sleep, args=(2,)).start()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    r = subprocess.run([far, "-I", "-S", "-c", code], capture_output=True, timeout=60,
                       check=False)
    assert r.returncode == 70
    assert "multi-threaded" in events(log, "warning")[0]["message"]
    r = subprocess.run([far, "-I", "-S", "-c", code.replace("threading.Thread", "(lambda **k: "
                        "type('T', (), {'start': lambda s: None})())")],
                       capture_output=True, timeout=60, check=False)
    assert r.returncode == 0 and len(events(log, "warning")) == 1
