"""``vacate check`` end to end on real volumes (exit codes, JSON, the people's table), and the
verdict rules on values."""

import io
import json
import os

import pytest
from harness.holders import Holders
from harness.volumes import can_loop_mount, make_volume

from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.decide.verdict import attribute, statuses, verdict
from vacate.observing.model.common import Problem
from vacate.observing.model.conditions import UnitProcess
from vacate.observing.model.inventory import Classification, Item, Stats
from vacate.observing.model.sentence import render
from vacate.observing.model.usage import Consumer, Evidence


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), Env(stdout=out, stderr=err))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def story(request):
    """A small real volume like the story's: a model held by a process, notes nobody uses,
    lost+found."""
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4")
    h = Holders(v.mountpoint)
    try:
        m = v.mountpoint
        os.makedirs(f"{m}/models/qwen")
        with open(f"{m}/models/qwen/model.bin", "wb") as f:
            f.write(os.urandom(64 * 1024))
        with open(f"{m}/ml-env-backup.txt", "w") as f:
            f.write("torch==2.9.0\n")
        yield v, h
    finally:
        h.close()
        v.close()


@pytest.mark.root
def test_in_use_then_safe(story):
    v, h = story
    m = v.mountpoint
    pid = h.mmap_only(f"{m}/models/qwen/model.bin")
    cwd_pid = h.cwd(m)
    rc, out, _ = run_cli("check", "--json", m)
    assert rc == 1
    doc = json.loads(out)
    assert doc["schema"] == "vacate.check/1"
    assert doc["target"]["mountpoint"] == m
    assert doc["verdict"]["safe_to_unmount"] is False
    items = {i["path"]: i for i in doc["items"]}
    model = items[f"{m}/models"]
    for key in ("path", "parent", "kind", "label", "status", "apparent_bytes", "disk_bytes",
                "files", "newest_mtime", "newest_atime", "users"):
        assert key in model
    assert model["status"] == "active"
    proc = next(c for c in doc["consumers"] if c["type"] == "process" and c["pid"] == pid)
    assert proc["id"] in model["users"] and proc["access"] == ["mmap"]
    assert items[f"{m}/ml-env-backup.txt"]["status"] in ("cold", "disposable")
    assert items[f"{m}/ml-env-backup.txt"]["users"] == []
    lf = items[f"{m}/lost+found"]
    assert lf["status"] == ("artifact" if lf["kind"] == "filesystem-artifact" else "cold")
    # the process whose cwd is the mountpoint uses the volume, not an item
    cwd = next(c for c in doc["consumers"] if c["type"] == "process" and c["pid"] == cwd_pid)
    assert cwd["id"] in doc["whole_volume"]
    assert all(cwd["id"] not in i["users"] for i in doc["items"])
    blockers = {b["consumer"]: b for b in doc["verdict"]["blockers"]}
    assert blockers[proc["id"]]["action"] == f"kill -TERM {pid}"
    assert blockers[cwd["id"]]["action"] == f"kill -TERM {cwd_pid}"
    # people's view: the table and the blockers with their next action
    rc, out, _ = run_cli("check", m)
    assert rc == 1
    for word in ("path", "size", "last used", "what it is", "status", "used by",
                 "not safe to unmount", f"kill -TERM {pid}"):
        assert word in out
    h.close()
    rc, out, _ = run_cli("check", "--json", m)
    doc = json.loads(out)
    assert rc == 0, doc["verdict"]
    assert doc["verdict"] == {"safe_to_unmount": True, "blockers": [], "unknowns": []}
    assert {i["status"] for i in doc["items"]} <= {"cold", "disposable", "artifact"}


@pytest.mark.root
def test_no_scan_same_verdict(story):
    v, h = story
    m = v.mountpoint
    h.fd(f"{m}/models/qwen/model.bin")
    h.swapfile(f"{m}/swapfile", "ext4", mb=8)
    rc, out, _ = run_cli("check", "--json", "--no-scan", m)
    doc = json.loads(out)
    assert rc == 1 and doc["scanned"] is False
    ids = {b["consumer"] for b in doc["verdict"]["blockers"]}
    assert f"swap:{m}/swapfile" in ids
    items = {i["path"]: i for i in doc["items"]}
    assert items[f"{m}/swapfile"]["status"] == "active"
    assert items[f"{m}/models"]["status"] == "active"


def test_missing_path_is_a_usage_error(tmp_path):
    rc, out, err = run_cli("check", str(tmp_path / "nope"))
    assert rc == 2 and out == "" and "no such file" in err


# -- rules on values ---------------------------------------------------------------------------
def _item(path, parent=None, kind="directory", recoverable=None):
    return Item("item:" + path, path, parent, True, Stats(),
                Classification(kind, kind, recoverable=recoverable))


def _consumer(cid, ctype, live, paths, **attrs):
    return Consumer(cid, ctype, cid.split(":")[-1], live, tuple(paths),
                    (Evidence("config-line", paths[0] if paths else None, "x:1"),), attrs)


class _T:   # only .path is used by attribute()
    path = "/data"


def test_statuses_strongest_inside_wins():
    items = (
        _item("/data/eagle3"),
        _item("/data/eagle3/draft", "/data/eagle3", "draft-model", "unique"),
        _item("/data/eagle3/cache", "/data/eagle3", "cache", "regenerable"),
        _item("/data/cuda.run", kind="installer", recoverable="re-downloadable"),
        _item("/data/lost+found", kind="filesystem-artifact", recoverable="regenerable"),
        _item("/data/models"),
        _item("/data/notes"),
    )
    unit = _consumer("systemd-unit:sglang-kimi.service", "systemd-unit", False,
                     ["/data/eagle3/draft/config.json"], enabled=False, active=False)
    proc = _consumer("process:7:1", "process", True, ["/data/models/q/w.safetensors"], pid=7)
    users, whole = attribute(_T, items, (unit, proc))
    st = {u.item.path: u.status for u in statuses(items, users, {c.id: c for c in (unit, proc)})}
    assert st == {"/data/eagle3": "referenced", "/data/eagle3/draft": "referenced",
                  "/data/eagle3/cache": "disposable", "/data/cuda.run": "disposable",
                  "/data/lost+found": "artifact", "/data/models": "active", "/data/notes": "cold"}
    assert whole == []


def test_whole_volume_consumers():
    items = (_item("/data/a"),)
    fst = _consumer("fstab:/etc/fstab:3", "fstab", False, ["/data"])
    bind = _consumer("mount:99", "mount", True, ["/data/a"])
    users, whole = attribute(_T, items, (fst, bind))
    assert whole == ["fstab:/etc/fstab:3"] and users["item:/data/a"] == ["mount:99"]


def test_verdict_rules():
    disabled = _consumer("systemd-unit:sglang-kimi.service", "systemd-unit", False,
                         ["/data/eagle3/x"], enabled=False, active=False)
    enabled = _consumer("systemd-unit:sglang-qwen.service", "systemd-unit", False,
                        ["/data/models/q"], enabled=True, active=True)
    proc = _consumer("process:9:5", "process", True, ["/data/models/q/w"], pid=9,
                     unit="sglang-qwen.service", container=None, access=["mmap"])
    fstab = _consumer("fstab:/etc/fstab:4", "fstab", False, ["/data"])
    unreadable = Problem("permission-denied", "x", blocks_verdict=True)
    note = Problem("pid1-unreadable", "y")

    assert verdict((), ()).safe_to_unmount is True
    assert verdict((disabled,), (note,)).safe_to_unmount is True     # referenced only
    v = verdict((), (unreadable,))
    assert v.safe_to_unmount is None and v.unknowns == (unreadable,)
    v = verdict((disabled, enabled, proc, fstab), (unreadable,))
    assert v.safe_to_unmount is False
    actions = {b.consumer: render(b.actions) for b in v.blockers}
    proc_steps = next(b.actions for b in v.blockers if b.consumer == proc.id)
    assert [(a.kind, a.argv) for a in proc_steps] == [
        ("stop-unit", ("systemctl", "stop", "sglang-qwen.service")),
        ("disable-unit", ("systemctl", "disable", "sglang-qwen.service"))]
    assert proc_steps[0].precondition == UnitProcess("sglang-qwen.service", 9, None)
    assert set(actions) == {enabled.id, proc.id, fstab.id}
    assert actions[proc.id] == ("systemctl stop sglang-qwen.service && "
                                "systemctl disable sglang-qwen.service")
    assert actions[enabled.id] == "systemctl disable --now sglang-qwen.service"
    assert "/etc/fstab" in actions[fstab.id] or "x:1" in actions[fstab.id]


def test_a_samba_share_that_is_switched_off_only_references_the_volume():
    served = _consumer("smb-share:scratch", "smb-share", False, ["/data/x"], available=True)
    off = _consumer("smb-share:old", "smb-share", False, ["/data/y"], available=False)
    assert [b.consumer for b in verdict((served, off), ()).blockers] == [served.id]
    assert verdict((off,), ()).safe_to_unmount is True


def test_unit_in_a_private_pid_namespace_is_stopped_through_its_own_manager():
    """systemd as PID 1 of a private namespace (not a container): the host's systemctl would
    reach the wrong manager; the action enters the namespaces through that PID 1 (the box's
    ``pidns`` container), or through the process when no PID 1 was recorded."""
    from vacate.output.next_steps import for_consumer as said

    boxed = _consumer("process:4242:7", "process", True, ["/data/models/q/w"], pid=4242,
                      unit="sglang-qwen.service", access=["fd"],
                      container={"type": "pidns", "name": "4000", "init_pid": 4000},
                      pid_namespace="pid:[4026532999]")
    assert said(boxed) == "nsenter -t 4000 -a systemctl stop sglang-qwen.service"
    unit = _consumer("systemd-unit:pidns:4000:sglang-qwen.service", "systemd-unit", True,
                     ["/data/models/q"], enabled=True, active=True,
                     container={"type": "pidns", "name": "4000", "init_pid": 4000})
    steps = next(b.actions for b in verdict((boxed, unit), ()).blockers
                 if b.consumer == boxed.id)
    assert [(a.kind, a.where.kind, a.where.pid) for a in steps] == [
        ("stop-unit", "pid-namespace", 4000), ("disable-unit", "pid-namespace", 4000)]
    proc = _consumer("process:4242:7", "process", True, ["/data/models/q/w"], pid=4242,
                     unit="sglang-qwen.service", container=None, access=["fd"],
                     pid_namespace="pid:[4026532999]")
    assert said(proc) == "nsenter -t 4242 -a systemctl stop sglang-qwen.service"
    host = _consumer("process:9:5", "process", True, ["/data/models/q/w"], pid=9,
                     unit="sglang-qwen.service", container=None, access=["fd"],
                     pid_namespace=None)
    assert said(host) == "systemctl stop sglang-qwen.service"
    v = verdict((proc,), ())
    assert "pid:[4026532999]" in v.blockers[0].reason


@pytest.mark.root
def test_process_in_a_private_pid_namespace_is_marked():
    """A real process in a pid namespace of its own carries that namespace; ours carry none."""
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    import time

    from vacate.observing.collectors import mounts, procs
    from vacate.observing.host import Host

    v = make_volume("ext4")
    h = Holders(v.mountpoint)
    try:
        work = f"{v.mountpoint}/work"
        os.makedirs(work)
        unshare = h.spawn("pidns", ["unshare", "--pid", "--fork", "sleep", "1d"], cwd=work)
        plain = h.cwd(work)
        target = mounts.resolve_target(v.mountpoint)
        deadline = time.monotonic() + 10
        inner = []
        while not inner and time.monotonic() < deadline:
            found = procs.collect(Host.local(), target).consumers
            inner = [c for c in found if c.attrs.ppid == unshare]   # the forked sleep
        assert inner, "the sleep inside the new pid namespace was not found"
        ns = inner[0].attrs.pid_namespace
        assert ns and ns.startswith("pid:[") and ns != os.readlink("/proc/self/ns/pid")
        # the forked sleep is PID 1 of its namespace: that namespace's container is itself
        sleep = inner[0].attrs.pid
        assert inner[0].attrs.container == {"type": "pidns", "name": str(sleep),
                                               "init_pid": sleep}
        by_pid = {c.attrs.pid: c for c in found}
        assert by_pid[plain].attrs.pid_namespace is None
        assert by_pid[unshare].attrs.pid_namespace is None      # unshare itself stays out
        assert by_pid[plain].attrs.container is None
        assert by_pid[unshare].attrs.container is None
    finally:
        h.close()
        v.close()
