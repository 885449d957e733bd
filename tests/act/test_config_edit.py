"""fstab and crontab lines naming a real loop volume, commented out by the plan's edit-config
steps in a temp host tree (the machine's own /etc is never touched): a dated marker, a
backup beside the file with its mode and owner, every other byte kept; a line that changed
since the plan is refused and nothing is written; twice is once."""

import dataclasses
import hashlib
import os
import subprocess
from types import SimpleNamespace

import pytest
from harness.config_files import MARK, backups, put, read

from vacate.act import config_edit, manual
from vacate.act.base import Context
from vacate.act.kind import carry_out
from vacate.decide.plan import make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.collectors.configured import cron, exports, fstab
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.host import Host
from vacate.observing.observe import observe

pytestmark = pytest.mark.root








@pytest.fixture
def tree(ext4_volume, tmp_path):
    m = ext4_volume.mountpoint
    uuid = subprocess.run(["blkid", "-c", "/dev/null", "-s", "UUID", "-o", "value",
                           ext4_volume.device], capture_output=True, text=True,
                          check=True).stdout.strip()
    root = str(tmp_path / "host")
    files = {
        "/etc/fstab": put(root, "/etc/fstab", (
            "# /etc/fstab\n"
            "UUID=0a3407de-014b-458b-b5c1-848e92a327a3 / ext4 errors=remount-ro 0 1\n"
            f"UUID={uuid} {m} ext4 nofail 0 2\n"
            "tmpfs /tmp tmpfs size=1g 0 0\n").encode()),
        # a comment with bytes that are not UTF-8, a line ending in CRLF, no final newline
        "/etc/crontab": put(root, "/etc/crontab", (
            b"SHELL=/bin/sh\n# caf\xe9 \xff\n"
            + f"*/5 * * * * root rsync -a {m}/work /backup\r\n".encode()
            + b"0 1 * * * root /usr/bin/true")),
        "/var/spool/cron/crontabs/alice": put(
            root, "/var/spool/cron/crontabs/alice",
            f"# m h dom mon dow command\n0 3 * * * HF_TOKEN=hf_secret123456 {m}/bin/train.sh\n"
            .encode(), mode=0o600, owner=(1234, 5678)),
        # an entry continued on a second line: not one line vacate can take out
        "/etc/exports": put(root, "/etc/exports",
                            f"{m}/shared \\\n  192.0.2.0/24(ro,no_subtree_check)\n".encode()),
    }
    host = Host.under(root)
    obs = observe(m, scan_tree=False, configured=False)
    view = host_view(obs.target)
    configured = tuple(c for src in (fstab, cron, exports)
                       for c in src.collect(host, obs.target, view)[0])
    obs = dataclasses.replace(obs, consumers=obs.consumers + configured)
    return SimpleNamespace(root=root, files=files, host=host, obs=obs)


def edit_steps(obs, dest):
    """The plan, and its edit-config steps of fstab and crontab lines."""
    plan = make_plan(obs, PlanRequest(archive_to=dest))
    return plan, [s for s in plan.steps if s.kind == "edit-config"
                  and s.action.consumer.split(":")[0] in ("fstab", "cron")]


def test_each_line_is_commented_out_with_a_backup_and_twice_is_once(tree, tmp_path):
    files = tree.files
    plan, steps = edit_steps(tree.obs, str(tmp_path))
    assert sorted((s.params.file, s.params.line) for s in steps) == [
        ("/etc/crontab", 3), ("/etc/fstab", 3), ("/var/spool/cron/crontabs/alice", 2)]
    ctx = Context(plan, host=tree.host)
    files = {f: p for f, p in files.items() if f != "/etc/exports"}
    before = {f: read(p) for f, p in files.items()}
    stats = {f: os.stat(p) for f, p in files.items()}
    for s in steps:
        assert not config_edit.done(s, ctx) and config_edit.ready(s, ctx) is None
        out = carry_out(s, ctx)
        assert out.status == "ok", out
        assert config_edit.done(s, ctx)
    assert ctx.commands == []          # no systemd runs this tree: nothing to reload
    for f, local in files.items():
        n = next(s.params.line for s in steps if s.params.file == f)
        old, new = before[f].split(b"\n"), read(local).split(b"\n")
        assert len(old) == len(new)
        assert [x for i, x in enumerate(new) if i != n - 1] == \
            [x for i, x in enumerate(old) if i != n - 1]          # every other byte kept
        assert MARK.match(new[n - 1]) and new[n - 1][MARK.match(new[n - 1]).end():] == old[n - 1]
        st = os.stat(local)
        assert (st.st_mode, st.st_uid, st.st_gid) == (stats[f].st_mode, stats[f].st_uid,
                                                      stats[f].st_gid)
        (b,) = backups(local)
        assert read(b) == before[f]                              # the file as it was
        bst = os.stat(b)
        assert (bst.st_mode, bst.st_uid, bst.st_gid) == (st.st_mode, st.st_uid, st.st_gid)
    # cron reads every file in a spool or cron.d: the backup there is hidden from it
    assert os.path.basename(backups(files["/var/spool/cron/crontabs/alice"])[0]).startswith(
        ".alice.vacate-backup-")
    assert os.path.basename(backups(files["/etc/fstab"])[0]).startswith("fstab.vacate-backup-")
    # the crontab's CRLF line end stays the line's
    assert read(files["/etc/crontab"]).split(b"\n")[2].endswith(b"/backup\r")
    # nothing of the redacted text went in: the secret is still there, as it was
    assert b"hf_secret123456" in read(files["/var/spool/cron/crontabs/alice"])

    after = {f: read(p) for f, p in files.items()}
    for s in steps:                                              # twice is once
        out = carry_out(s, ctx)
        assert out.status == "skipped", out
    assert {f: read(p) for f, p in files.items()} == after
    assert all(len(backups(p)) == 1 for p in files.values())


def test_a_line_changed_since_the_plan_is_refused_and_nothing_is_written(tree, tmp_path):
    files = tree.files
    plan, steps = edit_steps(tree.obs, str(tmp_path))
    ctx = Context(plan, host=tree.host)
    by = {s.params.file: s for s in steps}
    fs = files["/etc/fstab"]
    changed = read(fs).replace(b"nofail 0 2", b"defaults 0 2")
    with open(fs, "wb") as f:
        f.write(changed)
    why = config_edit.ready(by["/etc/fstab"], ctx)
    assert "line 3 of /etc/fstab is not the line planned" in why and "defaults" in why
    out = carry_out(by["/etc/fstab"], ctx)
    assert out.status == "failed" and not config_edit.done(by["/etc/fstab"], ctx)
    assert read(fs) == changed and backups(fs) == []

    # a line put in above it moves it: line 2 is not the line planned any more
    ct = files["/var/spool/cron/crontabs/alice"]
    moved = b"MAILTO=alice\n" + read(ct)
    with open(ct, "wb") as f:
        f.write(moved)
    assert carry_out(by["/var/spool/cron/crontabs/alice"], ctx).status == "failed"
    assert read(ct) == moved and backups(ct) == []

    # a plan without the line's sha256 (an older observation) does not edit blind
    old = dataclasses.replace(by["/etc/crontab"], params=dataclasses.replace(
        by["/etc/crontab"].params, line_sha256=None))
    assert "no sha256" in config_edit.ready(old, ctx)

    # a symbolic link is not replaced by a file
    target = read(files["/etc/crontab"])
    os.rename(files["/etc/crontab"], files["/etc/crontab"] + ".real")
    os.symlink("crontab.real", files["/etc/crontab"])
    assert "symbolic link" in config_edit.ready(by["/etc/crontab"], ctx)
    assert os.path.islink(files["/etc/crontab"]) and read(files["/etc/crontab"]) == target


def test_fstab_edit_reloads_systemd_where_it_runs_the_host(tree, tmp_path):
    """A tree whose /run/systemd/system says systemd runs it: after the edit, systemctl
    daemon-reload runs; here it cannot succeed (systemd is not PID 1 of this machine), which
    fails the step with the edit done, and a rerun tells systemd again."""
    files = tree.files
    os.makedirs(os.path.join(tree.root, "run/systemd/system"))
    plan, steps = edit_steps(tree.obs, str(tmp_path))
    ctx = Context(plan, host=tree.host)
    (s,) = [s for s in steps if s.params.file == "/etc/fstab"]
    out = carry_out(s, ctx)
    assert ctx.commands == [("systemctl", "daemon-reload")]
    if out.status == "failed":
        assert "commented out" in out.detail and config_edit.done(s, ctx)
        again = carry_out(s, ctx)
        assert ctx.commands[-1] == ("systemctl", "daemon-reload") and len(ctx.commands) == 2
        assert again.status == "failed" and "already" in again.detail
    else:
        assert out.status == "ok" and "systemd reloaded" in out.detail
    line = read(files["/etc/fstab"]).split(b"\n")[2]
    assert hashlib.sha256(line[MARK.match(line).end():]).hexdigest() == s.params.line_sha256


def test_a_config_vacate_does_not_edit_is_a_manual_step_saying_what_to_do(tree, tmp_path):
    plan, _steps = edit_steps(tree.obs, str(tmp_path))
    (step,) = [s for s in plan.steps if s.kind == "manual"
               and s.action and s.action.params.file == "/etc/exports"]
    ctx = Context(plan, host=tree.host)
    before = read(tree.files["/etc/exports"])
    assert not manual.done(step, ctx) and manual.ready(step, ctx) is None
    out = manual.run(step, ctx)
    assert out.status == "manual"
    assert out.detail == "remove the export at /etc/exports:1, then exportfs -ra"
    assert read(tree.files["/etc/exports"]) == before and ctx.commands == []
    assert not manual.done(step, ctx)           # only a fresh look can tell
