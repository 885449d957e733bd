"""A host whose ``/etc`` is a copy elsewhere while its root stays ``/`` (``Host(etc=...)``):
the fstab and cron sources read the copy and name its files as the host spells them
(``/etc/fstab``), and the plan's edit-config steps edit the copy, never the machine's own."""

import dataclasses
import hashlib
import os
import subprocess

import pytest

from vacate.act import config_edit
from vacate.act.base import Context
from vacate.decide.plan import make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.collectors.configured import cron, fstab
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.host import Host
from vacate.observing.observe import observe


def test_a_path_in_a_tree_kept_apart_lies_in_that_tree():
    h = Host(etc="/srv/copy/etc", run="/srv/copy/run")
    assert h.path("/etc/fstab") == "/srv/copy/etc/fstab"
    assert h.path("/etc") == "/srv/copy/etc"
    assert h.path("/run/systemd/system") == "/srv/copy/run/systemd/system"
    assert h.path("/etcetera/x") == "/etcetera/x" and h.path("/var/spool/cron") == \
        "/var/spool/cron"
    assert h.spell("/srv/copy/etc/cron.d/job") == "/etc/cron.d/job"
    assert h.spell("/var/spool/cron/crontabs/root") == "/var/spool/cron/crontabs/root"
    under = Host.under("/captured")             # every tree below the root: as before
    assert under.path("/etc/fstab") == "/captured/etc/fstab"
    assert under.spell("/captured/etc/fstab") == "/etc/fstab"
    assert Host.local().path("/etc/fstab") == "/etc/fstab"


def _sha(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return None


@pytest.mark.root
def test_fstab_and_cron_lines_in_a_copy_of_etc_are_read_and_edited_there(ext4_volume,
                                                                        tmp_path):
    m = ext4_volume.mountpoint
    uuid = subprocess.run(["blkid", "-c", "/dev/null", "-s", "UUID", "-o", "value",
                           ext4_volume.device], capture_output=True, text=True,
                          check=True).stdout.strip()
    etc = tmp_path / "etc"
    (etc / "cron.d").mkdir(parents=True)
    (etc / "fstab").write_text(f"# copy\nUUID={uuid} {m} ext4 nofail 0 2\n")
    (etc / "crontab").write_text(f"SHELL=/bin/sh\n0 1 * * * root {m}/bin/nightly\n")
    (etc / "cron.d" / "job").write_text(f"*/5 * * * * root rsync -a {m}/work /backup\n")
    host = Host(etc=str(etc), run=str(tmp_path / "run"))
    mine = {p: _sha(p) for p in ("/etc/fstab", "/etc/crontab", "/etc/cron.d/job")}

    obs = observe(m, scan_tree=False, configured=False)
    view = host_view(obs.target)
    found = tuple(c for src in (fstab, cron) for c in src.collect(host, obs.target, view)[0])
    assert sorted(c.id for c in found) == ["cron:/etc/cron.d/job:1", "cron:/etc/crontab:2",
                                           "fstab:/etc/fstab:2"]
    assert {c.attrs.file for c in found} == {"/etc/fstab", "/etc/crontab",
                                                "/etc/cron.d/job"}

    plan = make_plan(dataclasses.replace(obs, consumers=obs.consumers + found),
                     PlanRequest(archive_to=str(tmp_path / "dest")))
    steps = [s for s in plan.steps if s.kind == "edit-config"]
    assert len(steps) == 3
    ctx = Context(plan, host=host)
    for s in steps:
        assert config_edit.run(s, ctx).status == "ok"
    assert ctx.commands == []                  # no systemd in the copy's /run: no reload
    assert (etc / "fstab").read_text().splitlines()[1].startswith("# vacate ")
    assert (etc / "crontab").read_text().splitlines()[1].startswith("# vacate ")
    assert (etc / "cron.d" / "job").read_text().startswith("# vacate ")
    assert any(n.startswith(".job.vacate-backup-") for n in os.listdir(etc / "cron.d"))
    assert {p: _sha(p) for p in mine} == mine   # the machine's own: untouched
