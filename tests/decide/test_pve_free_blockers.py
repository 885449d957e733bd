"""``--free-volume`` on Proxmox, the pure parts: who owns a volume (the storage's
``parse_volname``, on the real configs' volume ids), pvesr jobs, and each blocker the plan
names from a container's facts (tests/fixtures/proxmox/pve-free-rules.txt)."""

from __future__ import annotations

import os
from types import SimpleNamespace

from harness.paths import FIXTURES

from vacate.decide.pve_free import blockers, free_steps
from vacate.observing.model.dataset import DatasetFacts, ZfsSnapshot
from vacate.observing.model.usage import Consumer
from vacate.observing.parsers import pve_config, pve_replication, pve_storage

PX = os.path.join(FIXTURES, "proxmox")
DS = "scratch/subvol-129-disk-0"


def test_the_owner_is_the_vmid_the_real_configs_volume_names_carry():
    seen = {}
    for n in sorted(os.listdir(PX)):
        if not n.endswith(".conf"):
            continue
        with open(os.path.join(PX, n)) as f:
            cfg, _ = pve_config.parse(f.read(), n)
        root = pve_config.parse_volume(cfg.current.get("rootfs") or "")
        if root.volname:
            seen[root.volname] = pve_storage.owner(root.volname)
    assert seen["vm-102-disk-0"] == 102 and seen["subvol-110-disk-0"] == 110
    assert seen["107/vm-107-disk-1.raw"] == 107 and seen["555/base-555-disk-0.raw"] == 555
    # pve-container's own test configs name a mock storage's volume that carries no vmid
    assert {k for k, v in seen.items() if v is None} == {"snapshotable-disk-1"}, seen
    assert pve_storage.owner("base-100-disk-0/subvol-101-disk-0") == 101   # a linked clone
    assert pve_storage.owner("iso/debian.iso") is None


def test_replication_jobs_by_guest():
    # the section header pve-guest-common's ReplicationConfig parses: TYPE: GUEST-JOBNUM
    jobs, problems = pve_replication.parse(
        "local: 129-0\n\ttarget pve2\n\tschedule */15\n\n# a comment\nlocal: 130-1\n"
        "\ttarget pve3\nnot a header\n", "replication.cfg")
    assert [(j.id, j.guest, j.props.get("target")) for j in jobs] == \
        [("129-0", 129, "pve2"), ("130-1", 130, "pve3")]
    assert pve_replication.jobs_of(jobs, 129) == ["129-0"]
    assert [p.path for p in problems] == ["replication.cfg:8"]


def _obs(dataset=None, **attrs):
    facts = {"volume": "scratch:subvol-129-disk-0", "storage": "scratch",
             "storage_type": "zfspool", "dataset": DS, "owner": 129,
             **attrs.pop("facts", {})}
    a = {"vmid": 129, "config": "/etc/pve/lxc/129.conf", "keys": ["mp0"],
         "pending_keys": [], "snapshots": [], "volumes": {"mp0": facts}, **attrs}
    c = Consumer("pve-container:129", "pve-container", "129", False, ("/data",), (), a)
    return SimpleNamespace(consumers=(c,), target=SimpleNamespace(zfs_dataset=DS),
                           dataset=dataset)


def _item(action="archive", status="cold", path="/data/x", files=1, exclude=()):
    return SimpleNamespace(path=path, action=action, status=status, files=files,
                           exclude=exclude)


def _blocked(obs, items=(), fmt="tar", to="/cold", pool=None):
    return blockers(obs, tuple(items) or (_item(),), True, fmt, to, pool)


def test_nothing_blocks_the_story_and_the_step_names_the_restart():
    assert _blocked(_obs()) == []
    (params, summary, _post), = free_steps(_obs(), True)
    assert (params.KIND, params.vmid, params.key, params.dataset) == \
        ("free-guest-volume", "129", "mp0", DS)
    assert "pct reboot 129" in summary and "vacate does not restart it" in summary
    assert free_steps(_obs(), False) == [] and blockers(_obs(), (), False, "tar", None) == []


def test_each_blocker_is_named():
    cases = [
        (_obs(facts={"owner": 130}), "owned by guest 130, not CT 129"),
        (_obs(facts={"backup": False}), "marked backup=0"),
        (_obs(replication=["129-0"]), "CT 129 is replicated (pvesr job 129-0"),
        (_obs(snapshots=["before-upgrade"]), "named by snapshot before-upgrade"),
        (_obs(pending_keys=["mp1"]), "named by the pending changes of CT 129 (mp1)"),
        (_obs(protection=True), "CT 129 has protection enabled"),
        (_obs(facts={"storage_type": "dir", "dataset": None}),
         "freeing it is planned only on zfspool storage"),
    ]
    for obs, named in cases:
        got = _blocked(obs)
        assert any(named in b for b in got), (named, got)


def test_a_kept_item_outside_a_verified_archive_blocks_unless_the_dataset_is_archived():
    kept = [_item("keep")]
    assert any("/data/x" in b for b in _blocked(_obs(), kept))
    assert _blocked(_obs(), kept, fmt="zfs", pool="tank") == []
    assert _blocked(_obs(), [_item("keep", "artifact")]) == []
    # a kept directory whose files are all in a deleted sub-item keeps nothing
    assert _blocked(_obs(), [_item("keep", files=2, exclude=("/data/x/m",)),
                             _item("delete", path="/data/x/m", files=2)]) == []
    assert any("--archive-to" in b for b in _blocked(_obs(), to=None))


def test_the_host_datasets_held_or_cloned_snapshots_block_as_on_plain_zfs():
    """pct's freeing runs zfs destroy -r: a held or cloned snapshot of the host's dataset
    (looked at on the host) is named before anything is applied, as --free-volume names it
    on plain ZFS; an archive of the dataset only parsed allows no freeing either."""
    facts = DatasetFacts(DS, (ZfsSnapshot("daily", holds=1), ZfsSnapshot("weekly", 0,
                                                                         ("tank/c",))),
                         mounted=True)
    got = _blocked(_obs(dataset=facts))
    assert any(f"{DS}@daily is held" in b for b in got), got
    assert any(f"{DS}@weekly has clones" in b and "tank/c" in b for b in got), got
    clean = DatasetFacts(DS, (ZfsSnapshot("daily", holds=0),), mounted=True)
    assert _blocked(_obs(dataset=clean)) == []
    assert any("--verify-pool" in b for b in _blocked(_obs(dataset=clean), fmt="zfs"))
    assert _blocked(_obs(dataset=clean), fmt="zfs", pool="tank") == []
