"""``/proc/PID/cgroup`` -> systemd unit and container, on real and realistic cgroup files."""

import os

import pytest
from harness.paths import FIXTURES

from vacate.observing.collectors import cgroups

DOCKER_ID = "4f2a1d6c9b8e7f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607182"


def parse(name):
    with open(os.path.join(FIXTURES, "cgroup", name)) as f:
        return cgroups.parse(f.read())


@pytest.mark.parametrize("name, unit, container", [
    ("v2-system-service", "sglang-qwen.service", None),
    ("v1-system-service", "sglang-qwen.service", None),
    ("v2-pve-lxc-129-inner-service", "sglang-qwen.service",
     {"type": "lxc", "name": "129", "ctid": 129}),
    ("v2-pve-lxc-129-init", "init.scope", {"type": "lxc", "name": "129", "ctid": 129}),
    ("v1-lxc-129-legacy", "sglang-qwen.service", {"type": "lxc", "name": "129", "ctid": 129}),
    ("v2-lxc-payload-named", "nginx.service", {"type": "lxc", "name": "ct-web"}),
    ("v2-docker-systemd-driver", None, {"type": "docker", "name": DOCKER_ID}),
    ("v1-docker-cgroupfs-driver", None, {"type": "docker", "name": DOCKER_ID}),
    ("v2-nspawn-machine-inner-service", "trainer.service", {"type": "nspawn", "name": "gpu-box"}),
    ("v2-user-session", "session-3.scope", None),
    ("v2-user-manager-unit", "jupyter.service", None),
    ("this-host-v1-hybrid-self", None, None),
])
def test_unit_and_container(name, unit, container):
    info = parse(name)
    assert info.unit == unit
    assert info.container_json() == container


def test_lxc_monitor_is_host_side_not_inside():
    info = parse("v2-pve-lxc-monitor-129")
    assert info.lxc_monitor
    assert info.container_json() == {"type": "lxc", "name": "129", "ctid": 129}
    assert info.unit is None


def test_docker_scope_is_the_container_not_the_unit():
    # the docker-<id>.scope is how systemd holds the container; the unit is inside it (none)
    assert parse("v2-docker-systemd-driver").unit is None


def test_hybrid_prefers_name_systemd_over_empty_unified():
    text = "1:name=systemd:/system.slice/ollama.service\n0::/\n"
    assert cgroups.parse(text).unit == "ollama.service"


def test_garbage_gives_nothing_and_does_not_raise():
    for text in ("", "\n\n", "nonsense", "0::", "::::"):
        info = cgroups.parse(text)
        assert info.unit is None and info.container_type is None


def test_a_users_own_manager_is_told_apart_from_the_system_one():
    """``systemctl stop jupyter.service`` on the system manager would miss a user unit."""
    assert parse("v2-user-manager-unit").user_manager == 1000
    assert parse("v2-user-session").user_manager is None
    assert parse("v2-system-service").user_manager is None


def test_the_action_for_a_user_unit_goes_to_that_users_manager():
    from vacate.observing.model.usage import Consumer
    from vacate.output.next_steps import for_consumer as said

    info = parse("v2-user-manager-unit")
    c = Consumer("process:5:1", "process", "jupyter", True, ("/data/nb",), (),
                 {"pid": 5, "unit": info.unit, "container": None, "uid": 1000,
                  "user": "alice", "user_manager": info.user_manager})
    assert said(c) == "systemctl --user -M alice@ stop jupyter.service"
