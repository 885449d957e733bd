"""``check --inventory``: the question asked on every host of an Ansible inventory, read by
``ansible-inventory`` itself (INI, YAML, ``group_vars`` / ``host_vars``, vaulted values), each
host reached through a real OpenSSH server on 127.0.0.1 under several names and ports.

What a user checks: every host is answered (in use, safe, or could not tell with the reason:
unreachable, a wrong key, a connection vacate does not speak, a name that would be an ssh
option), the table puts the unsafe first, ``--json`` and ``--output-dir DIR`` give one document per
host, the exit status is the strongest news; and ``--forks`` really runs hosts side by side."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from harness import extras, sshd
from harness.holders import Holders
from harness.inventories import PROXY, delayed_inventory
from harness.volumes import can_loop_mount, make_volume

from vacate.flow import fleet
from vacate.observing.errors import EXIT_IN_USE, EXIT_OK, EXIT_UNKNOWN
from vacate.remote import inventory
from vacate.remote.inventory import Refused, Unsupported, VaultArgs, to_target
from vacate.remote.ssh import SshTarget

VACATE = [sys.executable, "-m", "vacate"]
FAR_PYTHON = "/usr/bin/python3"

# ansible-core is a test extra: missing, the tests that need it fail (harness/extras.py)
has_ansible = pytest.mark.usefixtures("ansible_core")
has_sshd = pytest.mark.skipif(not sshd.available(), reason="needs openssh-server")


@pytest.fixture(scope="module")
def ansible_core() -> str:
    return extras.tool("ansible-inventory", "ansible-core")


def vacate(*args, env=None, timeout=300):
    return subprocess.run([*VACATE, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


# -- variables to ssh targets: pure ---------------------------------------------------------

def test_ansible_variables_become_the_ssh_target():
    t = to_target("web1", {
        "ansible_host": "10.1.230.174", "ansible_port": "2222", "ansible_user": "ops",
        "ansible_ssh_private_key_file": "~/.ssh/fleet key",
        "ansible_ssh_common_args": "-o 'ProxyJump=bastion' -F cfg",
        "ansible_ssh_extra_args": "-o ServerAliveInterval=2",
        "ansible_python_interpreter": "/opt/py3.8/bin/python3",
        "ansible_become": "yes", "ansible_become_user": "root"}, base=("-F", "base"))
    assert t == SshTarget(
        host="10.1.230.174", user="ops", port=2222,
        options=("-F", "base", "-i", os.path.expanduser("~/.ssh/fleet key"),
                 "-o", "ProxyJump=bastion", "-F", "cfg", "-o", "ServerAliveInterval=2"),
        python="/opt/py3.8/bin/python3", become=True, become_user="root")
    argv = t.argv()
    # the host comes after "--"; everything of the work is in one quoted far command
    assert argv[argv.index("--") + 1] == "10.1.230.174" and argv[-1].startswith("sudo -n -u root")
    # defaults: the inventory name is the host, python3 (or --python), no become
    assert to_target("db1", {}) == SshTarget("db1")
    assert to_target("db1", {"ansible_python_interpreter": "auto_silent"},
                     python="/usr/bin/python3.9").python == "/usr/bin/python3.9"
    assert to_target("db1", {"ansible_ssh_host": "h", "ansible_ssh_port": 22,
                             "ansible_ssh_user": "u", "ansible_become": False},
                     become=True) == SshTarget("h", user="u", port=22)


@pytest.mark.parametrize("name, v, what", [
    ("-oProxyCommand=touch /tmp/x", {}, "may not begin with '-'"),
    ("web1", {"ansible_host": "-oProxyCommand=touch /tmp/x"}, "may not begin with '-'"),
    ("web1", {"ansible_user": "-lroot"}, "may not begin with '-'"),
    ("web1", {"ansible_host": "a;reboot"}, "character no host name has"),
    ("web1", {"ansible_port": "22 -oProxyCommand=x"}, "is not a port"),
    ("web1", {"ansible_user": "{{ lookup('env', 'USER') }}"}, "is a template"),
    ("web1", {"ansible_python_interpreter": "-c"}, "may not begin with '-'"),
    ("web1", {"ansible_become": True, "ansible_become_user": "-x"}, "not a user name"),
    ("web1", {"ansible_ssh_common_args": "-o 'unclosed"}, "does not split"),
    ("web1", {"ansible_user": {"__ansible_vault": "$ANSIBLE_VAULT;1.1;AES256\n00"}},
     "vault-encrypted"),
])
def test_a_variable_that_would_become_an_option_is_refused_for_that_host(name, v, what,
                                                                          monkeypatch):
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)
    with pytest.raises(Refused, match="may not|character|port|template|user name|split|vault"
                       ) as e:
        to_target(name, v)
    assert what in str(e.value) and str(e.value).startswith(name + ":")


@pytest.mark.parametrize("v, what", [
    ({"ansible_connection": "docker"}, "ansible_connection=docker is not supported yet"),
    ({"ansible_connection": "local"}, "ansible_connection=local is not supported yet"),
    ({"ansible_connection": "community.general.lxc"}, "community.general.lxc"),
    ({"ansible_become": "true", "ansible_become_method": "su"}, "ansible_become_method=su"),
])
def test_what_vacate_does_not_speak_is_named(v, what):
    with pytest.raises(Unsupported, match="not supported yet") as e:
        to_target("box", v)
    assert what in str(e.value)


def test_each_host_once_in_the_inventorys_order():
    data = {"_meta": {"hostvars": {"c": {"x": 1}, "z": {}}},
            "all": {"children": ["ungrouped", "web", "db"]},
            "web": {"hosts": ["a", "b"], "children": ["edge"]}, "edge": {"hosts": ["e", "a"]},
            "db": {"hosts": ["c"]}, "ungrouped": {"hosts": ["u"]}}
    assert inventory.host_names(data) == ["u", "a", "b", "e", "c", "z"]


def test_document_file_names_hold_no_path():
    from vacate.output.fleetfmt import file_names

    assert file_names(["web1", "../../etc/passwd", ".hidden", "a/b", "A/B", "x\ny", "", "é"]) \
        == ["web1.json", "_.._etc_passwd.json", "hidden.json", "a_b.json", "A_B.2.json",
            "x_y.json", "_.json", "_.2.json"]


def test_the_exit_status_is_the_strongest_news():
    class R:
        def __init__(self, safe):
            self.verdict = type("V", (), {"safe_to_unmount": safe})()

    def checks(*safes):
        return [fleet.HostCheck(str(i), str(i), result=None if s == "x" else R(s),
                                error="e" if s == "x" else None) for i, s in enumerate(safes)]

    assert fleet.exit_code(checks(True, True)) == EXIT_OK
    assert fleet.exit_code(checks(True, "x")) == EXIT_UNKNOWN
    assert fleet.exit_code(checks(True, None)) == EXIT_UNKNOWN
    assert fleet.exit_code(checks("x", False, True)) == EXIT_IN_USE


# -- ansible-inventory reads every form -----------------------------------------------------

@has_ansible
def test_ansible_inventory_is_found_beside_the_interpreter_without_path(tmp_path):
    """Issue 31: ``.venv/bin/vacate check --inventory`` with ``.venv/bin`` not on PATH (the
    README's way to run it) finds the ansible-inventory that pip installed beside it."""
    inv = tmp_path / "hosts.ini"
    inv.write_text("[web]\nweb1 ansible_connection=local\n")
    r = vacate("check", "--inventory", str(inv), "/data", timeout=120,
               env=dict(os.environ, PATH="/usr/bin:/bin"))
    assert "not found" not in r.stderr, r.stderr
    assert r.returncode == EXIT_UNKNOWN and "ansible_connection=local" in r.stdout, r.stdout


@pytest.mark.slow
@has_ansible
def test_ini_yaml_group_vars_host_vars_vault_and_limit(tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "hosts.ini").write_text(
        "[web]\nweb1 ansible_host=10.0.0.1\nweb2 ansible_port=2201\n"
        "[db]\ndb1\n[web:vars]\nansible_python_interpreter=/usr/bin/python3.9\n")
    (tmp_path / "group_vars" / "all.yml").write_text(
        "ansible_user: ops\nansible_ssh_common_args: -o ConnectTimeout=4\n")
    (tmp_path / "pw").write_text("sesame\n")
    vaulted = subprocess.run([extras.tool("ansible-vault", "ansible-core"), "encrypt_string", "--vault-password-file",
                              str(tmp_path / "pw"), "carol", "--name", "ansible_user"],
                             capture_output=True, text=True, check=True).stdout
    (tmp_path / "host_vars" / "db1.yml").write_text(vaulted + "ansible_port: 2299\n")
    vault = VaultArgs(("--vault-password-file", str(tmp_path / "pw")))
    got = {h.name: h for h in inventory.hosts(inventory.read(str(tmp_path / "hosts.ini"),
                                                             vault=vault)[0], vault=vault)}
    assert list(got) == ["web1", "web2", "db1"]
    assert got["web1"].target == SshTarget("10.0.0.1", user="ops",
                                           options=("-o", "ConnectTimeout=4"),
                                           python="/usr/bin/python3.9")
    assert got["web2"].target.port == 2201 and got["web2"].target.host == "web2"
    assert got["db1"].target.user == "carol" and got["db1"].target.port == 2299
    # the same hosts from YAML, and --limit with Ansible's patterns
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    web:\n      hosts:\n        web1: {ansible_host: 10.0.0.1}\n"
        "        web2: {ansible_port: 2201}\n    db:\n      hosts:\n        db1:\n")
    limited = inventory.hosts(inventory.read(str(tmp_path / "hosts.yml"), "web:!web2",
                                             vault=vault)[0], vault=vault)
    assert [h.name for h in limited] == ["web1"] and limited[0].target.user == "ops"
    # without the password, the vaulted user is refused for that host alone
    plain = {h.name: h for h in inventory.hosts(
        inventory.read(str(tmp_path / "hosts.ini"), vault=vault)[0])}
    assert plain["db1"].target is None and "vault-encrypted" in plain["db1"].error
    assert plain["web1"].target is not None


@pytest.mark.slow
@has_ansible
def test_a_dynamic_inventory_script_and_a_vaulted_vars_file(tmp_path):
    script = tmp_path / "cloud.py"
    script.write_text(f"""#!{sys.executable}
import json, sys
if sys.argv[1:] == ["--list"]:
    print(json.dumps({{"gpu": {{"hosts": ["g1", "g2"]}},
                      "_meta": {{"hostvars": {{"g1": {{"ansible_host": "10.9.0.1"}},
                                             "g2": {{"ansible_port": 2022}}}}}}}}))
else:
    print("{{}}")
""")
    script.chmod(0o755)
    got = inventory.hosts(inventory.read(str(script))[0])
    assert [(h.name, h.target.host, h.target.port) for h in got] == \
        [("g1", "10.9.0.1", None), ("g2", "g2", 2022)]
    # group_vars encrypted whole, with the password passed as to Ansible
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "pw").write_text("sesame\n")
    secret = tmp_path / "group_vars" / "gpu.yml"
    secret.write_text("ansible_user: deploy\nansible_become: true\n")
    subprocess.run([extras.tool("ansible-vault", "ansible-core"), "encrypt", "--vault-password-file", str(tmp_path / "pw"),
                    str(secret)], capture_output=True, check=True)
    assert secret.read_text().startswith("$ANSIBLE_VAULT")
    (tmp_path / "hosts.ini").write_text("[gpu]\ng1\n")
    vault = VaultArgs(("--vault-password-file", str(tmp_path / "pw")))
    [g1] = inventory.hosts(inventory.read(str(tmp_path / "hosts.ini"), vault=vault)[0],
                           vault=vault)
    assert g1.target == SshTarget("g1", user="deploy", become=True)
    r = vacate("check", "--inventory", str(tmp_path / "hosts.ini"), "/data")
    assert r.returncode == 2 and "vault" in r.stderr.lower()


@has_ansible
def test_an_inventory_that_cannot_be_read_is_an_error(tmp_path):
    r = vacate("check", "--inventory", str(tmp_path / "missing.ini"), "/data")
    assert r.returncode == 2 and "no such file" in r.stderr
    (tmp_path / "empty.ini").write_text("[web]\nweb1\n")
    r = vacate("check", "--inventory", str(tmp_path / "empty.ini"), "--limit", "db", "/data")
    assert r.returncode == 2 and "no hosts match --limit 'db'" in r.stderr
    r = vacate("check", "--limit", "db", "/data")
    assert r.returncode == 2 and "--limit need --inventory" in r.stderr
    r = vacate("check", "--inventory", str(tmp_path / "empty.ini"), "--host", "x", "/data")
    assert r.returncode == 2 and "do not go together" in r.stderr


# -- real hosts: the loopback sshd under several names and ports ---------------------------

@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two sshds (two ports); the client config of the first reaches both."""
    one = sshd.start(str(tmp_path_factory.mktemp("sshd1")))
    two = sshd.start(str(tmp_path_factory.mktemp("sshd2")))
    try:
        with open(os.path.join(one.dir, "id.pub")) as f, \
                open(os.path.join(two.dir, "authorized_keys"), "a") as g:
            g.write(f.read())
        with open(os.path.join(one.dir, "known_hosts"), "a") as f:
            f.write(f"[127.0.0.1]:{two.port} {two.host_pub}\n")
        yield one, two
    finally:
        one.stop()
        two.stop()


def wrong_key_config(server, tmp_path) -> str:
    """The first server's client config with a key the server does not know."""
    sshd.keygen(str(tmp_path / "wrong_id"))
    with open(server.config) as f:
        text = f.read().replace(f"{server.dir}/id", str(tmp_path / "wrong_id"))
    path = tmp_path / "wrong_config"
    path.write_text(text)
    return str(path)


@pytest.fixture
def volume():
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4")
    os.makedirs(os.path.join(v.mountpoint, "data"))
    with open(os.path.join(v.mountpoint, "data", "a.jsonl"), "wb") as f:
        f.write(os.urandom(4096))
    yield v
    v.close()


def docs_by_host(r) -> dict:
    docs = json.loads(r.stdout)
    assert isinstance(docs, list)
    return {d["inventory_hostname"]: d for d in docs}


@pytest.mark.slow
@pytest.mark.root
@has_ansible
@has_sshd
def test_an_ini_inventory_with_group_vars_every_host_answered(servers, volume, tmp_path):
    one, two = servers
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "host_vars").mkdir()
    (inv / "hosts.ini").write_text(
        "[web]\n"
        f"web1 ansible_host=127.0.0.1 ansible_port={one.port}\n"
        "web2 ansible_host=vacate-test\n"
        f"web3 ansible_host=127.0.0.1 ansible_port={two.port}\n"
        "[broken]\n"
        f"dead ansible_host=127.0.0.1 ansible_port={sshd.free_port()}\n"
        f"wrongkey ansible_host=127.0.0.1 ansible_port={one.port}\n"
        "box ansible_connection=docker\n")
    (inv / "group_vars" / "all.yml").write_text(
        f"ansible_ssh_common_args: -F {one.config}\n"
        f"ansible_python_interpreter: {FAR_PYTHON}\n")
    (inv / "host_vars" / "wrongkey.yml").write_text(
        f"ansible_ssh_common_args: -F {wrong_key_config(one, tmp_path)}\n")
    env = dict(os.environ)
    env.pop("VACATE_SSH_ARGS", None)
    holders = Holders(volume.mountpoint)
    try:
        holders.fd(os.path.join(volume.mountpoint, "data", "a.jsonl"))
        out = tmp_path / "docs"
        r = vacate("check", "--no-scan", "--json", "--inventory", str(inv / "hosts.ini"),
                   "--output-dir", str(out), volume.mountpoint, env=env)
        table = vacate("check", "--no-scan", "-i", str(inv / "hosts.ini"), "--forks", "2",
                       volume.mountpoint, env=env)
    finally:
        holders.close()
    assert r.returncode == EXIT_IN_USE, r.stderr[-3000:]
    docs = docs_by_host(r)
    assert list(docs) == ["web1", "web2", "web3", "dead", "wrongkey", "box"]
    for name, via in (("web1", f"127.0.0.1:{one.port}"), ("web2", "vacate-test"),
                      ("web3", f"127.0.0.1:{two.port}")):
        d = docs[name]
        assert d["schema"] == "vacate.check/1" and d["host"]["via"] == via
        assert d["host"]["machine_id"] and d["target"]["mountpoint"] == volume.mountpoint
        assert d["verdict"]["safe_to_unmount"] is False
        assert any(c["type"] == "process" and "fd" in c["access"] for c in d["consumers"])
    for name, kind, said in (("dead", "unreachable", "Connection refused"),
                             ("wrongkey", "unreachable", "Permission denied"),
                             ("box", "unsupported", "ansible_connection=docker")):
        d = docs[name]
        assert d["verdict"]["safe_to_unmount"] is None and d["error"]["kind"] == kind, d
        assert said in d["error"]["message"] and said in d["verdict"]["unknowns"][0]["message"]
        assert d["target"]["path"] == volume.mountpoint and d["items"] == []
    assert docs["dead"]["error"]["message"].startswith("127.0.0.1:")
    assert docs["box"]["error"]["message"].startswith("box:")
    # -o DIR: the same documents, one file each
    assert sorted(os.listdir(out)) == sorted(f"{n}.json" for n in docs)
    for name, d in docs.items():
        with open(out / f"{name}.json") as f:
            got = json.load(f)
        got.pop("elapsed_s", None)
        d.pop("elapsed_s", None)
        assert got == d
    # the table: the hosts in use first, then those that could not be told
    assert table.returncode == EXIT_IN_USE, table.stderr[-3000:]
    rows = [line.split()[0] for line in table.stdout.splitlines()
            if line.split() and line.split()[0] in docs]
    assert rows == ["web1", "web2", "web3", "dead", "wrongkey", "box"]
    assert "3 in use, 3 could not tell, 0 safe" in table.stdout


@pytest.mark.slow
@pytest.mark.root
@has_ansible
@has_sshd
def test_a_yaml_inventory_with_limit_safe_unknown_and_refused(servers, volume, tmp_path):
    one, two = servers
    inv_dir = tmp_path / "inventory"            # a directory, as Ansible reads one
    (inv_dir / "group_vars").mkdir(parents=True)
    (inv_dir / "hosts.yml").write_text(f"""\
all:
  children:
    storage:
      hosts:
        nas1: {{ansible_host: 127.0.0.1, ansible_port: {one.port}}}
        nas2: {{ansible_host: 127.0.0.1, ansible_port: {two.port}}}
    odd:
      hosts:
        "-oProxyCommand=touch {tmp_path}/pwned": {{}}
        evil: {{ansible_user: "-oProxyCommand=touch {tmp_path}/pwned"}}
        gone: {{ansible_host: 127.0.0.1, ansible_port: {sshd.free_port()}}}
""")
    (inv_dir / "group_vars" / "all.yml").write_text(
        f"ansible_ssh_common_args: -F {one.config}\n"
        f"ansible_python_interpreter: {FAR_PYTHON}\n")
    inv = str(inv_dir)
    env = dict(os.environ)
    env.pop("VACATE_SSH_ARGS", None)
    r = vacate("check", "--json", "--inventory", inv, volume.mountpoint, env=env)
    assert r.returncode == EXIT_UNKNOWN, r.stderr[-3000:]
    docs = docs_by_host(r)
    assert [docs[n]["verdict"]["safe_to_unmount"] for n in ("nas1", "nas2")] == [True, True]
    refused = [d for n, d in docs.items() if n not in ("nas1", "nas2", "gone")]
    assert len(refused) == 2 and all(d["error"]["kind"] == "refused" for d in refused)
    assert all("may not begin with '-'" in d["error"]["message"] for d in refused)
    assert docs["gone"]["error"]["kind"] == "unreachable"
    assert not os.path.exists(tmp_path / "pwned")
    # only the hosts that answer: exit 0, safe everywhere
    r = vacate("check", "--inventory", inv, "--limit", "storage", volume.mountpoint, env=env)
    assert r.returncode == EXIT_OK, r.stdout + r.stderr[-3000:]
    assert "0 in use, 0 could not tell, 2 safe" in r.stdout
    # a file of the directory Ansible cannot parse: it goes on without it, vacate says so and
    # does not call the fleet safe (the hosts there, if any, were not checked)
    (inv_dir / "more.yml").write_text("all:\n  hosts: [nas3\n")
    r = vacate("check", "--inventory", inv, "--limit", "storage", volume.mountpoint, env=env)
    assert r.returncode == EXIT_UNKNOWN, r.stdout + r.stderr[-3000:]
    assert "2 safe" in r.stdout and f"could not parse {inv_dir}/more.yml" in r.stderr


# -- hosts side by side ---------------------------------------------------------------------

@has_ansible
@has_sshd
@pytest.mark.slow
def test_forks_run_hosts_side_by_side(servers, tmp_path):
    """20 hosts each 3 s away at --forks 5 take about 4 rounds of that delay, not 20. What
    each host costs besides (its ssh handshake, the far python reading /proc: ~0.6 s of CPU)
    is bound by the machine's CPUs, not by --forks, so the bound is on the delay: one host at
    a time could not take less than 20 x 3 s."""
    one, _ = servers
    delay = 3.0
    env = dict(os.environ)
    env.pop("VACATE_SSH_ARGS", None)
    args = ("check", "--json", "--no-scan", "--no-config")

    def timed(inv, *more):
        start = time.monotonic()
        r = vacate(*args, "--inventory", inv, *more, "/tmp", env=env)
        took = time.monotonic() - start
        docs = json.loads(r.stdout) if r.stdout else []
        assert r.returncode in (0, 1) and all(d["verdict"]["safe_to_unmount"] is not None
                                              for d in docs), r.stderr[-3000:]
        return took, docs

    single, docs = timed(delayed_inventory(tmp_path / "one.ini", one, ["h0"], delay))
    assert len(docs) == 1 and single >= delay
    names = [f"h{i:02}" for i in range(20)]
    twenty, docs = timed(delayed_inventory(tmp_path / "twenty.ini", one, names, delay),
                         "--forks", "5")
    assert [d["inventory_hostname"] for d in docs] == names
    print(f"\none host {single:.1f} s; 20 hosts at --forks 5: {twenty:.1f} s "
          f"({twenty / single:.1f}x)")
    assert twenty >= 4 * delay                   # 5 at a time, never more
    assert twenty < 12 * delay, (single, twenty)  # about 4x (+ the work); serial: > 20x


@pytest.mark.slow
@has_ansible
@has_sshd
def test_a_host_that_hangs_holds_up_only_its_own_slot(servers, tmp_path):
    one, _ = servers
    slow = f"{sys.executable} {os.path.abspath(PROXY)} 60 127.0.0.1 {one.port}"
    (tmp_path / "hosts.ini").write_text(
        f"stuck ansible_ssh_common_args='-F {one.config} -o \"ProxyCommand={slow}\"' "
        f"ansible_host=127.0.0.1\n"
        f"quick ansible_host=vacate-test ansible_ssh_common_args='-F {one.config}'\n"
        f"[all:vars]\nansible_python_interpreter={FAR_PYTHON}\n")
    env = dict(os.environ)
    env.pop("VACATE_SSH_ARGS", None)
    start = time.monotonic()
    r = vacate("check", "--json", "--no-scan", "--no-config", "--host-timeout", "3",
               "--inventory", str(tmp_path / "hosts.ini"), "/tmp", env=env)
    took = time.monotonic() - start
    docs = docs_by_host(r)
    assert docs["stuck"]["error"]["kind"] == "timeout"
    assert "no answer within 3 s" in docs["stuck"]["error"]["message"]
    assert docs["quick"]["verdict"]["safe_to_unmount"] is not None
    assert r.returncode in (EXIT_IN_USE, EXIT_UNKNOWN) and took < 30


@pytest.mark.slow
@has_ansible
@has_sshd
def test_an_interrupted_run_ends_its_sessions_and_starts_no_other_host(servers, tmp_path):
    one, _ = servers
    marker = f"vacate-fleet-{os.getpid()}-{time.monotonic_ns()}"
    slow = f"{sys.executable} {os.path.abspath(PROXY)} 60 127.0.0.1 {one.port} {marker}"
    lines = [f"h{i} ansible_host=127.0.0.1 ansible_port={one.port}" for i in range(4)]
    lines += ["[all:vars]", f"ansible_python_interpreter={FAR_PYTHON}",
              f"ansible_ssh_common_args='-F {one.config} -o \"ProxyCommand={slow}\"'"]
    (tmp_path / "hosts.ini").write_text("\n".join(lines) + "\n")
    env = dict(os.environ)
    env.pop("VACATE_SSH_ARGS", None)
    p = subprocess.Popen([*VACATE, "check", "--forks", "2", "--inventory",
                          str(tmp_path / "hosts.ini"), "/tmp"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def proxies() -> int:      # the proxies themselves (ssh's own command line names them too)
        return subprocess.run(["pgrep", "-f", f"^{sys.executable} .*{marker}"],
                              capture_output=True, check=False).stdout.count(b"\n")

    try:
        deadline = time.monotonic() + 30
        while proxies() < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        assert proxies() == 2                    # two hosts at a time
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err[-3000:]
    time.sleep(0.5)
    assert proxies() == 0                        # their sessions ended, no other started
