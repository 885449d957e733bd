"""``--host``: vacate looks at another machine through a real OpenSSH server (on 127.0.0.1,
throwaway keys, root's login by key), with nothing of vacate installed there: the far side is
run with ``-I -S`` by the interpreter the test names (CPython 3.8 from pyenv, Debian's
``/usr/bin/python3``), so only the payload sent on stdin can be what runs.

What a user checks: the document equals a local run's (the local one without the C modules,
which a far side never has); a changed host key, a host that does not answer, a login that
prints a banner, a pty, an old or missing python3 are each one clear line naming the host,
exit 3, never a hang or a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from harness import sshd
from harness.holders import Holders
from harness.observed import same_document
from harness.volumes import can_loop_mount, make_volume

VACATE = [sys.executable, "-m", "vacate"]
PY38 = os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python3.8")
PY36 = os.path.expanduser("~/.pyenv/versions/3.6.15/bin/python3.6")
DEBIAN = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(not sshd.available(), reason="needs openssh-server")


def far_pythons() -> list[str]:
    return [p for p in (PY38, DEBIAN) if os.path.exists(p)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = sshd.start(str(tmp_path_factory.mktemp("sshd")))
    yield s
    s.stop()


def vacate(*args, env=None, timeout=180):
    return subprocess.run([*VACATE, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


def document(r) -> dict:
    assert r.returncode in (0, 1, 3), r.stderr[-3000:]
    doc = json.loads(r.stdout)
    doc.pop("elapsed_s", None)
    return doc


@pytest.fixture
def held():
    """A real volume with holders of several access kinds and kernel users."""
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4")
    h = Holders(v.mountpoint)
    try:
        m = v.mountpoint
        for d in ("models/q", "data", "work"):
            os.makedirs(os.path.join(m, d), exist_ok=True)
        with open(os.path.join(m, "models/q/config.json"), "w") as f:
            json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, f)
        for name in ("models/q/w.bin", "data/a.jsonl"):
            with open(os.path.join(m, name), "wb") as f:
                f.write(os.urandom(8192))
        h.fd(f"{m}/data/a.jsonl")
        h.mmap_only(f"{m}/models/q/w.bin")
        h.cwd(f"{m}/work")
        h.deleted(f"{m}/data/gone.bin")
        h.swapfile(f"{m}/swapfile", "ext4")
        h.loop_device(f"{m}/disk.img")
        yield v, h
    finally:
        h.close()
        v.close()


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("python", far_pythons())
def test_check_over_ssh_is_the_local_check(server, held, python):
    v, _h = held
    env = server.environ()
    hosts = []

    def look(*extra, **kw):
        def run():
            r = vacate("check", "--json", *extra, v.mountpoint, **kw)
            hosts.append(json.loads(r.stdout)["host"] if r.stdout else None)
            return r
        return run

    _a, b = same_document(look(env=dict(env, VACATE_NO_C="1")),
                         look("--host", "vacate-test", "--python", python, env=env),
                         drop=("elapsed_s", "host"))
    here, there = hosts[-2:]
    assert there["via"] == "vacate-test" and here["via"] is None
    assert here["machine_id"] and there["machine_id"] == here["machine_id"]
    assert b["verdict"]["safe_to_unmount"] is False
    kinds = {k for c in b["consumers"] if c["type"] == "process" for k in c["access"]}
    assert {"fd", "mmap", "cwd"} <= kinds
    assert {"swap", "loop-device"} <= {c["type"] for c in b["consumers"]}
    # the table names where it looked
    table = vacate("check", "--no-scan", "--host", "vacate-test", "--python", python,
                   v.mountpoint, env=env)
    assert table.returncode == 1 and table.stdout.startswith("vacate-test: ")


@pytest.mark.slow
@pytest.mark.root
def test_scan_observe_and_plan_over_ssh(server, held, tmp_path):
    v, _h = held
    env = server.environ()
    py = far_pythons()[0]
    far = vacate("scan", "--json", "--host", "vacate-test", "--python", py, v.mountpoint,
                 env=env)
    assert document(far)["host"]["via"] == "vacate-test"
    same_document(lambda: vacate("scan", "--json", v.mountpoint, env=dict(env, VACATE_NO_C="1")),
                  lambda: vacate("scan", "--json", "--host", "vacate-test", "--python", py,
                                 v.mountpoint, env=env),
                  drop=("elapsed_s", "host"))
    # an observation made over ssh decides here as the direct check does (both taken
    # again where the machine changed between them: the kernel swapping a page onto the
    # volume's swap file, say)
    obs = tmp_path / "obs.json"

    def decided_here():
        r = vacate("observe", "--host", "vacate-test", "--python", py, v.mountpoint, "-o",
                   str(obs), env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(obs.read_text())["host"]["via"] == "vacate-test"
        return vacate("check", "--json", "--from", str(obs))

    same_document(decided_here,
                  lambda: vacate("check", "--json", "--host", "vacate-test", "--python", py,
                                 v.mountpoint, env=env))
    # a plan made over ssh records the machine and how it was reached
    plan = tmp_path / "far.plan"
    r = vacate("plan", "--host", "vacate-test", "--python", py, v.mountpoint,
               "--archive-to", str(tmp_path / "bk"), "--delete", "models", "-o", str(plan),
               env=env)
    assert r.returncode in (0, 4), r.stderr
    doc = json.loads(plan.read_text())
    with open("/etc/machine-id") as f:
        assert doc["observation"]["host"]["machine_id"] == f.read().strip()
    assert doc["observation"]["host"]["via"] == "vacate-test"
    # the item to delete was recorded there; its entries file is kept here, beside the plan
    ref = next(it["entries"] for it in doc["items"] if it["action"] == "delete")
    kept = tmp_path / ref["file"]
    assert kept.exists() and ref["entries"] >= 3
    import hashlib

    assert hashlib.sha256(kept.read_bytes()).hexdigest() == ref["sha256"]
    before = os.listdir(v.mountpoint)
    # applied there (tests/remote/test_apply_ssh.py), never on another host
    r = vacate("apply", str(plan), "--yes", "--host", "root@127.0.0.1:1", env=env)
    assert r.returncode == 2 and "made for vacate-test, not root@127.0.0.1:1" in r.stderr, \
        r.stderr
    assert os.listdir(v.mountpoint) == before
    assert not os.path.exists(str(plan) + ".journal")


def test_a_changed_host_key_is_refused_and_known_hosts_is_left_alone(server, tmp_path):
    other = sshd.keygen(str(tmp_path / "other"))
    known = os.path.join(server.dir, "known_hosts")
    server.trust(other)
    try:
        with open(known) as f:
            before = f.read()
        t0 = time.monotonic()
        r = vacate("check", "--no-scan", "--host", "vacate-test", "/", env=server.environ())
        assert r.returncode == 3, r.stderr
        assert "vacate-test: ssh could not reach it" in r.stderr
        assert "Traceback" not in r.stderr and time.monotonic() - t0 < 30
        with open(known) as f:
            assert f.read() == before
    finally:
        server.trust(server.host_pub)


@pytest.mark.slow
def test_a_host_that_does_not_answer_is_an_error_not_a_hang(tmp_path):
    """A listener that accepts and never speaks (a hung sshd, a blackholed port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        port = s.getsockname()[1]
        held = []
        stop = threading.Event()

        def accept():
            s.settimeout(0.5)
            while not stop.is_set():
                try:
                    held.append(s.accept()[0])
                except OSError:
                    pass

        t = threading.Thread(target=accept, daemon=True)
        t.start()
        try:
            env = dict(os.environ, VACATE_SSH_ARGS="-o ConnectTimeout=2 -o "
                       f"UserKnownHostsFile={tmp_path}/kh")
            t0 = time.monotonic()
            r = vacate("check", "--host", f"root@127.0.0.1:{port}", "/data", env=env,
                       timeout=60)
            took = time.monotonic() - t0
        finally:
            stop.set()
            t.join()
            for c in held:
                c.close()
    assert r.returncode == 3, r.stderr
    assert f"root@127.0.0.1:{port}: ssh could not reach it" in r.stderr
    assert took < 20


@pytest.fixture(scope="module")
def noisy_server(tmp_path_factory):
    """A login that prints a banner on stdout (and a fake frame header) before every
    command, with the client asking for a pty (ssh -tt: newlines rewritten, input echoed)."""
    d = tmp_path_factory.mktemp("noisy")
    s = sshd.start(str(d / "sshd"), banner="Welcome to the lab host\nVACATE-REP 12 0000",
                   client=("RequestTTY force",))
    yield s
    s.stop()


@pytest.mark.slow
@pytest.mark.root
def test_a_banner_and_a_pty_do_not_corrupt_the_reply(noisy_server, held):
    v, _h = held
    env = noisy_server.environ()
    py = far_pythons()[0]
    probe = subprocess.run(["ssh", "-F", noisy_server.config, "vacate-test", "tty"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.PIPE,
                           check=False)
    assert "Welcome to the lab host" in probe.stdout and "/dev/pts/" in probe.stdout
    same_document(lambda: vacate("check", "--json", "--no-scan", v.mountpoint,
                                 env=dict(env, VACATE_NO_C="1")),
                  lambda: vacate("check", "--json", "--no-scan", "--host", "vacate-test",
                                 "--python", py, v.mountpoint, env=env),
                  drop=("elapsed_s", "host"))


@pytest.mark.skipif(not os.path.exists(PY36), reason="pyenv has no CPython 3.6")
def test_an_old_far_python_is_named(server):
    r = vacate("check", "--host", "vacate-test", "--python", PY36, "/", env=server.environ())
    assert r.returncode == 3
    assert "vacate-test:" in r.stderr and "Python 3.6" in r.stderr and "3.8 or newer" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_far_side_without_python3_is_named(server):
    r = vacate("check", "--host", "vacate-test", "--python", "/nonexistent/python3", "/",
               env=server.environ())
    assert r.returncode == 3
    assert "vacate-test: no /nonexistent/python3 there" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("spec", ["-oProxyCommand=touch /tmp/vacate-pwned", "root@-x",
                                  "ho st", "a;b", "host:0", "host:99999", "[::1"])
def test_a_host_that_ssh_could_take_for_an_option_is_refused(spec, tmp_path):
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    marker = tmp_path / "ssh-ran"
    fake = tmp_path / "ssh"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\n")
    fake.chmod(0o755)
    r = vacate("check", "--host", spec, "/", env=env)
    assert r.returncode == 2 and "--host" in r.stderr, r.stderr
    assert not marker.exists() and not os.path.exists("/tmp/vacate-pwned")


def test_the_far_command_line_holds_no_argument_of_the_work():
    """Paths and options travel on stdin: the command line ssh hands to the far shell is
    the same whatever is asked, and quoting-proof (base64 inside single quotes)."""
    from vacate.remote.ssh import SshTarget

    t = SshTarget.parse("root@db1:2222", options=())
    argv = t.argv()
    assert argv[:3] == ["ssh", "-o", "BatchMode=yes"]
    assert argv[argv.index("--") + 1] == "db1" and argv[-1] == t.remote_command()
    cmd = t.remote_command()
    assert cmd.startswith("python3 -I -S -c 'import base64;exec(base64.b64decode(\"")
    assert set(cmd[cmd.index('("') + 2:cmd.index('")')]) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


@pytest.mark.slow
def test_payload_is_a_zipapp_of_the_observing_layer(tmp_path, volume):
    """``vacate payload -o FILE``: copied by hand, run by any python3 >= 3.8."""
    out = tmp_path / "vacate-observe.pyz"
    r = vacate("payload", "-o", str(out))
    assert r.returncode == 0, r.stderr
    # run by hand there (tests/remote/test_observing_alone.py compares what it sees)
    python = PY38 if os.path.exists(PY38) else DEBIAN
    obs = tmp_path / "obs.json"
    r = subprocess.run([python, "-I", str(out), volume.mountpoint, "-o", str(obs)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    doc = json.loads(obs.read_text())
    assert doc["schema"] == "vacate.observation/1" and doc["target"]["path"] == volume.mountpoint
    # nothing of the zip is more than the observing layer's sources
    import zipfile

    with zipfile.ZipFile(out) as z:
        names = z.namelist()
    assert "__main__.py" in names and "vacate/observing/observe.py" in names
    assert not [n for n in names if not n.endswith(".py")]
    assert not [n for n in names if n.startswith("vacate/") and not (
        n == "vacate/__init__.py" or n.startswith("vacate/observing/"))]



def test_become_runs_the_far_side_through_sudo(server):
    """``--become``: the far side through ``sudo -n``; where sudo is missing or asks for a
    password, one line saying so, naming the host (exit 3)."""
    r = vacate("check", "--json", "--no-scan", "--no-config", "--become", "--host",
               "vacate-test", "--python", DEBIAN, "/", env=server.environ())
    if os.path.exists("/usr/bin/sudo"):
        assert r.returncode in (0, 1, 3) and json.loads(r.stdout)["host"]["via"] == "vacate-test"
    else:
        assert r.returncode == 3, r.stderr
        assert "vacate-test: sudo -n refused" in r.stderr and "sudo" in r.stderr
        assert "Traceback" not in r.stderr
