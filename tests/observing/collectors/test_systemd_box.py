"""Real systemd: a booted `systemd --system` (PID 1 of private namespaces, tests/harness/
systemd_box.py) with units that name a loop-mounted volume. The configured collector, reading
the box through /proc/PID1/root and asking its manager through nsenter, must report each unit's
enabled and active state as systemctl itself does."""

import json
import os
import shutil
import subprocess

import pytest
from harness.systemd_box import available, start_box

from vacate.observing.collectors import configured
from vacate.observing.collectors.configured import systemd as systemd_source
from vacate.observing.collectors.configured.match import VolumeView, container_view
from vacate.observing.collectors.mounts import read_mounts, resolve_target
from vacate.observing.host import Host
from vacate.observing.model.usage import ContainerRoot
from vacate.observing.parsers.systemd_unit import path_escape
from vacate.output.next_steps import for_consumer as said

pytestmark = [pytest.mark.root, pytest.mark.skipif(not available(), reason="needs root + systemd")]
SECRET = "hf_boxsecretboxsecretboxsecret99"
NODEFAULT = "[Unit]\nDefaultDependencies=no\n"
INSTALL = "[Install]\nWantedBy=vacate-box.target\n"


def units_for(vol: str) -> tuple[dict, dict, str]:
    mount_name = subprocess.run(["systemd-escape", "--path", "--suffix=mount", f"{vol}/scratch"],
                                check=True, capture_output=True, text=True).stdout.strip()
    units = {
        "vol-run.service": f"{NODEFAULT}RequiresMountsFor={vol}\n[Service]\n"
                           f"WorkingDirectory={vol}/work\nEnvironment=DATA_DIR={vol}/db\n"
                           f"ExecStart={vol}/bin/sleeper infinity\n{INSTALL}",
        "vol-draft.service": f"{NODEFAULT}[Service]\nExecStart=/usr/bin/python3 -m "
                             f"sglang.launch_server --speculative-draft-model-path "
                             f"{vol}/eagle3/draft\n{INSTALL}",
        "vol-draft.service.d/override.conf":
            f'[Service]\nEnvironment="HF_TOKEN={SECRET}" "DRAFT2={vol}/eagle3/draft2"\n',
        "vol-env.service": f"{NODEFAULT}[Service]\n"
                           "EnvironmentFile=/etc/systemd/system/vol-env.env\n"
                           "EnvironmentFile=-/etc/systemd/system/absent.env\n"
                           "ExecStart=/bin/sh -c 'exec sleep infinity' sh $MODEL_ARGS\n"
                           f"{INSTALL}",
        "vol-worker@.service": f"{NODEFAULT}[Service]\nWorkingDirectory={vol}/%i\n"
                               f"ExecStart=/bin/sleep infinity\n{INSTALL}",
        mount_name: f"{NODEFAULT}[Mount]\nWhat=tmpfs\nWhere={vol}/scratch\nType=tmpfs\n"
                    f"Options=size=1m\n{INSTALL}",
    }
    files = {"vol-env.env": f'MODEL_ARGS="--model {vol}/models/qwen"\nHF_TOKEN={SECRET}\n'}
    return units, files, mount_name


def user_units_for(vol: str) -> dict:
    """root's user units (in a home private to the box): one enabled and running from the
    volume, one installed but neither enabled nor started."""
    d = ".config/systemd/user"
    return {
        f"{d}/vacate-user.target": "[Unit]\nDescription=the box user manager's target\n",
        f"{d}/nb.service": f"[Service]\nExecStart={vol}/bin/sleeper infinity\n"
                           "[Install]\nWantedBy=vacate-user.target\n",
        f"{d}/vacate-user.target.wants/nb.service": "->../nb.service",
        f"{d}/later.service": f"[Service]\nWorkingDirectory={vol}/notebooks\n"
                              "ExecStart=/bin/sleep infinity\n[Install]\nWantedBy=vacate-user.target\n",
    }


@pytest.fixture
def box(ext4_volume):
    vol = ext4_volume.mountpoint
    for d in ("work", "db", "bin", "eagle3/draft", "models/qwen", "jobs", "adhoc", "scratch",
              "notebooks"):
        os.makedirs(os.path.join(vol, d), exist_ok=True)
    shutil.copy2("/bin/sleep", os.path.join(vol, "bin/sleeper"))
    units, files, mount_name = units_for(vol)
    b = start_box(units, files=files, enable=("vol-run.service", "vol-env.service",
                                              "vol-worker@jobs.service", mount_name),
                  home=user_units_for(vol))
    try:
        b.start_user_manager()
        # an instance started by hand, not enabled: only the manager knows it exists
        b.systemctl("start", "vol-worker@adhoc.service", check=True)
        yield b, vol, mount_name
    finally:
        b.close()


def state(b, name):
    en = b.systemctl("is-enabled", name).stdout.strip()
    ac = b.systemctl("is-active", name).stdout.strip()
    return en == "enabled", ac == "active"


def test_units_in_a_booted_systemd_with_state_from_systemctl(box):
    b, vol, mount_name = box
    assert path_escape(f"{vol}/scratch") + ".mount" == mount_name
    target = resolve_target(vol)
    ct = ContainerRoot("nspawn", "box", b.pid1)
    consumers, problems = configured.collect(Host.local(), target, containers=(ct,))
    assert [p for p in problems if p.blocks_verdict and "box" in p.message] == []
    by_id = {c.id: c for c in consumers}
    expected = {"vol-run.service": (True, True), "vol-draft.service": (False, False),
                "vol-env.service": (True, True), "vol-worker@jobs.service": (True, True),
                "vol-worker@adhoc.service": (False, True), mount_name: (True, True)}
    for name, (enabled, active) in expected.items():
        c = by_id[f"systemd-unit:nspawn:box:{name}"]
        assert (c.attrs.enabled, c.attrs.active) == (enabled, active), name
        assert state(b, name) == (enabled, active), name        # what systemctl says
        assert c.attrs.state_from == "systemctl" and c.attrs.container["type"] == "nspawn"
        assert c.attrs.container["name"] == "box"
        assert c.live is active
    run = by_id["systemd-unit:nspawn:box:vol-run.service"]
    assert said(run) == "systemctl -M box disable --now vol-run.service"
    assert set(run.paths) == {vol, f"{vol}/work", f"{vol}/db", f"{vol}/bin/sleeper"}
    assert run.attrs.unit_file == "/etc/systemd/system/vol-run.service"
    draft = by_id["systemd-unit:nspawn:box:vol-draft.service"]
    assert set(draft.paths) == {f"{vol}/eagle3/draft", f"{vol}/eagle3/draft2"}
    env = by_id["systemd-unit:nspawn:box:vol-env.service"]
    assert env.paths == (f"{vol}/models/qwen",)
    assert any(e.source == "/etc/systemd/system/vol-env.env:1" for e in env.evidence)
    scratch = by_id[f"systemd-unit:nspawn:box:{mount_name}"]
    assert scratch.attrs.mounts == f"{vol}/scratch" and scratch.attrs.mounts_target is False
    assert by_id["systemd-unit:nspawn:box:vol-worker@jobs.service"].paths == (f"{vol}/jobs",)
    assert "systemd-unit:vol-run.service" not in by_id       # the host has no such unit
    assert SECRET not in json.dumps([c.as_json() for c in consumers])


def test_without_a_manager_state_comes_from_unit_file_links(box):
    b, vol, mount_name = box
    target = resolve_target(vol)
    ct = ContainerRoot("nspawn", "box", b.pid1)
    mounts, _bad = read_mounts(Host.local(), b.pid1)
    v = container_view("nspawn:box", target, mounts)
    offline = VolumeView(v.where, v.prefixes, pid=None)    # no pid: no nsenter, no systemctl
    consumers, _problems = systemd_source.collect(configured.container_host(Host.local(), ct),
                                                  target, offline)
    by_name = {c.name: c for c in consumers if c.type == "systemd-unit"}
    for name in ("vol-run.service", "vol-env.service", "vol-worker@jobs.service", mount_name):
        assert (by_name[name].attrs.enabled, by_name[name].attrs.active) == (True, None)
        assert by_name[name].attrs.state_from == "unit-files"
    assert by_name["vol-draft.service"].attrs.enabled is False
    assert by_name["vol-draft.service"].attrs.unit_file_state == "disabled"


def test_user_units_with_state_from_the_user_manager(box):
    b, vol, _mount_name = box
    target = resolve_target(vol)
    ct = ContainerRoot("nspawn", "box", b.pid1)
    consumers, _problems = configured.collect(Host.local(), target, containers=(ct,))
    by_id = {c.id: c for c in consumers}
    for name, (enabled, active) in {"nb.service": (True, True),
                                    "later.service": (False, False)}.items():
        c = by_id[f"systemd-unit:nspawn:box:user:root:{name}"]
        assert (c.attrs.enabled, c.attrs.active) == (enabled, active), name
        assert c.attrs.state_from == "systemctl" and c.attrs.scope == "user"
        en = b.user_systemctl("is-enabled", name).stdout.strip() == "enabled"
        ac = b.user_systemctl("is-active", name).stdout.strip() == "active"
        assert (en, ac) == (enabled, active)                   # what systemctl --user says
    assert by_id["systemd-unit:nspawn:box:user:root:nb.service"].paths == (f"{vol}/bin/sleeper",)
    assert by_id["systemd-unit:nspawn:box:user:root:later.service"].paths == (f"{vol}/notebooks",)


@pytest.mark.slow
def test_check_decides_the_same_from_a_saved_observation(box):
    """The whole check of the volume the box's units use (processes in the booted systemd,
    its units through the container's root) equals the one decided from a saved
    observation; the running unit is stopped through the box's own manager."""
    from harness.observed import check_both_ways

    b, vol, _mount_name = box
    rc, doc = check_both_ways(vol, "--no-scan")
    assert rc == 1
    stops = {a["subject"]: a for bl in doc["verdict"]["blockers"] for a in bl["actions"]
             if a["kind"] == "stop-unit"}
    run = stops["vol-run.service"]
    assert run["argv"] == ["systemctl", "stop", "vol-run.service"]
    assert run["where"]["kind"] == "pid-namespace"       # the box's manager, not the host's
    assert run["where"]["pid"] == b.pid1                 # entered through the box's PID 1
    # the box's own unit files are read: its disabled unit naming the volume is a reference
    ids = {c["id"] for c in doc["consumers"]}
    assert f"systemd-unit:pidns:{b.pid1}:vol-draft.service" in ids
