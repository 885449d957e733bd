"""Migrate, for real, units of a user's own manager: root's ``user@0.service`` in a booted
systemd (PID 1 of private namespaces, with its system bus) runs a unit and an instance of a
template that map a model on a loop volume. ``vacate plan --migrate`` then ``vacate apply``
repoint each by a drop-in of vacate's own in that user's manager (the instance's own
directory, not the template's), start them from the copy, and retire the volume; the unit
files and the admin's drop-ins are left as they were; ``vacate undo`` removes exactly
vacate's drop-ins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from harness.migrate_box import mapped_under, model_box, read
from harness.paths import SRC
from harness.systemd_box import available
from harness.waiting import wait_for

from vacate.act import migrate

pytestmark = [pytest.mark.root, pytest.mark.skipif(not available(), reason="needs root + systemd")]

PY = "/usr/bin/python3"
USER_DIR = ".config/systemd/user"
INSTALL = "[Install]\nWantedBy=default.target\n"


def user_units(vol: str, work: str) -> dict:
    """Root's own units (paths relative to its home): ``qwen.service`` and the template
    ``serve@.service`` (its instance ``serve@a.service``), both enabled, each with a drop-in of
    the admin's that vacate's must sort after."""
    d = USER_DIR
    return {
        f"{d}/qwen.service": "[Service]\nRestart=always\nRestartSec=0.1\n"
                             f"Environment=MODEL={vol}/models/qwen ADMIN_A=1\n"
                             f"ExecStart={PY} {work}/server.py\n{INSTALL}",
        f"{d}/qwen.service.d/override.conf": "[Service]\nEnvironment=ADMIN_B=2\n",
        f"{d}/serve@.service": f"[Service]\nEnvironment=MODEL={vol}/models/qwen\n"
                               f"ExecStart={PY} {work}/server.py %i\n{INSTALL}",
        f"{d}/serve@.service.d/50-admin.conf": "[Service]\nEnvironment=ADMIN_C=3\n",
        f"{d}/default.target.wants/qwen.service": "->../qwen.service",
        f"{d}/default.target.wants/serve@a.service": "->../serve@.service",
    }


def vacate(*argv: str) -> subprocess.CompletedProcess:
    """The real command, in its own process."""
    return subprocess.run([sys.executable, "-m", "vacate", *argv], capture_output=True,
                          text=True, check=False, timeout=300,
                          env=dict(os.environ, PYTHONPATH=SRC))


@pytest.fixture
def user_story():
    with model_box(lambda vol, work: {"units": {}, "home": user_units(vol, work)},
                   vol_mb=32, model_mb=1, servers=2, user_manager=True) as got:
        yield got


def unit_pids(b, unit: str) -> set[int]:
    """The unit's processes, as the host numbers them (from its cgroup)."""
    cg = b.user_m("show", "-p", "ControlGroup", "--value", unit).stdout.strip()
    with open(f"/sys/fs/cgroup/unified{cg}/cgroup.procs") as f:
        return {int(x) for x in f.read().split()}


def files_under(root: str) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                with open(p, "rb") as f:
                    out[os.path.relpath(p, root)] = f.read()
    return out


@pytest.mark.slow
def test_a_user_unit_and_a_template_instance_move_to_dest_then_undo(user_story):
    b, v, vol, dest, work = user_story
    units = os.path.join(b.workdir, "root-home", USER_DIR)
    before = files_under(units)
    plan_path = os.path.join(work, "plan.json")
    made = vacate("plan", vol, "--migrate", f"models/qwen={dest}", "-o", plan_path)
    assert made.returncode in (0, 1), made.stderr + made.stdout
    with open(plan_path) as f:
        steps = json.load(f)["steps"]
    assert not [s for s in steps if s["kind"] == "manual"], [s["summary"] for s in steps]
    repoints = sorted(s["params"]["unit"] for s in steps if s["kind"] == "repoint-unit")
    assert repoints == ["qwen.service", "serve@a.service"]
    said = [s["summary"] for s in steps if s["kind"] in ("stop-unit", "repoint-unit",
                                                           "start-unit")]
    assert len(said) == 6 and all("(root's manager, " in x for x in said), said

    applied = vacate("apply", plan_path, "--yes")
    assert applied.returncode == 0, applied.stderr + applied.stdout

    # each unit runs again in root's manager, from DEST; nothing maps the old volume
    new = f"{dest}/qwen"
    for unit in ("qwen.service", "serve@a.service"):
        assert b.user_m("is-active", unit).stdout.strip() == "active"
        pids = unit_pids(b, unit)
        assert wait_for(lambda: pids & mapped_under(new), f"{unit} to map the copy")  # noqa: B023
        env = b.user_m("show", "-p", "Environment", unit).stdout
        assert f"MODEL={new}" in env and f"MODEL={vol}" not in env
    assert b.user_m("show", "-p", "Environment", "qwen.service").stdout.split("=", 1)[1] \
        .split() == [f"MODEL={new}", "ADMIN_A=1", "ADMIN_B=2"]       # the admin's kept
    assert "ADMIN_C=3" in b.user_m("show", "-p", "Environment", "serve@a.service").stdout
    assert not mapped_under(vol)
    assert not os.path.ismount(vol)

    # the unit files and the admin's drop-ins byte-identical; vacate's own sorts last, in
    # the unit's directory of root's units: the instance's, not the template's
    after = files_under(units)
    assert {k: after[k] for k in before} == before
    ours = sorted(set(after) - set(before))
    assert [os.path.dirname(p) for p in ours] == ["qwen.service.d", "serve@a.service.d"]
    for path in ours:
        assert os.path.basename(path).endswith(migrate.DROPIN)
        assert after[path].decode().startswith(migrate.MARK)
    assert os.path.basename(ours[0]) > "override.conf"
    assert os.path.basename(ours[1]) > "50-admin.conf"
    assert f"Environment=\nEnvironment=MODEL={new} ADMIN_A=1\n" in after[ours[0]].decode()
    for unit, path in zip(("qwen.service", "serve@a.service"), ours):
        dropins = b.user_m("show", "-p", "DropInPaths", "--value", unit).stdout.split()
        assert dropins[-1] == f"/root/{USER_DIR}/{path}"        # applied last
    assert sorted(os.listdir(os.path.join(units, "serve@.service.d"))) == ["50-admin.conf"]

    # undo: exactly vacate's drop-ins removed, the user's manager reloaded
    undone = vacate("undo", plan_path)
    assert undone.returncode == 0, undone.stderr + undone.stdout
    assert files_under(units) == before
    for unit in ("qwen.service", "serve@a.service"):
        env = b.user_m("show", "-p", "Environment", unit).stdout
        assert f"MODEL={vol}/models/qwen" in env
        assert not [p for p in b.user_m("show", "-p", "DropInPaths", "--value", unit).stdout
                    .split() if p.endswith(migrate.DROPIN)]
    # with the old volume back, the units start from it again
    subprocess.run(["chattr", "-i", vol], check=False)
    subprocess.run(["mount", v.device, vol], check=True)
    if b.nsenter("mountpoint", "-q", vol).returncode != 0:       # no propagation into it
        b.nsenter("mount", v.device, vol, check=True)
    for unit in ("qwen.service", "serve@a.service"):
        b.user_m("restart", unit)
        assert wait_for(lambda: unit_pids(b, unit) & mapped_under(vol),  # noqa: B023
                        f"{unit} to map the old path again")
    assert read(os.path.join(units, "qwen.service")) == before["qwen.service"].decode()


@pytest.mark.slow
def test_a_failed_start_brings_the_user_units_back_from_the_old_path(user_story, monkeypatch):
    from vacate.flow import apply as ap
    from vacate.flow.plan import plan as make_plan_file

    b, _v, vol, dest, work = user_story
    units = os.path.join(b.workdir, "root-home", USER_DIR)
    before = files_under(units)
    plan_path = os.path.join(work, "plan.json")
    p = make_plan_file(vol, migrations={"models/qwen": dest}, outputs=(plan_path,))
    with open(plan_path, "w") as f:
        f.write(p.dumps())

    def broken(step, ctx):
        raise OSError(5, "start failed on purpose")

    monkeypatch.setitem(migrate._RUN, "start-unit", broken)
    r = ap.apply(plan_path)
    assert r.failed is not None and r.failed.kind == "start-unit"
    assert "started qwen.service from the old path" in r.failed.detail
    # vacate's drop-in gone from root's directory, the unit runs from the volume again
    assert files_under(units) == before
    assert b.user_m("is-active", "qwen.service").stdout.strip() == "active"
    assert wait_for(lambda: unit_pids(b, "qwen.service") & mapped_under(vol),
                    "qwen.service back on the old path")
