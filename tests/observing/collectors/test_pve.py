"""Proxmox VE: guest config and storage.cfg parsers on real files, and the collector on a temp
/etc/pve tree next to a real loop volume (pct/qm cannot exist here: only files are read)."""

import dataclasses
import os
import shutil

import pytest
from harness.paths import FIXTURES

from vacate.observing.collectors.configured import pve as pve_src
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.collectors.mounts import resolve_target
from vacate.observing.host import Host
from vacate.observing.parsers import pve_config, pve_storage
from vacate.output.next_steps import for_consumer as said

PX = os.path.join(FIXTURES, "proxmox")


def _read(name):
    with open(os.path.join(PX, name)) as f:
        return f.read()


def test_every_real_guest_config_parses():
    confs = [n for n in os.listdir(PX) if n.endswith(".conf")]
    assert len(confs) >= 12
    for n in confs:
        cfg, problems = pve_config.parse(_read(n), n)
        assert problems == (), n
        assert cfg.current.get("rootfs") or cfg.current.get("ostype"), n


def test_mount_points_snapshots_and_encoded_comments():
    cfg, _ = pve_config.parse(_read("off2-lxc_110-zfs-bind-mps-encoded-comments.conf"))
    cur = cfg.current
    assert "uid map: from uid 0" in cur.description and "→" in cur.description
    mps = {ln.key: pve_config.parse_volume(ln.value) for ln in cur.lines
           if ln.key.startswith("mp")}
    assert len(mps) == 12
    assert mps["mp0"].path == "/zfs-hdd/opff" and mps["mp0"].guest_path == "/mnt/opff"
    root = pve_config.parse_volume(cur.get("rootfs"))
    assert (root.storage, root.volname, root.options) == \
        ("zfs-hdd", "subvol-110-disk-0", {"size": "30G"})
    mp0 = pve_config.parse_volume(
        pve_config.parse(_read("off2-lxc_120-zfs-nvme-mp-mountoptions.conf"))[0].current.get("mp0"))
    assert mp0.options["mountoptions"] == "noatime" and mp0.guest_path == "/var/lib/postgresql/"
    cfg, _ = pve_config.parse(_read("pve-container-snapshot-rollback-105.conf"))
    assert [(s.name, s.is_snapshot) for s in cfg.sections] == [(None, False), ("test", True)]
    assert cfg.current.get("unused0") == "preserved:some-disk-1"
    assert cfg.sections[1].get("snaptime") == "1234567890"


def test_storage_cfg_real_files_and_resolution():
    for name in ("pve-docs-storage.cfg", "kilrainebc-storage.cfg", "spongey-storage.cfg",
                 "pve-storage-bwlimit-test-storage.cfg"):
        st, problems = pve_storage.parse(_read(name), name)
        assert st and problems == (), name
    st, _ = pve_storage.parse(_read("pve-docs-storage.cfg"))
    assert st["local-zfs"].props == {"pool": "rpool/data", "sparse": "", "content": "images,rootdir"}
    loc = pve_storage.resolve(st, "local-zfs:subvol-100-disk-0")
    assert (loc.dataset, loc.path) == ("rpool/data/subvol-100-disk-0",
                                       "/rpool/data/subvol-100-disk-0")
    assert pve_storage.resolve(st, "local-zfs:vm-100-disk-0").path == \
        "/dev/zvol/rpool/data/vm-100-disk-0"
    assert pve_storage.resolve(st, "local:100/vm-100-disk-0.qcow2").path == \
        "/var/lib/vz/images/100/vm-100-disk-0.qcow2"
    assert pve_storage.resolve(st, "local:iso/debian.iso").path == \
        "/var/lib/vz/template/iso/debian.iso"
    assert pve_storage.resolve(st, "local-lvm:vm-102-disk-0").path == "/dev/pve/vm-102-disk-0"
    assert pve_storage.resolve(st, "data2:100/vm-100-disk-1.raw").path == \
        "/mnt/data2/pve-storage/images/100/vm-100-disk-1/disk.raw"
    assert pve_storage.resolve(st, "nosuch:1/x.raw") is None
    st, _ = pve_storage.parse(_read("kilrainebc-storage.cfg"))
    assert st["backup"].path == "/mnt/backup" and st["ssd"].props["vgname"] == "pve"


@pytest.fixture
def pve_tree(ext4_volume, tmp_path):
    """/etc/pve with the story's layout: zfspool 'scratch' holding the volume's dataset, a
    directory storage on the volume, real configs that do not use it."""
    vol = ext4_volume.mountpoint
    etc = tmp_path / "etc" / "pve"
    for d in ("lxc", "qemu-server", "nodes/pve1/lxc", "nodes/pve1/qemu-server"):
        (etc / d).mkdir(parents=True)
    (etc / "storage.cfg").write_text(
        _read("pve-docs-storage.cfg")
        + "\nzfspool: scratch\n\tpool scratch\n\tcontent rootdir,images\n\tmountpoint /scratch\n"
        + f"\ndir: onvol\n\tpath {vol}/pve\n\tcontent images,rootdir,iso\n")
    (etc / "lxc" / "129.conf").write_text(
        "arch: amd64\nhostname: ct129\nonboot: 1\nostype: debian\n"
        "rootfs: local-zfs:subvol-129-disk-0,size=8G\n"
        "mp0: scratch:subvol-129-disk-0,mp=/data,size=0T\n"
        f"mp1: {vol}/eagle3,mp=/eagle3\n"
        "lxc.mount.entry: /dev/net dev/net none bind,create=dir\n")
    (etc / "lxc" / "130.conf").write_text(     # only a snapshot still names the volume
        "arch: amd64\nhostname: ct130\nparent: before\nrootfs: local-zfs:subvol-130-disk-0\n"
        "\n[before]\n#snapshot%20before%20moving\narch: amd64\nhostname: ct130\n"
        "mp0: scratch:subvol-129-disk-0,mp=/old\nsnaptime: 1692931051\n")
    (etc / "lxc" / "131.conf").write_text(
        "hostname: ct131\nrootfs: local-zfs:subvol-131-disk-0\n"
        f"lxc.mount.entry: {vol}/models models none bind,create=dir 0 0\n"
        "unused0: onvol:131/vm-131-disk-1.raw\n")
    (etc / "lxc" / "132.conf").write_text("hostname: ct132\nrootfs: ghost:subvol-132-disk-0\n")
    (etc / "lxc" / "133.conf").write_text(     # only a pending change adds it
        "hostname: ct133\nrootfs: local-zfs:subvol-133-disk-0\n\n[pve:pending]\n"
        f"mp0: {vol}/new,mp=/new\n")
    (etc / "nodes/pve1/qemu-server" / "200.conf").write_text(
        "name: gpu-vm\nscsi0: onvol:200/vm-200-disk-0.qcow2,size=32G\n"
        "ide2: onvol:iso/debian-12.iso,media=cdrom\nscsi1: local-lvm:vm-200-disk-1,size=8G\n")
    real = ("off2-lxc_110-zfs-bind-mps-encoded-comments.conf",
            "charlzyx-lxc-203-bind-mp-idmap.conf", "pve-container-snapshot-rollback-105.conf")
    for i, n in enumerate(real):
        shutil.copy(os.path.join(PX, n), etc / "nodes/pve1/lxc" / f"{300 + i}.conf")
    # the guest's pid file, as qemu-server writes it: this process stands in as the VM
    (tmp_path / "run" / "qemu-server").mkdir(parents=True)
    (tmp_path / "run" / "qemu-server" / "200.pid").write_text(f"{os.getpid()}\n")
    (tmp_path / "proc" / str(os.getpid())).mkdir(parents=True)
    target = dataclasses.replace(resolve_target(vol), zfs_dataset="scratch/subvol-129-disk-0")
    return Host.under(str(tmp_path)), target


@pytest.mark.root
def test_collect_guests_using_the_volume(pve_tree):
    host, target = pve_tree
    vol = target.path
    consumers, problems = pve_src.collect(host, target, host_view(target))
    by = {c.id: c for c in consumers}
    assert set(by) == {"pve-container:129", "pve-container:130", "pve-container:131",
                       "pve-container:133", "pve-vm:200", "pve-storage:onvol"}
    pend = by["pve-container:133"]
    assert pend.attrs.pending_keys == ["mp0"] and not pend.attrs.in_current_config
    assert said(pend).startswith("pct set 133 --revert mp0")
    assert "[pve:pending]" in pend.evidence[0].detail
    ct = by["pve-container:129"]
    assert ct.type == "pve-container" and ct.name == "129 (ct129)" and ct.live is False
    assert ct.attrs.relations == ["mount-point"]
    assert {e.source for e in ct.evidence} == {"/etc/pve/lxc/129.conf:6", "/etc/pve/lxc/129.conf:7"}
    assert ct.attrs.onboot is True and ct.attrs.keys == ["mp0", "mp1"]
    assert "pct set 129 --delete mp0,mp1" in said(ct)
    # a container is not stopped for its mount points: the restart that applies the pending
    # deletion is offered, a person's to choose (CT 129 has no init running here: its state
    # is unknown, so it may run)
    assert ct.attrs.running is not False
    assert "shutdown" not in said(ct)
    assert "then when the container may restart, pct reboot 129" in said(ct)
    assert set(ct.paths) == {vol, f"{vol}/eagle3"}
    assert ct.attrs.in_current_config and ct.attrs.snapshots == []
    snap = by["pve-container:130"]
    assert not snap.attrs.in_current_config and snap.attrs.snapshots == ["before"]
    assert "snapshot [before]" in snap.evidence[0].detail
    assert said(snap).startswith("pct delsnapshot 130 before")
    assert snap.attrs.onboot is False
    c131 = by["pve-container:131"]
    assert set(c131.attrs.relations) == {"bind-source", "unused-disk"}
    assert f"{vol}/pve/images/131/vm-131-disk-1.raw" in c131.paths
    vm = by["pve-vm:200"]
    assert vm.type == "pve-vm" and vm.attrs.node == "pve1"
    assert vm.attrs.running is True and vm.attrs.pid == os.getpid()
    assert set(vm.paths) == {f"{vol}/pve/images/200/vm-200-disk-0.qcow2",
                             f"{vol}/pve/template/iso/debian-12.iso"}
    assert by["pve-storage:onvol"].type == "config-file"
    assert "pvesm remove onvol" in said(by["pve-storage:onvol"])
    assert said(vm).startswith("qm shutdown 200, then qm set 200 --delete scsi0,ide2")
    # storages missing from storage.cfg are reported (132's "ghost"; the real configs'
    # zfs-hdd and preserved), without blocking the verdict
    assert {p.path for p in problems} == {"/etc/pve/lxc/132.conf:2",
                                          "/etc/pve/nodes/pve1/lxc/300.conf:30",
                                          "/etc/pve/nodes/pve1/lxc/302.conf:14"}
    assert {p.code for p in problems} == {"unknown-storage"}
    assert not any(p.blocks_verdict for p in problems)


@pytest.mark.root
def test_real_configs_alone_do_not_use_the_volume(ext4_volume, tmp_path):
    etc = tmp_path / "etc" / "pve"
    (etc / "lxc").mkdir(parents=True)
    shutil.copy(os.path.join(PX, "spongey-storage.cfg"), etc / "storage.cfg")
    for i, n in enumerate(sorted(x for x in os.listdir(PX) if x.startswith("spongey-lxc"))):
        shutil.copy(os.path.join(PX, n), etc / "lxc" / f"{100 + i}.conf")
    target = resolve_target(ext4_volume.mountpoint)
    consumers, problems = pve_src.collect(Host.under(str(tmp_path)), target, host_view(target))
    assert consumers == () and problems == ()
