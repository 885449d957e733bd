"""The configured collector end to end on a captured host tree (with a container inside it):
systemd units in every form that matters, env files, crontabs, and failing sources."""

import json
import os
import sys
import types

import pytest
from harness.etc_files import data_target, write

from vacate.observing.collectors import configured
from vacate.observing.host import Host
from vacate.observing.model.usage import ContainerRoot
from vacate.output.next_steps import for_consumer as said

SECRET = "hf_secretsecretsecretsecret1234"
TREE = {
    "/proc/self/mountinfo": "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
                            "10 1 7:3 / /data rw,relatime - ext4 /dev/loop3 rw\n"
                            "11 1 7:3 /models /srv/models rw - ext4 /dev/loop3 rw\n",
    "/etc/passwd": "root:x:0:0:root:/root:/bin/bash\nml:x:1000:1000::/home/ml:/bin/bash\n",
    "/etc/systemd/system/serve.service":
        "[Service]\nExecStart=/srv/models/bin/serve --port 1\n[Install]\nWantedBy=multi-user.target\n",
    "/etc/systemd/system/draft.service":
        "[Unit]\nDescription=draft\n[Service]\nEnvironment=DRAFT=/data/eagle3/draft\n"
        "ExecStart=/usr/bin/python -m sglang.launch_server --speculative-draft ${DRAFT}\n"
        "[Install]\nWantedBy=multi-user.target\n",
    "/etc/systemd/system/draft.service.d/10-token.conf":
        f'[Service]\nEnvironment="HF_TOKEN={SECRET}" "CACHE=/data/hf cache"\n',
    "/lib/systemd/system/masked.service": "[Service]\nExecStart=/data/never\n",
    # same drop-in name in /lib and /etc: the /etc one replaces it
    "/lib/systemd/system/serve.service.d/50-x.conf": "[Service]\nEnvironment=X=/data/lib-x\n",
    "/etc/systemd/system/serve.service.d/50-x.conf": "[Service]\nEnvironment=X=/srv/other\n",
    # a prefix drop-in (vol-.service.d) applies to vol-a.service
    "/lib/systemd/system/vol-a.service": "[Service]\nExecStart=/usr/bin/true\n",
    "/etc/systemd/system/vol-.service.d/10-wd.conf": "[Service]\nWorkingDirectory=/data/vol-prefix\n",
    "/etc/systemd/system/worker@.service": "[Service]\nWorkingDirectory=/data/%I\nExecStart=/bin/true\n",
    "/data/app/app.service": "[Service]\nExecStart=/usr/bin/true\n",
    "/etc/systemd/system/envuser.service":
        "[Service]\nEnvironmentFile=-/etc/default/envuser\nEnvironmentFile=-/etc/default/missing\n"
        "ExecStart=/usr/bin/app $ARGS\n",
    "/etc/default/envuser": 'ARGS="--cache /data/cache"\n',
    "/etc/systemd/system/data.mount": "[Mount]\nWhat=/dev/loop3\nWhere=/data\nType=ext4\n",
    "/lib/systemd/system/unrelated.service": "[Service]\nExecStart=/usr/bin/true\n",
    "/etc/environment": "HF_HOME=/data/hf\nLANG=C.UTF-8\n",
    "/home/ml/.config/systemd/user/nb.service":
        "[Service]\nExecStart=/data/venv/bin/jupyter lab --notebook-dir=%h/nb\n"
        "[Install]\nWantedBy=default.target\n",
    # a container (init pid 4242) that sees a subdirectory of the volume at /mnt/mp0
    "/proc/4242/mountinfo": "50 1 0:99 / / rw - ext4 rootfs rw\n"
                            "51 50 7:3 /eagle3 /mnt/mp0 rw - ext4 /dev/loop3 rw\n",
    "/proc/4242/root/etc/systemd/system/ctjob.service": "[Service]\nExecStart=/mnt/mp0/run.sh\n",
    "/proc/4242/root/etc/crontab": "0 1 * * * root /mnt/mp0/nightly.sh\n",
    "/proc/4242/root/usr/lib/systemd/system/ctlib.service": "[Service]\nExecStart=/mnt/mp0/lib.sh\n",
}
LINKS = {
    "/etc/systemd/system/multi-user.target.wants/serve.service": "../serve.service",
    "/etc/systemd/system/multi-user.target.wants/worker@jobs-a.service": "../worker@.service",
    "/etc/systemd/system/masked.service": "/dev/null",
    "/etc/systemd/system/app.service": "/data/app/app.service",
    "/home/ml/.config/systemd/user/default.target.wants/nb.service": "../nb.service",
    # an absolute link inside the container's tree must resolve inside it, not on the host
    "/proc/4242/root/lib": "/usr/lib",
}


@pytest.fixture
def tree(tmp_path):
    root = str(tmp_path)
    for rel, text in TREE.items():
        write(root, rel, text)
    for rel, dest in LINKS.items():
        path = os.path.join(root, rel.lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(dest, path)
    return Host.under(root)


def run(host, **kw):
    consumers, problems = configured.collect(host, data_target(), **kw)
    return {c.id: c for c in consumers}, problems


def test_systemd_units_in_every_form(tree):
    by_id, problems = run(tree)
    assert [p for p in problems if p.blocks_verdict] == []
    units = {i for i, c in by_id.items() if c.type == "systemd-unit"}
    assert units == {
        "systemd-unit:serve.service", "systemd-unit:draft.service",
        "systemd-unit:worker@jobs-a.service", "systemd-unit:app.service",
        "systemd-unit:envuser.service", "systemd-unit:data.mount",
        "systemd-unit:user:ml:nb.service", "systemd-unit:vol-a.service"}
    serve = by_id["systemd-unit:serve.service"]
    assert (serve.attrs.enabled, serve.attrs.active) == (True, None)
    assert serve.paths == ("/data/models/bin/serve",)       # spelled through the bind mount
    assert serve.attrs.dropins == ["/etc/systemd/system/serve.service.d/50-x.conf"]
    assert by_id["systemd-unit:vol-a.service"].paths == ("/data/vol-prefix",)
    assert serve.evidence[0].source == "/etc/systemd/system/serve.service:2"
    draft = by_id["systemd-unit:draft.service"]
    assert draft.attrs.enabled is False and draft.live is False
    assert draft.paths == ("/data/eagle3/draft", "/data/hf cache")
    assert draft.attrs.dropins == ["/etc/systemd/system/draft.service.d/10-token.conf"]
    assert by_id["systemd-unit:worker@jobs-a.service"].paths == ("/data/jobs/a",)
    app = by_id["systemd-unit:app.service"]
    assert app.attrs.fields["unit_file"] == ["/data/app/app.service"]
    assert by_id["systemd-unit:data.mount"].attrs.mounts == "/data"
    assert by_id["systemd-unit:data.mount"].attrs.mounts_target is True
    nb = by_id["systemd-unit:user:ml:nb.service"]
    assert nb.attrs.user == "ml" and nb.attrs.enabled is True
    assert nb.paths == ("/data/venv/bin/jupyter",)


def test_environment_files_and_env_config(tree):
    by_id, _p = run(tree)
    assert by_id["systemd-unit:envuser.service"].paths == ("/data/cache",)
    envfile = by_id["config-file:/etc/default/envuser"]
    assert envfile.attrs.used_by == ["systemd-unit:envuser.service"]
    assert envfile.evidence[0].source == "/etc/default/envuser:1"
    env = by_id["config-file:/etc/environment"]
    assert env.paths == ("/data/hf",) and env.evidence[0].source == "/etc/environment:1"


def test_secrets_never_in_the_output(tree):
    by_id, _p = run(tree)
    doc = json.dumps([c.as_json() for c in by_id.values()])
    assert SECRET not in doc
    assert "HF_TOKEN=<redacted>" in doc


def test_container_configs_are_read_through_its_root(tree):
    by_id, problems = run(tree, containers=(ContainerRoot("nspawn", "ct", 4242),))
    assert [p for p in problems if p.blocks_verdict] == []
    job = by_id["systemd-unit:nspawn:ct:ctjob.service"]
    assert job.paths == ("/data/eagle3/run.sh",) and job.attrs.container["type"] == "nspawn"
    assert job.attrs.container["name"] == "ct"
    assert said(job) == "systemctl -M ct disable ctjob.service"
    assert job.evidence[0].detail == "ExecStart=/mnt/mp0/run.sh"
    cron = by_id["cron:nspawn:ct:/etc/crontab:1"]
    assert cron.paths == ("/data/eagle3/nightly.sh",)
    assert "systemd-unit:ctjob.service" not in by_id      # not on the host
    lib = by_id["systemd-unit:nspawn:ct:ctlib.service"]
    assert lib.attrs.unit_file == "/lib/systemd/system/ctlib.service"
    assert lib.paths == ("/data/eagle3/lib.sh",)


def test_unreadable_container_is_a_blocking_problem(tree):
    _by_id, problems = run(tree, containers=(ContainerRoot("lxc", "gone", 999999),))
    assert [(p.code, p.blocks_verdict) for p in problems] == [("container-unreadable", True)]


def test_a_failing_source_becomes_a_problem_not_a_crash(tree, monkeypatch):
    def boom(host, target, view):
        raise RuntimeError("parser exploded")
    fake = types.ModuleType("vacate.observing.collectors.configured.docker")
    fake.collect = boom
    monkeypatch.setitem(sys.modules, "vacate.observing.collectors.configured.docker", fake)
    by_id, problems = run(tree)
    failed = [p for p in problems if p.code == "source-failed"]
    assert len(failed) == 1 and failed[0].blocks_verdict and "parser exploded" in failed[0].message
    assert "systemd-unit:serve.service" in by_id          # the other sources still ran
