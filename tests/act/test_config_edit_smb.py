"""A Samba share of the volume is commented out whole by apply: every line of its section,
from the file as re-read, with a backup; the other shares untouched; refused when the section
changed since the plan."""

from __future__ import annotations

import dataclasses
import os

import pytest
from harness.config_files import MARK, backups, put, read
from harness.volumes import can_loop_mount, make_volume

from vacate.act import config_edit
from vacate.act.base import Context
from vacate.act.kind import carry_out
from vacate.decide.plan import make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.collectors.configured import smb
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.host import Host
from vacate.observing.observe import observe

pytestmark = pytest.mark.root


@pytest.fixture
def share(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4")
    m = v.mountpoint
    os.makedirs(f"{m}/scratch")
    root = str(tmp_path / "host")
    conf = put(root, "/etc/samba/smb.conf", (
        "[global]\n"
        "   workgroup = WORKGROUP\n"
        "\n"
        "[other]\n"
        "   path = /srv/other\n"
        "\n"
        "[ Scratch ]\n"
        "   # the lab's scratch space\n"
        f"   path = {m}/scratch\n"
        "   read only = no\n"
        "\n"
        "[after]\n"
        "   path = /srv/after\n").encode(), mode=0o640, owner=(0, 4))
    host = Host.under(root)
    obs = observe(m, scan_tree=False, configured=False)
    found = smb.collect(host, obs.target, host_view(obs.target))[0]
    obs = dataclasses.replace(obs, consumers=obs.consumers + tuple(found))
    yield host, obs, conf, m
    v.close()


def _step(obs, dest):
    plan = make_plan(obs, PlanRequest(archive_to=dest))
    (s,) = [s for s in plan.steps if s.kind == "edit-config"]
    return plan, s


def test_the_share_section_is_commented_out_whole(share, tmp_path):
    host, obs, conf, _m = share
    plan, s = _step(obs, str(tmp_path))
    assert [n for n, _h in s.params.lines] == [7, 9, 10]     # header and parameters
    before = read(conf)
    ctx = Context(plan, host=host)
    assert config_edit.ready(s, ctx) is None and not config_edit.done(s, ctx)
    out = carry_out(s, ctx)
    assert out.status == "ok", out
    old, new = before.split(b"\n"), read(conf).split(b"\n")
    for i, (a, b) in enumerate(zip(old, new), 1):
        if i in (7, 9, 10):
            m = MARK.match(b)
            assert m and b[m.end():] == a, (i, b)
        else:
            assert a == b, i                   # other shares, comments, blanks: untouched
    (bk,) = backups(conf)
    assert read(bk) == before
    again = carry_out(s, ctx)
    assert again.status == "skipped" and len(backups(conf)) == 1
    # collected again, the share is gone
    found = smb.collect(host, obs.target, host_view(obs.target))[0]
    assert not [c for c in found if c.type == "smb-share"]


def test_a_section_changed_since_the_plan_is_refused(share, tmp_path):
    host, obs, conf, _m = share
    plan, s = _step(obs, str(tmp_path))
    text = read(conf).replace(b"read only = no", b"read only = yes")
    with open(conf, "wb") as f:
        f.write(text)
    ctx = Context(plan, host=host)
    assert "line 10" in config_edit.ready(s, ctx)
    assert carry_out(s, ctx).status == "failed"
    assert read(conf) == text and not backups(conf)
