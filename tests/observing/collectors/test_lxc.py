"""LXC: the config parser on real files, the collector on a temp host tree, and real LXC
containers (one binding the volume with lxc.mount.entry, one whose rootfs is on it)."""

import os

import pytest
from harness.paths import FIXTURES

from vacate.observing.collectors.configured import lxc as lxc_src
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.collectors.mounts import resolve_target
from vacate.observing.host import Host
from vacate.observing.parsers import fstab, lxc_config
from vacate.output.next_steps import for_consumer as said


def _fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, "lxc", name)) as f:
        return f.read()


def test_parse_real_lxc_configs():
    lines, problems = lxc_config.parse(_fixture("lxc-templates-common.conf.in"))
    assert problems == ()
    entries = [ln for ln in lines if ln.key == "lxc.mount.entry"]
    assert [fstab.parse_line(e.value).target for e in entries] == ["sys/fs/fuse/connections"]
    assert [ln.value for ln in lines if ln.key == "lxc.include"] == \
        ["@LXCTEMPLATECONFIG@/common.conf.d/"]
    lines, problems = lxc_config.parse(_fixture("lxc-test-symlink-mount-entries.conf"))
    assert problems == ()
    targets = [fstab.parse_line(ln.value).target for ln in lines]
    assert targets == ["opt/xxx/dir", "opt/xxx/file", "opt/xxx/file2",
                       "/var/lib/lxc/symtest1/rootfs/opt/xxx/dir2"]
    for name in ("lxc-doc-lxc.container.conf", "lxc-doc-examples-lxc-complex.conf.in"):
        lines, problems = lxc_config.parse(_fixture(name))
        assert lines and problems == (), name


def test_parse_proxmox_style_raw_keys_and_legacy_names():
    with open(os.path.join(FIXTURES, "proxmox", "charlzyx-lxc-103-device-mountpoint.conf")) as f:
        lines, _ = lxc_config.parse("\n".join(ln for ln in f.read().splitlines()
                                              if ln.startswith("lxc.")))
    assert [ln.key for ln in lines].count("lxc.mount.entry") == 2
    assert lines[-1].value.startswith("/dev/dri/renderD128 dev/dri/renderD128")
    (old,), _ = lxc_config.parse("lxc.rootfs = /srv/ct/rootfs\n")
    assert old.key == "lxc.rootfs.path"


def test_parse_rootfs_backends():
    assert lxc_config.parse_rootfs("dir:/a").paths == ("/a",)
    assert lxc_config.parse_rootfs("/a").backend == "dir"
    assert lxc_config.parse_rootfs("overlayfs:/lower:/upper").paths == ("/lower", "/upper")
    assert lxc_config.parse_rootfs("zfs:tank/lxc/c1").dataset == "tank/lxc/c1"
    assert lxc_config.parse_rootfs("loop:/srv/c1.img") == lxc_config.Rootfs("loop", ("/srv/c1.img",))


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.root
def test_collect_from_host_tree(ext4_volume, tmp_path):
    vol = ext4_volume.mountpoint
    tree = tmp_path
    # a custom lxcpath, as /etc/lxc/lxc.conf sets it
    _write(tree / "etc/lxc/lxc.conf", "lxc.lxcpath = /srv/lxc\n")
    _write(tree / "etc/lxc/default.conf", f"lxc.mount.entry = {vol}/shared srv/shared none bind 0 0\n")
    # binds: whole volume, a subdirectory via an include chain, and a mount fstab on the volume
    _write(tree / "srv/lxc/web/config",
           "lxc.rootfs.path = dir:/srv/lxc/web/rootfs\n"
           f"lxc.mount.entry = {vol} data none bind,create=dir 0 0\n"
           "lxc.start.auto = 1\n"
           "lxc.include = /srv/lxc/web/extra.d\n"
           "lxc.mount.entry = /srv/elsewhere mnt/x none bind 0 0\n")
    _write(tree / "srv/lxc/web/extra.d/10-mp.conf",
           "lxc.include = /srv/lxc/web/more.conf\n")
    _write(tree / "srv/lxc/web/more.conf",
           f"lxc.mount.entry = {vol}/images/mp0 mnt/mp0 none bind,create=dir 0 0\n"
           f"lxc.hook.pre-start = {vol}/hooks/pre.sh\n")
    # rootfs on the volume (overlay upper dir), with a relative mount point inside it
    _write(tree / "srv/lxc/ovl/config",
           f"lxc.rootfs.path = overlayfs:/var/lib/base:{vol}/ovl/delta0\n"
           "lxc.mount.fstab = /srv/lxc/ovl/fstab\n")
    _write(tree / "srv/lxc/ovl/fstab", "tmpfs run/x tmpfs size=1m 0 0\n"
                                        f"{vol}/logs var/log none bind 0 0\n")
    # not using the volume; and an old-style key
    _write(tree / "srv/lxc/quiet/config", "lxc.rootfs.path = dir:/srv/lxc/quiet/rootfs\n"
                                           f"# lxc.mount.entry = {vol} data none bind 0 0\n")
    _write(tree / "srv/lxc/old/config", f"lxc.rootfs = {vol}/old-rootfs\n")
    # the running one, as its cgroup shows
    _write(tree / "sys/fs/cgroup/lxc.payload.web/cgroup.procs", "4242\n")
    (tree / "sys/fs/cgroup/lxc.payload.ovl").mkdir(parents=True)
    host = Host.under(str(tree))
    target = resolve_target(vol)
    consumers, problems = lxc_src.collect(host, target, host_view(target))
    assert problems == ()
    by = {c.id: c for c in consumers}
    assert set(by) == {"lxc-container:web", "lxc-container:ovl", "lxc-container:old",
                       "config-file:/etc/lxc/default.conf"}
    web = by["lxc-container:web"]
    assert web.type == "lxc-container" and web.live is False
    assert web.attrs.running is True and web.attrs.state_from == "cgroup"
    assert set(web.paths) == {target.path, f"{vol}/images/mp0", f"{vol}/hooks/pre.sh"}
    sources = {e.source for e in web.evidence}
    assert sources == {"/srv/lxc/web/config:2", "/srv/lxc/web/more.conf:1",
                       "/srv/lxc/web/more.conf:2"}
    assert web.attrs.autostart is True
    assert said(web) == ("lxc-stop -P /srv/lxc -n web, then remove or change the "
                                   "entry at /srv/lxc/web/config:2; set lxc.start.auto = 0 "
                                   "meanwhile")
    ovl = by["lxc-container:ovl"]
    assert ovl.attrs.running is False
    assert "rootfs" in ovl.attrs.relations
    # the bind from the volume in the mount fstab; the tmpfs mount point inside the rootfs
    # is on the volume too, but the rootfs line already says so
    assert {e.source for e in ovl.evidence} == {"/srv/lxc/ovl/config:1", "/srv/lxc/ovl/fstab:2"}
    assert set(ovl.paths) == {f"{vol}/ovl/delta0", f"{vol}/logs"}
    assert by["lxc-container:old"].attrs.relations == ["rootfs"]
    assert by["lxc-container:old"].attrs.autostart is False
    assert "lxc-destroy -P /srv/lxc -n old" in said(by["lxc-container:old"])


@pytest.mark.root
def test_missing_include_and_malformed_lines_do_not_hide_the_rest(ext4_volume, tmp_path):
    vol = ext4_volume.mountpoint
    _write(tmp_path / "var/lib/lxc/a/config",
           "lxc.include = /nonexistent/x.conf\nthis is not a config line\n"
           f"lxc.mount.entry = {vol} data none bind 0 0\n")
    target = resolve_target(vol)
    consumers, problems = lxc_src.collect(Host.under(str(tmp_path)), target, host_view(target))
    assert [c.id for c in consumers] == ["lxc-container:a"]
    assert [p.path for p in problems] == ["/var/lib/lxc/a/config:2"]


@pytest.mark.root
@pytest.mark.slow
def test_real_lxc_containers(lxc_boxes, tmp_path):
    """A running container binding the volume (whole and a subdirectory), a running one whose
    rootfs is on it, and a stopped one that only names it: all found through the real
    /var/lib/lxc, states from lxc-info."""
    from harness.lxc_box import make_box
    from harness.volumes import make_volume

    vol = make_volume("ext4", size_mb=320)
    lxc_boxes.append(vol)
    mnt = vol.mountpoint
    os.makedirs(f"{mnt}/images/129/subvol-129-disk-1")
    bind = make_box(extra=[f"lxc.mount.entry = {mnt} data none bind,create=dir 0 0",
                           (f"lxc.mount.entry = {mnt}/images/129/subvol-129-disk-1 mnt/mp0 "
                            "none bind,create=dir 0 0")])
    lxc_boxes.insert(0, bind)
    onvol = make_box(rootfs_dir=f"{mnt}/images/130/rootfs")
    lxc_boxes.insert(0, onvol)
    stopped = make_box(extra=[f"lxc.mount.entry = {mnt}/images data none bind,create=dir 0 0"])
    lxc_boxes.insert(0, stopped)
    other = make_box()   # uses nothing on the volume
    lxc_boxes.insert(0, other)
    pid_bind = bind.start()
    pid_onvol = onvol.start()
    # the container really sees the volume at /data
    with open(f"/proc/{pid_bind}/mountinfo") as f:
        assert " /data " in f.read()

    target = resolve_target(mnt)
    consumers, problems = lxc_src.collect(Host.local(), target, host_view(target))
    by = {c.id: c for c in consumers}
    assert not [p for p in problems if p.blocks_verdict]
    assert f"lxc-container:{other.name}" not in by
    b = by[f"lxc-container:{bind.name}"]
    assert b.attrs.running is True and b.attrs.pid == pid_bind
    assert set(b.paths) == {mnt, f"{mnt}/images/129/subvol-129-disk-1"}
    assert {e.source for e in b.evidence} == {f"{bind.config}:10", f"{bind.config}:11"}
    o = by[f"lxc-container:{onvol.name}"]
    assert o.attrs.running is True and o.attrs.pid == pid_onvol
    assert o.attrs.relations == ["rootfs"] and o.paths == (f"{mnt}/images/130/rootfs",)
    s = by[f"lxc-container:{stopped.name}"]
    assert s.attrs.running is False and "pid" not in s.attrs.given

    onvol.stop()
    consumers, _ = lxc_src.collect(Host.local(), target, host_view(target))
    assert {c.id: c for c in consumers}[f"lxc-container:{onvol.name}"].attrs.running is False


@pytest.mark.root
def test_lxcpath_symlinked_onto_the_volume(ext4_volume, tmp_path):
    vol = ext4_volume.mountpoint
    os.makedirs(f"{vol}/lxc/box")
    with open(f"{vol}/lxc/box/config", "w") as f:
        f.write("lxc.rootfs.path = dir:/var/lib/lxc/box/rootfs\n")
    (tmp_path / "var/lib").mkdir(parents=True)
    os.symlink(f"{vol}/lxc", tmp_path / "var/lib/lxc")
    target = resolve_target(vol)
    consumers, _ = lxc_src.collect(Host.under(str(tmp_path)), target, host_view(target))
    (box,) = consumers
    assert box.id == "lxc-container:box"
    assert set(box.attrs.relations) == {"rootfs", "container-dir"}
    assert set(box.paths) == {f"{vol}/lxc/box/rootfs", f"{vol}/lxc/box"}
