"""NFS exports, LXC ``lxc.mount.entry`` lines and Proxmox container mount points naming a
real loop volume, taken out by the plan's edit-config steps in a temp host tree (the
machine's own /etc/exports, LXC configs and /etc/pve are never touched): lines commented out
with a dated marker and a backup, every other byte kept, a changed line refused; ``exportfs``
and ``pct`` are stand-ins on PATH that record their calls (pct cannot exist here; the real
exportfs would re-export the machine's own table)."""

import dataclasses
import os
import re
import textwrap
from types import SimpleNamespace

import pytest
from harness.config_files import backups, put, read

from vacate.act import config_edit, manual
from vacate.act.base import Context
from vacate.act.kind import carry_out
from vacate.decide.plan import make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.collectors.configured import exports, lxc, pve
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.host import Host
from vacate.observing.observe import observe

pytestmark = pytest.mark.root
MARK = re.compile(rb"# vacate \d{4}-\d{2}-\d{2}: ")

RECORDER = textwrap.dedent("""\
    #!/bin/sh
    echo "$(basename "$0") $*" >> "$STANDIN_CALLS"
    """)

# pct as far as vacate's edit uses it: ``set CTID --delete KEYS`` on
# $FAKE_PVE_ROOT/etc/pve/lxc/CTID.conf; a running container ($FAKE_PVE_STATE/pct-CTID) gets the
# deletion as a pending change, as Proxmox does for mount points
FAKE_PCT = textwrap.dedent("""\
    #!/usr/bin/env python3
    import os, sys
    with open(os.environ["STANDIN_CALLS"], "a") as f:
        f.write("pct " + " ".join(sys.argv[1:]) + "\\n")
    if sys.argv[1:2] == ["pending"] and len(sys.argv) == 3:
        conf = os.path.join(os.environ["FAKE_PVE_ROOT"], "etc/pve/lxc", sys.argv[2] + ".conf")
        lines = open(conf).read().splitlines()
        end = next((i for i, t in enumerate(lines) if t.startswith("[")), len(lines))
        for t in lines[:end]:
            print("cur " + t)
        pending = lines[end + 1:] if lines[end:end + 1] == ["[pve:pending]"] else []
        for t in pending:
            if t.startswith("delete: "):
                for k in t[len("delete: "):].split(","):
                    print("del " + k)
        sys.exit(0)
    if sys.argv[1:2] != ["set"] or sys.argv[3:4] != ["--delete"] or len(sys.argv) != 5:
        print("400 unknown command", file=sys.stderr)
        sys.exit(255)
    ctid, keys = sys.argv[2], sys.argv[4].split(",")
    conf = os.path.join(os.environ["FAKE_PVE_ROOT"], "etc/pve/lxc", ctid + ".conf")
    if not os.path.exists(conf):
        print(f"Configuration file 'nodes/pve/lxc/{ctid}.conf' does not exist", file=sys.stderr)
        sys.exit(2)
    lines = open(conf).read().splitlines()
    end = next((i for i, t in enumerate(lines) if t.startswith("[")), len(lines))
    state = os.path.join(os.environ["FAKE_PVE_STATE"], "pct-" + ctid)
    running = os.path.exists(state) and open(state).read().strip() == "running"
    if running:
        lines[end:end] = ["[pve:pending]", "delete: " + ",".join(keys)]
    else:
        lines[:end] = [t for t in lines[:end] if t.partition(":")[0].strip() not in keys]
    open(conf, "w").write("\\n".join(lines) + "\\n")
    """)




def calls(tree):
    return read(tree.calls).decode().splitlines() if os.path.exists(tree.calls) else []


@pytest.fixture
def tree(ext4_volume, tmp_path, monkeypatch):
    m = ext4_volume.mountpoint
    root = str(tmp_path / "host")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool, text in (("exportfs", RECORDER), ("pct", FAKE_PCT)):
        (bindir / tool).write_text(text)
        (bindir / tool).chmod(0o755)
    state = tmp_path / "pve-state"
    state.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_CALLS", str(tmp_path / "calls"))
    monkeypatch.setenv("FAKE_PVE_ROOT", root)
    monkeypatch.setenv("FAKE_PVE_STATE", str(state))
    files = {
        "/etc/exports": put(root, "/etc/exports", (
            "# /etc/exports: the access control list for NFS\n"
            "/srv/other 198.51.100.0/24(rw,sync)\n"
            f"{m}/shared 192.0.2.0/24(ro,no_subtree_check) 203.0.113.7(rw)\n"
            f"{m}/continued \\\n"
            "    192.0.2.0/24(ro)\n").encode(), mode=0o640, owner=(0, 4)),
        "/var/lib/lxc/web/config": put(root, "/var/lib/lxc/web/config", (
            "lxc.uts.name = web\n"
            "lxc.start.auto = 1\n"
            "lxc.rootfs.path = dir:/var/lib/lxc/web/rootfs\n"
            f"lxc.mount.entry = {m}/data srv/data none bind,create=dir 0 0\n"
            "lxc.mount.entry = /srv/other srv/other none bind 0 0\n"
            f"lxc.mount.entry = {m}/models srv/models none bind,ro 0 0\r\n"
            f"lxc.hook.pre-start = {m}/hooks/pre-start\n").encode()),
        "/etc/pve/lxc/101.conf": put(root, "/etc/pve/lxc/101.conf", (
            "arch: amd64\n"
            "hostname: ct101\n"
            "onboot: 1\n"
            f"mp0: {m}/data,mp=/mnt/data\n"
            "mp1: /srv/other,mp=/mnt/other\n"
            f"mp2: {m}/models,mp=/mnt/models,ro=1\n"
            "rootfs: local:101/vm-101-disk-0.raw,size=8G\n").encode(), mode=0o640,
            owner=(0, 33)),
    }
    put(root, "/etc/pve/storage.cfg", b"dir: local\n\tpath /var/lib/vz\n\tcontent rootdir\n")
    host = Host.under(root)
    obs = observe(m, scan_tree=False, configured=False)
    view = host_view(obs.target)
    configured = tuple(c for src in (exports, lxc, pve)
                       for c in src.collect(host, obs.target, view)[0])
    obs = dataclasses.replace(obs, consumers=obs.consumers + configured)
    return SimpleNamespace(root=root, m=m, files=files, host=host, obs=obs,
                           calls=str(tmp_path / "calls"), state=state)


def plan_of(tree, dest):
    plan = make_plan(tree.obs, PlanRequest(archive_to=dest))
    return plan, [s for s in plan.steps if s.kind == "edit-config"]


def only_marked(before: bytes, after: bytes, n: int) -> bool:
    """``after`` is ``before`` with line ``n`` behind vacate's marker and nothing else changed."""
    old, new = before.split(b"\n"), after.split(b"\n")
    m = MARK.match(new[n - 1])
    return len(old) == len(new) and m is not None and new[n - 1][m.end():] == old[n - 1] \
        and [x for i, x in enumerate(new) if i != n - 1] == \
        [x for i, x in enumerate(old) if i != n - 1]


def test_the_plan_edits_what_it_can_check_and_leaves_the_rest_manual(tree, tmp_path):
    plan, steps = plan_of(tree, str(tmp_path))
    got = sorted((s.params.file or s.params.config, s.params.line,
                  s.params.do) for s in steps)
    assert got == [("/etc/exports", 3, None), ("/etc/pve/lxc/101.conf", None, "delete-disks"),
                   ("/var/lib/lxc/web/config", 4, None), ("/var/lib/lxc/web/config", 6, None)]
    (pct,) = [s for s in steps if s.params.do]
    assert pct.action.argv == ("pct", "set", "101", "--delete", "mp0,mp2")
    assert pct.params.keys == ("mp0", "mp2")
    manual_at = sorted(s.action.subject for s in plan.steps if s.kind == "manual"
                       and s.action is not None and s.action.kind == "edit-config")
    # an export continued on the next line, and the hook: a person's
    assert manual_at == ["/etc/exports:4", "/var/lib/lxc/web/config:7"]
    ctx = Context(plan, host=tree.host)
    hook = next(s for s in plan.steps if s.kind == "manual"
                and s.action.subject == "/var/lib/lxc/web/config:7")
    assert manual.run(hook, ctx).detail.startswith(
        "remove or change the entry at /var/lib/lxc/web/config:7")


def test_an_export_is_commented_out_with_a_backup_and_exports_are_re_read(tree, tmp_path):
    plan, steps = plan_of(tree, str(tmp_path))
    (s,) = [s for s in steps if s.params.file == "/etc/exports"]
    local = tree.files["/etc/exports"]
    before, st0 = read(local), os.stat(local)
    ctx = Context(plan, host=tree.host)
    assert not config_edit.done(s, ctx) and config_edit.ready(s, ctx) is None
    out = carry_out(s, ctx)
    assert out.status == "ok", out
    assert "exportfs -ra" in out.detail and calls(tree) == ["exportfs -ra"]
    assert only_marked(before, read(local), 3)
    st = os.stat(local)
    assert (st.st_mode, st.st_uid, st.st_gid) == (st0.st_mode, 0, 4)
    (b,) = backups(local)
    assert read(b) == before and os.stat(b).st_mode == st0.st_mode
    # twice is once: nothing written again, exportfs told again (a crash may have come
    # between the edit and it)
    after = read(local)
    again = carry_out(s, ctx)
    assert again.status == "skipped" and read(local) == after and len(backups(local)) == 1
    assert calls(tree) == ["exportfs -ra", "exportfs -ra"]


def test_a_changed_export_line_is_refused_and_nothing_is_written(tree, tmp_path):
    plan, steps = plan_of(tree, str(tmp_path))
    (s,) = [s for s in steps if s.params.file == "/etc/exports"]
    local = tree.files["/etc/exports"]
    changed = read(local).replace(b"203.0.113.7(rw)", b"203.0.113.8(rw)")
    with open(local, "wb") as f:
        f.write(changed)
    ctx = Context(plan, host=tree.host)
    assert "line 3 of /etc/exports is not the line planned" in config_edit.ready(s, ctx)
    assert carry_out(s, ctx).status == "failed"
    assert read(local) == changed and backups(local) == [] and calls(tree) == []


def test_lxc_mount_entries_are_commented_out_and_the_detail_says_a_running_one_keeps_it(
        tree, tmp_path):
    plan, steps = plan_of(tree, str(tmp_path))
    lx = sorted((s for s in steps if s.params.file == "/var/lib/lxc/web/config"),
                key=lambda s: s.params.line)
    local = tree.files["/var/lib/lxc/web/config"]
    before = read(local)
    ctx = Context(plan, host=tree.host)
    outs = [carry_out(s, ctx) for s in lx]
    assert [o.status for o in outs] == ["ok", "ok"], outs
    # the state was not known here (no lxc-info for this tree): it may be running
    assert all("a running container keeps the mount until it restarts" in o.detail
               for o in outs)
    new = read(local).split(b"\n")
    old = before.split(b"\n")
    assert [i + 1 for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b] == [4, 6]
    for n in (4, 6):
        assert MARK.match(new[n - 1]) and new[n - 1][MARK.match(new[n - 1]).end():] == old[n - 1]
    assert new[5].endswith(b"0 0\r")               # its CRLF line end stays the line's
    assert b"/srv/other srv/other" in new[4] and not MARK.match(new[4])
    assert len(backups(local)) == 2 and read(backups(local)[0]) == before
    assert all(config_edit.done(s, ctx) for s in lx) and calls(tree) == []
    # the container's config now names the volume only in the hook a person changes
    view = host_view(tree.obs.target)
    (c,) = lxc.collect(tree.host, tree.obs.target, view)[0]
    assert [e.source for e in c.evidence] == ["/var/lib/lxc/web/config:7"]
    assert c.attrs.mount_entries == []


def test_a_planned_lxc_line_that_moved_is_refused(tree, tmp_path):
    plan, steps = plan_of(tree, str(tmp_path))
    s = next(s for s in steps if s.params.file == "/var/lib/lxc/web/config")
    local = tree.files["/var/lib/lxc/web/config"]
    moved = b"# a comment put in above\n" + read(local)
    with open(local, "wb") as f:
        f.write(moved)
    out = carry_out(s, Context(plan, host=tree.host))
    assert out.status == "failed" and "not the line planned" in out.detail
    assert read(local) == moved and backups(local) == []


def test_pct_deletes_the_mount_points_of_a_stopped_container(tree, tmp_path):
    (tree.state / "pct-101").write_text("stopped\n")
    plan, steps = plan_of(tree, str(tmp_path))
    (s,) = [s for s in steps if s.params.do == "delete-disks"]
    ctx = Context(plan, host=tree.host)
    assert not config_edit.done(s, ctx) and config_edit.ready(s, ctx) is None
    out = carry_out(s, ctx)
    assert out.status == "ok", out
    assert out.detail == "mp0,mp2 deleted from CT 101"
    assert calls(tree) == ["pct set 101 --delete mp0,mp2"]
    text = read(tree.files["/etc/pve/lxc/101.conf"]).decode()
    assert "mp0:" not in text and "mp2:" not in text and "mp1: /srv/other" in text
    assert config_edit.done(s, ctx)
    again = carry_out(s, ctx)
    assert again.status == "skipped" and calls(tree) == ["pct set 101 --delete mp0,mp2"]


def test_pct_on_a_running_container_is_pending_until_it_restarts(tree, tmp_path):
    (tree.state / "pct-101").write_text("running\n")
    plan, steps = plan_of(tree, str(tmp_path))
    (s,) = [s for s in steps if s.params.do == "delete-disks"]
    ctx = Context(plan, host=tree.host)
    out = carry_out(s, ctx)
    assert out.status == "ok", out
    assert "pending until the container restarts" in out.detail and "[pve:pending]" in \
        out.detail
    text = read(tree.files["/etc/pve/lxc/101.conf"]).decode()
    assert f"mp0: {tree.m}/data" in text and "[pve:pending]\ndelete: mp0,mp2" in text
    assert config_edit.done(s, ctx)                 # pending is as far as pct goes now
    assert carry_out(s, ctx).status == "skipped"
    # the deletion pct lists as pending is the one the file holds
    assert calls(tree) == ["pct set 101 --delete mp0,mp2", "pct pending 101"]


def test_pct_that_leaves_a_key_fails_the_step(tree, tmp_path):
    """A pct that exits 0 without the change (another config than the one planned) is not
    taken at its word: the file is read again."""
    (tree.state / "pct-101").write_text("stopped\n")
    plan, steps = plan_of(tree, str(tmp_path))
    (s,) = [s for s in steps if s.params.do == "delete-disks"]
    os.environ["FAKE_PVE_ROOT"] = str(tmp_path / "elsewhere")
    put(str(tmp_path / "elsewhere"), "/etc/pve/lxc/101.conf", b"arch: amd64\n")
    out = carry_out(s, Context(plan, host=tree.host))
    assert out.status == "failed" and "mp0,mp2 is still in /etc/pve/lxc/101.conf" in out.detail


def test_configs_inside_a_container_stay_manual(tree, tmp_path):
    ct = {"type": "lxc", "name": "outer"}
    obs = dataclasses.replace(tree.obs, consumers=tuple(
        dataclasses.replace(c, attrs=c.attrs.updated(container=ct))
        if c.type in ("nfs-export", "lxc-container", "pve-container") else c
        for c in tree.obs.consumers))
    plan = make_plan(obs, PlanRequest(archive_to=str(tmp_path)))
    assert [s for s in plan.steps if s.kind == "edit-config"] == []
