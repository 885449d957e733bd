"""Proxmox and LXC configs against a real ZFS dataset (zfs-fuse): volume ids resolve through
storage.cfg to the dataset under audit, as in the story's ``scratch:subvol-129-disk-0``."""

import pytest

from vacate.observing.collectors.configured import fstab as fstab_src
from vacate.observing.collectors.configured import lxc as lxc_src
from vacate.observing.collectors.configured import pve as pve_src
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.collectors.mounts import resolve_target
from vacate.observing.host import Host


@pytest.mark.slow
@pytest.mark.root
def test_volume_ids_resolve_to_the_dataset_under_audit(pool, tmp_path):
    mnt = pool.create("subvol-129-disk-0")
    pool.create("subvol-131-disk-0")
    ds = f"{pool.name}/subvol-129-disk-0"
    etc = tmp_path / "etc"
    (etc / "pve/lxc").mkdir(parents=True)
    (etc / "pve/qemu-server").mkdir(parents=True)
    (etc / "pve/storage.cfg").write_text(
        f"dir: local\n\tpath /var/lib/vz\n\tcontent iso\n\n"
        f"zfspool: scratch\n\tpool {pool.name}\n\tcontent rootdir,images\n"
        f"\tmountpoint {pool.mountpoint}\n")
    (etc / "pve/lxc/129.conf").write_text(
        "hostname: ct129\nonboot: 1\nrootfs: local:129/vm-129-disk-0.raw,size=8G\n"
        "mp0: scratch:subvol-129-disk-0,mp=/data,size=0T\n")
    (etc / "pve/lxc/131.conf").write_text("hostname: ct131\n"
                                          "rootfs: scratch:subvol-131-disk-0,size=8G\n")
    (tmp_path / "var/lib/lxc/zct").mkdir(parents=True)
    (tmp_path / "var/lib/lxc/zct/config").write_text(f"lxc.rootfs.path = zfs:{ds}\n")
    etc.joinpath("fstab").write_text(f"{ds} /data zfs defaults 0 0\n"
                                     f"{pool.name}/subvol-131-disk-0 /other zfs defaults 0 0\n")
    target = resolve_target(mnt)
    assert target.zfs_dataset == ds          # what the mount layer sees on real ZFS
    host = Host.under(str(tmp_path))
    view = host_view(target)

    consumers, problems = pve_src.collect(host, target, view)
    assert problems == ()
    assert [c.id for c in consumers] == ["pve-container:129"]
    ct = consumers[0]
    assert ct.paths == (mnt,) and ct.attrs.keys == ["mp0"] and ct.attrs.onboot is True
    assert f"is ZFS dataset {ds}" in ct.evidence[0].detail

    consumers, _ = lxc_src.collect(host, target, view)
    assert [(c.id, c.attrs.relations) for c in consumers] == [("lxc-container:zct", ["rootfs"])]

    consumers, _ = fstab_src.collect(host, target, view)
    assert [(c.attrs.line, c.attrs.relations) for c in consumers] == [(1, ["mounts-volume"])]
