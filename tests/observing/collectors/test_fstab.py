"""fstab: the parser on real-world shapes, and the collector against a real loop volume with a
Host pointed at a temp tree (the real /etc/fstab is never touched)."""

import os
import subprocess

import pytest

from vacate.observing.collectors.configured import fstab as fstab_src
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.collectors.mounts import resolve_target
from vacate.observing.host import Host
from vacate.observing.parsers import fstab


def test_parse_escapes_comments_and_trailing_notes():
    text = ("# /etc/fstab: static file system information.\n"
            "UUID=0a3407de-014b-458b-b5c1-848e92a327a3 /                ext4 errors=remount-ro 0 1\n"
            "/dev/sdb1 /mnt/My\\040Disk ext4 noauto,nofail 0 2 # lab-audit\n"
            "tmpfs /tmp tmpfs\n"
            "lonely\n")
    entries, problems = fstab.parse(text, "/etc/fstab")
    assert [e.line for e in entries] == [2, 3, 4]
    assert entries[0].tag == ("UUID", "0a3407de-014b-458b-b5c1-848e92a327a3")
    assert entries[1].target == "/mnt/My Disk"
    assert entries[1].has_option("noauto") and entries[1].has_option("nofail")
    assert entries[1].passno == 2
    assert entries[2].options == ("defaults",) and entries[2].freq == 0
    assert [p.path for p in problems] == ["/etc/fstab:5"]


def _blkid(dev: str, tag: str) -> str:
    return subprocess.run(["blkid", "-c", "/dev/null", "-s", tag, "-o", "value", dev],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.root
def test_collect_finds_every_way_fstab_uses_the_volume(ext4_volume, tmp_path):
    vol = ext4_volume.mountpoint
    uuid = _blkid(ext4_volume.device, "UUID")
    spaced = os.path.join(vol, "my data")
    lines = [
        "# comment naming " + vol + " is not an entry",
        f"UUID={uuid} {vol} ext4 noauto,nofail 0 2",                       # 2: the volume itself
        "LABEL=vacatetest /srv/by-label ext4 noauto 0 2",                  # 3: by label
        "UUID=00000000-1111-2222-3333-444444444444 /srv/other ext4 defaults 0 2",  # 4: not it
        f"{vol}/work /srv/bind none bind,nofail 0 0",                      # 5: bind source
        f"{vol}/images/nested.img /srv/nested ext4 loop,noauto 0 0",       # 6: loop file
        f"tmpfs {spaced.replace(' ', chr(92) + '040')} tmpfs size=1m 0 0",  # 7: mount point on it
        f"{vol}/swapfile none swap sw 0 0",                                # 8: swap file
        f"overlay /srv/ov overlay lowerdir={vol}/lower,upperdir=/u,workdir=/w 0 0",  # 9
        f"{vol}x/other /srv/prefix none bind 0 0",                         # 10: /mntx, not /mnt
        "/dev/sda1 / ext4 defaults 0 1",                                   # 11: unrelated
        "garbage",                                                         # 12: malformed
        f"{ext4_volume.device} /srv/bydev ext4 noauto 0 0",                # 13: device node
        f"UUID=00000000-1111-2222-3333-555555555555 {vol} ext4 noauto 0 0",  # 14: same place
    ]
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "fstab").write_text("\n".join(lines) + "\n")
    host = Host.under(str(tmp_path))
    target = resolve_target(vol)
    consumers, problems = fstab_src.collect(host, target, host_view(target))
    by_line = {c.attrs.line: c for c in consumers}
    assert sorted(by_line) == [2, 3, 5, 6, 7, 8, 9, 13, 14]
    assert by_line[14].attrs.relations == ["same-mountpoint"]
    assert all(c.type == "fstab" and not c.live for c in consumers)
    assert by_line[2].id == "fstab:/etc/fstab:2"
    assert by_line[2].attrs.relations == ["mounts-volume"]
    assert by_line[2].attrs.noauto and by_line[2].attrs.nofail
    assert by_line[2].paths == (target.path,)
    assert by_line[3].attrs.relations == ["mounts-volume"]
    assert by_line[13].attrs.relations == ["mounts-volume"]
    assert by_line[5].attrs.relations == ["bind-source"]
    assert by_line[5].paths == (os.path.join(vol, "work"),)
    assert by_line[6].attrs.relations == ["backing-file"]
    assert by_line[7].attrs.relations == ["mountpoint-on-volume"]
    assert by_line[7].paths == (spaced,)
    assert by_line[8].attrs.relations == ["swap-file"]
    assert by_line[9].attrs.relations == ["option-path"]
    assert by_line[9].paths == (os.path.join(vol, "lower"),)
    ev = by_line[5].evidence[0]
    assert ev.source == "/etc/fstab:5" and f"{vol}/work" in ev.detail
    assert [p.path for p in problems] == ["/etc/fstab:12"]


@pytest.mark.root
def test_collect_without_fstab_is_quiet(ext4_volume, tmp_path):
    target = resolve_target(ext4_volume.mountpoint)
    assert fstab_src.collect(Host.under(str(tmp_path)), target, host_view(target)) == ((), ())


@pytest.mark.root
def test_tag_resolved_through_dev_disk_links(ext4_volume, tmp_path):
    """A PARTUUID blkid does not report for the volume, resolved through the host's
    /dev/disk/by-partuuid link, as udev makes it."""
    link_dir = tmp_path / "dev" / "disk" / "by-partuuid"
    link_dir.mkdir(parents=True)
    os.symlink("../../" + os.path.basename(ext4_volume.device), link_dir / "feedbeef-01")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "fstab").write_text(
        "PARTUUID=feedbeef-01 /data ext4 defaults 0 0\nPARTUUID=feedbeef-02 /x ext4 defaults 0 0\n")
    target = resolve_target(ext4_volume.mountpoint)
    consumers, _ = fstab_src.collect(Host.under(str(tmp_path)), target, host_view(target))
    assert [c.attrs.line for c in consumers] == [1]
    assert "resolves to " + ext4_volume.device in consumers[0].evidence[0].detail


@pytest.mark.root
def test_paths_through_symlinks_on_the_host(ext4_volume, tmp_path):
    """mount(8) follows symlinks in the source and the mount point: so does the audit."""
    vol = ext4_volume.mountpoint
    os.makedirs(f"{vol}/work/sub")
    (tmp_path / "srv").mkdir()
    os.symlink(f"{vol}/work", tmp_path / "srv/link")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/fstab").write_text("/srv/link/sub /mnt/x none bind 0 0\n"
                                        "tmpfs /srv/link/tmp tmpfs size=1m 0 0\n"
                                        "/srv/nolink /mnt/y none bind 0 0\n")
    target = resolve_target(vol)
    consumers, _ = fstab_src.collect(Host.under(str(tmp_path)), target, host_view(target))
    assert [(c.attrs.line, c.attrs.relations, c.paths) for c in consumers] == [
        (1, ["bind-source"], (f"{vol}/work/sub",)),
        (2, ["mountpoint-on-volume"], (f"{vol}/work/tmp",))]
