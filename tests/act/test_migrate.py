"""Migrate, for real: a ``Restart=always`` unit of a booted systemd (PID 1 of private
namespaces) mmaps a model on a loop volume; ``plan --migrate`` then ``apply`` copy the model
to another directory, read it back, repoint the unit by a drop-in of vacate's own, start it
from there, and retire the volume. The unit file and the admin's drop-ins are left as they
were; ``undo`` removes exactly vacate's drop-in."""

from __future__ import annotations

import os
import subprocess

import pytest
from harness.migrate_box import (
    INSTALL,
    PY,
    N,
    box_cmd,
    looked_at,
    mapped_under,
    model_box,
    plan_to,
    read,
    unit_text,
)
from harness.systemd_box import available
from harness.waiting import wait_for

from vacate.act import copy_tree, migrate
from vacate.flow import apply as ap
from vacate.flow.plan import plan as make_plan_file
from vacate.flow.undo import undo

pytestmark = [pytest.mark.root, pytest.mark.skipif(not available(), reason="needs root + systemd")]





















def reported(plan_path: str, work: str) -> tuple[str, str]:
    """``vacate report PLAN`` as a person reads it (whitespace folded: the terminal wraps),
    and the page ``--html`` writes."""
    import html
    import io
    import re

    from vacate.cli.env import Env
    from vacate.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    assert main(["report", plan_path], Env(stdout=out, stderr=err, stdin=None)) == 0, \
        err.getvalue()
    page = os.path.join(work, "report.html")
    assert main(["report", plan_path, "--html", page],
                Env(stdout=io.StringIO(), stderr=err, stdin=None)) == 0, err.getvalue()
    inline = re.sub(r"</?(bdi|code|b|small|span)\b[^>]*>", "", read(page))
    text = re.sub(r"<[^>]+>", " ", inline)
    return " ".join(out.getvalue().split()), " ".join(html.unescape(text).split())


@pytest.mark.slow
def test_the_service_moves_to_dest_and_the_volume_is_retired_then_undo(story):
    b, v, vol, dest, work = story
    unit_before = unit_text(b)
    admin = {n: read(os.path.join(b.units_dir, "qwen.service.d", n))
             for n in ("override.conf", "50-limits.conf")}
    plan_path = plan_to(vol, dest, work)
    plan, _ = ap.load(plan_path)
    (item,) = [i for i in plan.items if i.action == "migrate"]
    assert item.migrate_to == f"{dest}/qwen" and item.dest_free_bytes > 0
    kinds = [s.kind for s in plan.steps]
    # copied and read back while it runs; then stop, copy again, read back, repoint, start
    assert kinds[:2] == ["copy", "verify-copy"]
    assert kinds[2:8] == ["stop-unit", "copy", "verify-copy", "repoint-unit", "start-unit",
                          "unmount"][:6] or kinds[2:7] == ["stop-unit", "copy", "verify-copy",
                                                           "repoint-unit", "start-unit"]
    assert "disable-unit" not in kinds                  # it keeps running, from DEST

    text, page = reported(plan_path, work)
    for said in (text, page):                   # before: what would be done
        assert f"would migrate: {vol}/models/qwen to {dest}/qwen (3.1 MB; free there when " \
            "planned: " in said, said[said.find("would migrat") - 200:][:1500]
        assert "the source is left on the volume" in said
    assert "│ migrate to" in text and f"migrate to {dest}/qwen" in page   # the items' table

    r = ap.apply(plan_path)
    assert r.failed is None, [(s.id, s.status, s.detail) for s in r.steps]
    for said in reported(plan_path, work):      # after: what was done, how to undo it
        # 3 files: weights, config and its hardlink (linked again, not copied)
        assert f"migrated (done): {vol}/models/qwen to {dest}/qwen; copied 2 files (3.1 MB) " \
            "in 2 passes, 1 hardlinked again; read back from the disk: 2 files (3.1 MB), " \
            "each as the source was read" in said
        assert "repointed: qwen.service (" in said and "zz-vacate-migrate.conf" in said
        assert f"Environment: MODEL={vol}/models/qwen ADMIN_A=1" in said or \
            f"Environment MODEL={vol}/models/qwen ADMIN_A=1" in said         # text, page
        assert f"MODEL={dest}/qwen ADMIN_A=1" in said
        assert "undo: nsenter" in said and \
            "-a rm /etc/systemd/system/qwen.service.d/zz-vacate-migrate.conf && " in said
        assert "runs again: start qwen.service" in said
        assert f"migrated to {dest}/qwen, and left on the volume: {vol}/models/qwen" in said
    # the unit runs from DEST, nothing maps the old volume, the volume is gone
    assert box_cmd(b, "systemctl", "is-active", "qwen.service").stdout.strip() == "active"
    assert wait_for(lambda: mapped_under(f"{dest}/qwen"), "the server to map the copy")
    assert not mapped_under(vol)
    assert not os.path.ismount(vol)
    # the unit file and the admin's drop-ins are byte-identical; vacate's sorts last
    assert unit_text(b) == unit_before
    d = os.path.join(b.units_dir, "qwen.service.d")
    for n, text in admin.items():
        assert read(os.path.join(d, n)) == text
    ours = max(os.listdir(d))
    assert ours.endswith(migrate.DROPIN)
    text = read(os.path.join(d, ours))
    # Environment= cleared and written again whole: the admin's variables are kept
    assert f"Environment=\nEnvironment=MODEL={dest}/qwen ADMIN_A=1\n" in text
    env = box_cmd(b, "systemctl", "show", "-p", "Environment", "qwen.service").stdout
    assert f"MODEL={dest}/qwen" in env and "ADMIN_A=1" in env and "ADMIN_B=2" in env
    # the copy: hardlinks kept, every file read back
    assert os.stat(f"{dest}/qwen/config.json").st_ino == \
        os.stat(f"{dest}/qwen/sub/config.json").st_ino
    assert copy_tree.all_read_back(item.path, f"{dest}/qwen") or not os.path.exists(item.path)

    # a second apply changes nothing
    again = ap.apply(plan_path)
    assert again.failed is None

    # undo: exactly vacate's drop-in removed; with the old volume back the unit starts from it
    done = undo(plan_path)
    assert [u.status for u in done] == ["ok"]
    assert sorted(os.listdir(d)) == sorted(admin)
    subprocess.run(["chattr", "-i", vol], check=False)
    subprocess.run(["mount", v.device, vol], check=True)
    if box_cmd(b, "mountpoint", "-q", vol).returncode != 0:     # no propagation into it
        box_cmd(b, "mount", v.device, vol)
    box_cmd(b, "systemctl", "restart", "qwen.service")
    assert wait_for(lambda: mapped_under(vol), "the server to map the old path again")
    assert unit_text(b) == unit_before


def test_a_copy_that_reads_back_wrong_stops_before_any_repointing(story, monkeypatch):
    b, _v, vol, dest, work = story
    plan_path = plan_to(vol, dest, work)

    def flip(dest_path):                      # a byte flipped on the disk after the copy
        p = os.path.join(dest_path, "weights.bin")
        fd = os.open(p, os.O_RDWR)
        try:
            b0 = os.pread(fd, 1, 4096)
            os.pwrite(fd, bytes([b0[0] ^ 0xFF]), 4096)
            os.fsync(fd)
        finally:
            os.close(fd)

    monkeypatch.setattr(migrate, "read_back_hook", flip)
    r = ap.apply(plan_path)
    assert r.failed is not None and r.failed.kind == "verify-copy"
    assert f"{dest}/qwen/weights.bin" in r.failed.detail
    for said in reported(plan_path, work):
        assert f"read back wrong: {dest}/qwen/weights.bin: read back 3145728 bytes" in said
    kinds_done = [s.kind for s in r.steps if s.status in ("ok", "skipped")]
    assert "repoint-unit" not in kinds_done and "stop-unit" not in kinds_done
    # the service still runs from the old path
    assert box_cmd(b, "systemctl", "is-active", "qwen.service").stdout.strip() == "active"
    assert mapped_under(vol)
    assert not [n for n in os.listdir(os.path.join(b.units_dir, "qwen.service.d"))
                if n.endswith(migrate.DROPIN)]


@pytest.mark.slow
def test_a_failure_between_stop_and_start_brings_the_unit_back_from_the_old_path(story,
                                                                                  monkeypatch):
    b, _v, vol, dest, work = story
    plan_path = plan_to(vol, dest, work)
    real = migrate._RUN["start-unit"]

    def broken(step, ctx):
        raise OSError(5, "start failed on purpose")

    monkeypatch.setitem(migrate._RUN, "start-unit", broken)
    r = ap.apply(plan_path)
    assert r.failed is not None and r.failed.kind == "start-unit"
    assert "started qwen.service from the old path" in r.failed.detail
    assert box_cmd(b, "systemctl", "is-active", "qwen.service").stdout.strip() == "active"
    assert wait_for(lambda: mapped_under(vol), "the server back on the old path")
    assert not [n for n in os.listdir(os.path.join(b.units_dir, "qwen.service.d"))
                if n.endswith(migrate.DROPIN)]
    for said in reported(plan_path, work):
        assert "migrated (failed)" in said
        assert "brought back from the old path: removed " in said
        assert "started qwen.service from the old path" in said
    # the rerun finishes the migration
    monkeypatch.setitem(migrate._RUN, "start-unit", real)
    again = ap.apply(plan_path)
    assert again.failed is None, [(s.id, s.status, s.detail) for s in again.steps]
    assert wait_for(lambda: mapped_under(f"{dest}/qwen"), "the server on the copy")
    assert not os.path.ismount(vol)




@pytest.mark.slow
def test_migrate_and_delete_deletes_the_source_only_once_the_service_runs_from_dest(story):
    from vacate.act import delete_step
    from vacate.act.base import Context

    _b, v, vol, dest, work = story
    path = os.path.join(work, "plan.json")
    p = make_plan_file(vol, migrations={"models/qwen": dest},
                       overrides=[("delete", "models/qwen")], outputs=(path,))
    with open(path, "w") as f:
        f.write(p.dumps())
    plan, _ = ap.load(path)
    (item,) = [i for i in plan.items if i.action == "migrate"]
    assert item.delete_source and item.entries is not None
    assert "deleted once what used it runs from there" in item.get_back
    kinds = [s.kind for s in plan.steps]
    (delete,) = [s for s in plan.steps if s.kind == "delete"]
    assert delete.params.item == item.path
    # the delete comes after the unit runs from DEST (start-unit checks it came back)
    assert kinds.index("start-unit") < kinds.index("delete") < len(kinds) - 1 - \
        kinds[::-1].index("unmount")                       # the volume's own unmount
    assert plan.expected_freed_bytes == item.disk_bytes
    # before anything is copied, the source may not be deleted
    why = delete_step.ready(delete, Context(plan=plan, plan_path=path))
    assert why and "nothing was copied yet" in why and "is kept" in why

    r = ap.apply(path)
    assert r.failed is None, [(s.id, s.status, s.detail) for s in r.steps]
    done = {s.kind: s for s in r.steps}
    assert done["delete"].status == "ok"
    order = [s.kind for s in r.steps]
    assert order.index("start-unit") < order.index("delete")
    text, page = reported(path, work)
    assert f"migrate to {dest}/qwen, then delete" in page and "│ migrate to" in text
    for said in (text, page):
        assert "its source: deleted from the volume, now that it runs from the copy" in said
        assert f"gone: {vol}/models/qwen" in said
    assert wait_for(lambda: mapped_under(f"{dest}/qwen"), "the server to map the copy")
    assert os.path.getsize(f"{dest}/qwen/weights.bin") == 3 << 20
    # the volume, looked at again: the migrated model is gone from it, nothing else was
    with looked_at(v) as look:
        assert not os.path.exists(f"{look}/models/qwen")
        assert os.path.isdir(f"{look}/models")


@pytest.mark.slow
def test_migrate_without_delete_leaves_the_source_on_the_volume(story):
    _b, v, vol, dest, work = story
    plan_path = plan_to(vol, dest, work)
    plan, _ = ap.load(plan_path)
    assert "delete" not in [s.kind for s in plan.steps]
    assert ap.apply(plan_path).failed is None
    with looked_at(v) as look:
        assert os.path.getsize(f"{look}/models/qwen/weights.bin") == 3 << 20


def test_an_edited_plan_marking_a_migrated_item_delete_too_is_made_again(story):
    import json

    from vacate.flow.replan import replan

    _b, _v, vol, dest, work = story
    plan_path = plan_to(vol, dest, work)
    with open(plan_path) as f:
        doc = json.load(f)
    (it,) = [i for i in doc["items"] if i["action"] == "migrate"]
    it["delete_source"] = True                     # the person's edit
    edited = os.path.join(work, "edited.json")
    with open(edited, "w") as f:
        json.dump(doc, f)
    with pytest.raises(ap.Refused, match="not the ones its items make"):
        ap.apply(edited)
    got = replan(edited, outputs=(os.path.join(work, "new.json"),))
    assert any(c.startswith("+ ") and f"delete {it['path']} " in c and
               f"migrated to {dest}/qwen" in c for c in got.changes), got.changes
    (item,) = [i for i in got.plan.items if i.action == "migrate"]
    assert item.delete_source and item.entries is not None
    assert item.migrate_to == f"{dest}/qwen"
    assert [s.params.item for s in got.plan.steps if s.kind == "delete"] == [item.path]


def test_a_unit_whose_environment_file_vacate_cannot_rewrite_is_not_started_from_the_copy():
    # the file lies in the box's own /etc/systemd/system: vacate does not write there
    def units(vol, work):
        return {"units": {"qwen.service": f"{N}[Service]\n"
                                          f"EnvironmentFile=/etc/systemd/system/qwen.env\n"
                                          f"ExecStart={PY} {work}/server.py\n{INSTALL}"},
                "files": {"qwen.env": f"MODEL={vol}/models/qwen\n"}}

    with model_box(units, vol_mb=32, model_mb=1, enable=("qwen.service",)) as (_b, _v, vol,
                                                                               dest, _w):
        p = make_plan_file(vol, migrations={"models/qwen": dest})
        kinds = [s.kind for s in p.steps]
        assert "repoint-unit" not in kinds and "start-unit" not in kinds
        (manual,) = [s for s in p.steps if s.kind == "manual"]
        assert "qwen.service also names /etc/systemd/system/qwen.env" in manual.summary
        assert "it is not repointed or started; repoint it by hand" in manual.summary
