"""``--ct CTID`` on a Proxmox host, the story's path: ``vacate check --ct 129 /data`` names
``/data`` as the container sees it and answers from the host, in one observation: the
container's ``sglang-qwen`` server (a process mapping a weight shard, with its unit), the
disabled ``sglang-kimi`` unit inside it that still names a draft model on the volume, and the
``mp0`` line of ``/etc/pve/lxc/129.conf``.

The container is real: systemd as PID 1 of private namespaces, in a cgroup named as LXC
names Proxmox's (``lxc.payload.129``), with the volume bind-mounted at ``/data`` inside it
only. Proxmox itself cannot be installed here: ``/etc/pve`` is written as Proxmox writes it,
and ``pct`` is a stand-in with the real command line (tests/harness/pve.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from harness import pve
from harness.ct129 import MODEL, _wait_serving, container_129

VACATE = [sys.executable, "-m", "vacate"]









@pytest.fixture
def ct129(tmp_path):
    with container_129(tmp_path) as got:
        yield got


def check(*args, env):
    r = subprocess.run([*VACATE, "check", "--json", *args], capture_output=True, text=True,
                       timeout=300, env=env, check=False)
    assert r.returncode in (0, 1, 3), r.stderr[-3000:]
    return r.returncode, json.loads(r.stdout)




@pytest.mark.root
@pytest.mark.slow
def test_check_ct_sees_the_container_from_the_host_in_one_observation(ct129):
    vol, host, box, conf = ct129
    _wait_serving(box)
    rc, doc = check("--ct", "129", "/data", env=host.environ())
    assert rc == 1 and doc["verdict"]["safe_to_unmount"] is False
    assert doc["host"]["via"] == "CT 129"
    assert doc["ct"]["path"] == "/data" and doc["ct"]["host_path"] == vol.mountpoint
    assert doc["ct"]["running"] is True and doc["ct"]["init_pid"] == box.pid1
    assert doc["target"]["mountpoint"] == vol.mountpoint
    by_type: dict[str, list] = {}
    for c in doc["consumers"]:
        by_type.setdefault(c["type"], []).append(c)
    # the running server inside the container, with its unit and container, by host pid
    servers = [c for c in by_type["process"] if c.get("unit") == "sglang-qwen.service"]
    assert servers, doc["consumers"]
    assert servers[0]["container"]["ctid"] == 129 and servers[0]["ns_pid"] not in (None, servers[0]["pid"])
    assert servers[0]["container"]["name"] == "129"
    assert "mmap" in servers[0]["access"]
    assert any(e["detail"].endswith(".safetensors") or ".safetensors" in e["detail"]
               for e in servers[0]["evidence"])
    # the disabled unit inside the container still names the draft model on the volume
    kimi = [c for c in by_type["systemd-unit"] if c["name"] == "sglang-kimi.service"]
    assert kimi and kimi[0]["id"].startswith("systemd-unit:pve:129:")
    assert kimi[0].get("enabled") in ("disabled", False, "no") or \
        not kimi[0].get("enabled")
    # the mp0 line of the config, with its file and line
    pct = [c for c in doc["consumers"] if c["type"].startswith("pve")]
    assert any(e["source"] == f"{conf}:6" for c in pct for e in c["evidence"]), pct
    ids = [c["id"] for c in doc["consumers"]]
    assert len(ids) == len(set(ids))
    # the table says where it looked, in the container's spelling and the host's
    r = subprocess.run([*VACATE, "check", "--no-scan", "--ct", "129", "/data"],
                       capture_output=True, text=True, timeout=300, env=host.environ(), check=False)
    first = r.stdout.splitlines()[0]
    assert first.startswith("CT 129: /data is ") and vol.mountpoint in first
    # pct was asked only whether the container runs; nothing was run inside it
    assert host.calls() and all(c.startswith("status 129") for c in host.calls())
    # a plan made so places each step where it runs: the unit is stopped inside CT 129
    plan = vol.mountpoint + ".plan"
    r = subprocess.run([*VACATE, "plan", "--ct", "129", "/data", "--archive-to",
                        os.path.dirname(vol.mountpoint) + "/bk", "-o", plan, "--json"],
                       capture_output=True, text=True, timeout=300, env=host.environ(), check=False)
    assert r.returncode in (0, 4), r.stderr
    doc = json.loads(r.stdout)
    assert doc["observation"]["host"]["via"] == "CT 129"
    assert doc["observation"]["ct"]["path"] == "/data"
    stops = [s for s in doc["steps"] if s["kind"] == "stop-unit"
             and "sglang-qwen.service" in s["argv"]]
    assert stops and stops[0]["argv"][:3] == ["pct", "exec", "129"], doc["steps"]
    # applied only to the container it was made for: one whose config changed since is
    # another container as far as the plan knows, and nothing is done
    with open(conf, "a") as f:
        f.write("mp1: /srv/other,mp=/other\n")
    r = subprocess.run([*VACATE, "apply", plan, "--yes"], capture_output=True, text=True,
                       timeout=120, env=host.environ(), check=False)
    assert r.returncode == 2 and "CT 129's config" in r.stderr, r.stderr[-2000:]
    assert "is not the one the plan was made from" in r.stderr
    assert box.systemctl("is-active", "sglang-qwen.service").stdout.strip() == "active"


@pytest.mark.root
@pytest.mark.slow
def test_check_ct_of_a_stopped_container_reads_its_config_and_rootfs(ct129):
    vol, host, box, conf = ct129
    box.close()
    host.running(129, None)
    rc, doc = check("--ct", "129", "--no-scan", "/data", env=host.environ())
    assert doc["ct"]["running"] is False and doc["ct"]["host_path"] == vol.mountpoint
    assert "mp0:" in doc["ct"]["how"]
    assert any(w["code"] == "container-stopped" for w in doc["warnings"])
    kimi = [c for c in doc["consumers"] if c["type"] == "systemd-unit"
            and c["name"] == "sglang-kimi.service"]
    assert kimi and kimi[0]["id"].startswith("systemd-unit:pve:129:")
    assert not [c for c in doc["consumers"] if c["type"] == "process"
                and c.get("unit") == "sglang-qwen.service"]
    # the config still names the volume as the container's mp0: a reference with its line
    pct = [c for c in doc["consumers"] if c["type"].startswith("pve")]
    assert any(e["source"] == f"{conf}:6" for c in pct for e in c["evidence"]), pct
    assert rc == (1 if doc["verdict"]["blockers"] else 0)


def test_ct_needs_its_config(tmp_path):
    if pve.why_not() is None and not os.path.exists("/etc/pve/lxc/977.conf"):
        r = subprocess.run([*VACATE, "check", "--ct", "977", "/data"], capture_output=True,
                           text=True, timeout=60, check=False)
        assert r.returncode == 2
        assert "CT 977: no /etc/pve/lxc/977.conf here" in r.stderr
    r = subprocess.run([*VACATE, "check", "--ct", "12x", "/data"], capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 2 and "a Proxmox container id is a number" in r.stderr


@pytest.mark.root
@pytest.mark.slow
def test_the_story_from_the_proxmox_host_plan_then_apply(ct129, tmp_path):
    """``vacate plan --ct 129 /data``, then ``vacate apply``, from the host: the unit is
    stopped and disabled inside the container through ``pct exec 129 --keep-env 0``, the
    model deleted, the container's own mount of the volume unmounted inside it, mp0's
    removal pending while the container keeps running (never an ``unusedN`` deleted), its
    restart offered as a person's step, and the report says so."""
    vol, host, box, conf = ct129
    _wait_serving(box)
    env = host.environ()
    plan = str(tmp_path / "story.plan")
    r = subprocess.run([*VACATE, "plan", "--ct", "129", "/data", "--delete", MODEL,
                        "--delete", "eagle3", "-o", plan, "--grace", "2"],
                       capture_output=True, text=True, timeout=300, env=env, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([*VACATE, "apply", plan, "--yes"], capture_output=True, text=True,
                       timeout=300, env=env, check=False)
    said = r.stdout + r.stderr
    assert r.returncode in (0, 4), said[-4000:]
    assert box.systemctl("is-active", "sglang-qwen.service").stdout.strip() != "active"
    assert box.systemctl("is-enabled", "sglang-qwen.service").stdout.strip() not in (
        "enabled", "enabled-runtime", "linked")
    calls = host.calls()
    assert any(c.startswith("exec 129 --keep-env 0 -- systemctl stop sglang-qwen.service")
               for c in calls), calls
    assert not any("unused" in c for c in calls), calls
    with open(conf) as f:
        text = f.read()
    assert "[pve:pending]" in text and "delete: mp0" in text, text
    assert not os.path.exists(f"{vol.mountpoint}/{MODEL}")
    report = subprocess.run([*VACATE, "report", plan], capture_output=True, text=True,
                            timeout=120, env=env, check=False)
    assert "pending" in report.stdout, report.stdout[-3000:]
    assert "pct reboot 129" in report.stdout          # the restart is offered, not done
    assert not any(c.startswith(("shutdown 129", "stop 129", "reboot 129")) for c in calls)
