"""`vacate check` end to end with real LXC containers: a container configuration is a user of
the volume, with its state, and a running container's own fstab is audited through its root."""

import os

import pytest
from harness.observed import check_both_ways


@pytest.fixture
def made():
    from harness.lxc_box import why_not
    if why := why_not():
        pytest.skip(why)
    things = []
    yield things
    for t in things:
        t.close()


def _check(path):
    """`vacate check --json --no-scan PATH`, asserting that the same check decided from a
    saved observation gives the same document."""
    return check_both_ways(path, "--no-scan", timeout=120)


@pytest.mark.root
@pytest.mark.slow
def test_check_reports_lxc_configs_and_fstab_inside_a_running_container(made):
    from harness.lxc_box import make_box
    from harness.volumes import make_volume

    vol = make_volume("ext4")
    made.append(vol)
    mnt = vol.mountpoint
    os.makedirs(f"{mnt}/images")
    os.makedirs(f"{mnt}/models")
    # stopped, but starts with the host: a blocker although nothing runs
    auto = make_box(extra=[f"lxc.mount.entry = {mnt}/models data none bind,create=dir 0 0",
                           "lxc.start.auto = 1"])
    made.insert(0, auto)
    # stopped and not autostarted: only a reference
    idle = make_box(extra=[f"lxc.mount.entry = {mnt}/images data none bind,create=dir 0 0"])
    made.insert(0, idle)
    # running, the volume at /data; its own fstab names a file on it as /data/...
    run = make_box(extra=[f"lxc.mount.entry = {mnt} data none bind,create=dir 0 0"])
    made.insert(0, run)
    with open(f"{run.rootfs}/etc/fstab", "a") as f:
        f.write("/data/images/disk.img /mnt/img ext4 loop,noauto 0 0\n")
    run.start()

    rc, doc = _check(mnt)
    assert rc == 1 and doc["verdict"]["safe_to_unmount"] is False
    consumers = {c["id"]: c for c in doc["consumers"]}
    blockers = {b["consumer"]: b for b in doc["verdict"]["blockers"]}
    a = consumers[f"lxc-container:{auto.name}"]
    assert a["type"] == "lxc-container" and a["running"] is False and a["autostart"] is True
    assert f"lxc-container:{auto.name}" in blockers
    i = consumers[f"lxc-container:{idle.name}"]
    assert i["running"] is False and i["paths"] == [f"{mnt}/images"]
    assert f"lxc-container:{idle.name}" not in blockers
    r = consumers[f"lxc-container:{run.name}"]
    assert r["running"] is True and r["pid"] == run.pid()
    assert blockers[f"lxc-container:{run.name}"]["action"].startswith(f"lxc-stop -n {run.name}")
    inner = consumers[f"fstab:lxc:{run.name}:/etc/fstab:2"]
    assert inner["type"] == "fstab" and inner["paths"] == [f"{mnt}/images/disk.img"]
    items = {it["path"]: it for it in doc["items"]}
    assert items[f"{mnt}/models"]["status"] in ("active", "referenced")
    assert f"lxc-container:{auto.name}" in items[f"{mnt}/models"]["users"]
