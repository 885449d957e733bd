"""``vacate plan --free-volume`` of a Proxmox container's volume, then ``vacate apply``: a real
ZFS dataset (zfs-fuse, tests/harness/zfs_pool.py) on zfspool storage ``scratch``, mounted
as ``mp0`` of CT 129 (``scratch:subvol-129-disk-0``); ``pct`` is the stand-in with the real
command line and pve-container's rules (tests/harness/pve.py, from
tests/fixtures/proxmox/pve-free-rules.txt), its freeing a real ``zfs destroy -r``.

The container is the lightest real thing the stand-in needs: a process as its init (``pct
status`` asks whether it lives, ``pct shutdown`` ends it); the volume is planned from the
host at the dataset's mountpoint, where the container's config names it (``onboot: 1``: it
would mount it again at the next boot, so its mount point is deleted). The full container
of the ``--ct`` tests (tests/harness/ct129.py) is not used: its volume is a loop-mounted
ext4 bind mount point, not a storage volume.

The lifecycle: with the container running, mp0's deletion stays pending and the freeing step
fails naming the restart (``pct reboot 129``), nothing destroyed; once the operator stops it
(the pending deletion applied: ``unused0``), a rerun frees it. Each blocker is named and
nothing is destroyed; kill -9 at each step of the freeing, then a rerun, ends as an
uninterrupted run."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time

import pytest
from harness import pve
from harness.retire import cli, kill_during

from vacate.observing.model.journal import path_for, read_records

pytestmark = [pytest.mark.root, pytest.mark.slow]

VOLUME = "scratch:subvol-129-disk-0"
CONF = """arch: amd64
hostname: sglang
memory: 262144
mp0: scratch:subvol-129-disk-0,mp=/data{mp_opts}
onboot: 1
ostype: debian
rootfs: local:129/vm-129-disk-0.raw,size=8G
unprivileged: 1
{extra}"""
STORAGE = """dir: local
\tpath {vz}
\tcontent rootdir,images

zfspool: scratch
\tpool {pool}
\tcontent rootdir,images
\tmountpoint {mnt}
"""
SNAPSHOT = """
[before-upgrade]
arch: amd64
hostname: sglang
mp0: scratch:subvol-129-disk-0,mp=/data
ostype: debian
rootfs: local:129/vm-129-disk-0.raw,size=8G
snaptime: 1717000000
"""


def _init() -> int:
    """A process standing for the container's init, not our child (its end is reaped)."""
    r = subprocess.run(["setsid", "sh", "-c", "sleep 100000 >/dev/null 2>&1 & echo $!"],
                       capture_output=True, text=True, check=True)
    return int(r.stdout.strip())


@contextlib.contextmanager
def ct129_on_zfs(pool, tmp_path, monkeypatch, *, name="subvol-129-disk-0", mp_opts="",
                 extra="", replication=None):
    why = pve.why_not()
    if why:
        pytest.skip(why)
    mnt = pool.create(name)
    os.makedirs(f"{mnt}/eagle3/draft-ckpt")
    with open(f"{mnt}/eagle3/draft-ckpt/weights.bin", "wb") as f:
        f.write(os.urandom(1 << 16))
    with open(f"{mnt}/ml-env-backup-cuda128.txt", "w") as f:
        f.write("torch==2.8.0\n")
    host = pve.make(str(tmp_path))
    pid = None
    try:
        host.write_storage(STORAGE.format(vz=tmp_path / "vz", pool=pool.name,
                                          mnt=pool.mountpoint))
        conf = host.write_ct(129, CONF.format(mp_opts=mp_opts, extra=extra).replace(
            "subvol-129-disk-0", name))
        if replication is not None:
            with open(os.path.join(host.etc, "replication.cfg"), "w") as f:
                f.write(replication)
        pid = _init()
        host.running(129, pid)
        monkeypatch.setenv("PATH", host.environ()["PATH"])
        yield host, conf, f"{pool.name}/{name}", mnt
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        subprocess.run(["chattr", "-i", mnt], capture_output=True, check=False)
        host.close()


def _plan(tmp_path, mnt: str, *extra: str) -> tuple[str, dict]:
    dest = tmp_path / "dest"
    dest.mkdir(exist_ok=True)
    plan = str(tmp_path / "p.plan")
    rc, out, err = cli("plan", mnt, "--archive-to", str(dest), "--free-volume", "-o", plan,
                       "--json", "--grace", "1", *extra)
    assert rc in (0, 4), err                      # 4: blocked, named
    return plan, json.loads(out)


def _apply(plan: str) -> tuple[int, dict]:
    rc, out, err = cli("apply", plan, "--yes", "--json")
    assert out, err
    return rc, json.loads(out)


def _statuses(doc: dict) -> dict:
    return {s["id"].split("-", 1)[1]: s["status"] for s in doc["done"]["steps"]}


def _exists(ds: str) -> bool:
    return subprocess.run(["zfs", "list", "-H", ds], capture_output=True,
                          check=False).returncode == 0


def _config(conf: str) -> str:
    with open(conf) as f:
        return f.read()


def test_running_ct_fails_naming_the_restart_then_a_rerun_after_it_frees_the_volume(
        pool, tmp_path, monkeypatch):
    with ct129_on_zfs(pool, tmp_path, monkeypatch) as (host, conf, ds, mnt):
        plan, doc = _plan(tmp_path, mnt)
        assert doc["blocked"] == [], doc["blocked"]
        kinds = [s["kind"] for s in doc["steps"]]
        assert kinds[-1] == "free-guest-volume", kinds
        assert "destroy-dataset" not in kinds            # pct frees it: one freeing, not two
        assert kinds.index("edit-config") < kinds.index("free-guest-volume")
        free = doc["steps"][-1]
        assert "pct reboot 129" in free["summary"]
        rc, got = _apply(plan)
        st = _statuses(got)
        assert st.get("free-guest-volume") == "failed", got["done"]["steps"]
        said = next(s["detail"] for s in got["done"]["steps"]
                    if s["kind"] == "free-guest-volume")
        assert ("CT 129 must restart for the pending removal of mp0 to take effect "
                "(pct reboot 129); then rerun vacate apply") in said, said
        assert _exists(ds)
        text = _config(conf)
        assert "delete: mp0" in text and "mp0: " in text and "unused0" not in text, text
        calls = host.calls()
        assert not any(c.startswith(("shutdown", "stop", "reboot", "start")) for c in calls)
        _rc, report, _err = cli("report", plan)
        assert "pct reboot 129" in report, report[-3000:]
        # the operator restarts it (here: stops it; the pending deletion applied as it stops)
        r = subprocess.run(["pct", "shutdown", "129"], capture_output=True, text=True,
                           check=False)
        assert r.returncode == 0, r.stderr
        text = _config(conf)
        assert f"unused0: {VOLUME}" in text and "mp0:" not in text, text
        assert "[pve:pending]" not in text, text
        rc, got = _apply(plan)
        assert rc == 0, [(s["id"], s["status"], s["detail"][:200]) for s in got["done"]["steps"]]
        st = _statuses(got)
        assert st["free-guest-volume"] == "ok", st
        assert not _exists(ds)
        assert "unused0" not in _config(conf)
        assert "set 129 --delete unused0" in host.calls()
        rc, again = _apply(plan)                    # twice is once
        assert rc == 0 and not _exists(ds), [(s["id"], s["status"], s["detail"][:200])
                                             for s in again["done"]["steps"]]


def _blocked(pool, tmp_path, monkeypatch, **kw) -> tuple[list[str], str, str]:
    with ct129_on_zfs(pool, tmp_path, monkeypatch, **kw) as (host, conf, ds, mnt):
        plan, doc = _plan(tmp_path, mnt)
        assert doc["blocked"]
        rc, _out, _err = cli("apply", plan, "--yes")
        assert rc != 0                              # a blocked plan is not applied
        assert _exists(ds)
        assert "--delete unused" not in " ".join(host.calls())
        return doc["blocked"], conf, ds


@pytest.mark.parametrize("kw,named", [
    ({"name": "subvol-130-disk-0"}, "is owned by guest 130, not CT 129"),
    ({"mp_opts": ",backup=0"}, "is marked backup=0"),
    ({"replication": "local: 129-0\n\ttarget pve2\n\tschedule */15\n"},
     "CT 129 is replicated (pvesr job 129-0"),
    ({"extra": SNAPSHOT}, "is named by snapshot before-upgrade of CT 129"),
])
def test_each_blocker_is_named_and_nothing_is_destroyed(pool, tmp_path, monkeypatch, kw,
                                                        named):
    blocked, _conf, _ds = _blocked(pool, tmp_path, monkeypatch, **kw)
    assert any(named in b for b in blocked), blocked


def _end(conf: str, ds: str, plan: str) -> dict:
    return {"exists": _exists(ds), "config": _config(conf),
            "free": [r["status"] for r in read_records(path_for(plan))
                     if r.get("event") == "outcome" and "free-guest-volume" in r["step"]][-1]}


# what an uninterrupted run leaves: the container's config without mp0 (nor unused0), as
# pve-container writes it, the dataset destroyed, the freeing step's last outcome ok
UNINTERRUPTED = {"exists": False, "config": CONF.format(mp_opts="", extra="").replace(
    "mp0: scratch:subvol-129-disk-0,mp=/data\n", ""), "free": "ok"}


@pytest.mark.parametrize("at", ["mp-intent", "intent", "after-destroy"])
def test_kill_9_during_the_freeing_then_a_rerun_ends_as_an_uninterrupted_run(
        pool, tmp_path, monkeypatch, at):
    """Killed at the intent of mp0's deletion (then the restart, as in the lifecycle), at
    the freeing step's intent (pct, its child, goes on as it would after a kill), or pct
    killed between its ``zfs destroy`` and its config write (the dataset gone, ``unused0``
    still in the config)."""
    with ct129_on_zfs(pool, tmp_path, monkeypatch) as (host, conf, ds, mnt):
        plan, doc = _plan(tmp_path, mnt)
        kinds = [s["kind"] for s in doc["steps"]]
        if at == "mp-intent":
            assert kill_during(plan, intents_seen=kinds.index("edit-config") + 1)
            rc, got = _apply(plan)
            assert _statuses(got).get("free-guest-volume") == "failed", [
                (s["id"], s["status"], s["detail"][:400]) for s in got["done"]["steps"]]
            subprocess.run(["pct", "shutdown", "129"], check=True)
        else:
            subprocess.run(["pct", "set", "129", "--delete", "mp0"], check=True)
            subprocess.run(["pct", "shutdown", "129"], check=True)     # unused0 now
        if at == "intent":
            open(os.path.join(host.state, "slow-free"), "w").close()
            assert kill_during(plan, intents_seen=kinds.index("free-guest-volume") + 1)
            time.sleep(2)
        elif at == "after-destroy":
            open(os.path.join(host.state, "die-after-free"), "w").close()
            rc, got = _apply(plan)
            assert _statuses(got)["free-guest-volume"] == "failed", got
            assert not _exists(ds) and f"unused0: {VOLUME}" in _config(conf)
        rc, got = _apply(plan)
        assert rc == 0, got
        end = _end(conf, ds, plan)
        if end["free"] == "skipped":           # the orphaned pct finished the freeing
            end["free"] = "ok"
        assert end == UNINTERRUPTED
