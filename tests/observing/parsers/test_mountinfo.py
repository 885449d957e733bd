"""The mountinfo parser on captured real files (sources in fixtures/proc/SOURCE.txt)."""

import os

from harness.paths import FIXTURES

from vacate.observing.collectors.mounts import mount_of
from vacate.observing.parsers import mountinfo


def load(name):
    with open(os.path.join(FIXTURES, "proc", name), "rb") as f:
        return f.read().decode("utf-8", "surrogateescape")


def test_every_line_of_every_capture_parses():
    for name in ("moby-fedora-mountinfo", "procfs-26231-mountinfo",
                 "util-linux-findmnt-mountinfo-messy", "util-linux-libmount-mountinfo",
                 "util-linux-libmount-mountinfo_btrfs"):
        text = load(name)
        mounts, bad = mountinfo.parse(text)
        assert bad == ()
        # the kernel escapes only space, tab, newline and backslash: count lines by '\n'
        assert len(mounts) == sum(1 for line in text.split("\n") if line.strip())


def test_carriage_return_in_a_mountpoint_stays_inside_the_field():
    mounts, _ = mountinfo.parse(load("util-linux-libmount-mountinfo"))
    assert any(m.mountpoint == "/mnt/test/foo\rbar" and m.fstype == "tmpfs" for m in mounts)


def test_cifs_source_is_unescaped_and_super_options_keep_spaces():
    mounts, _ = mountinfo.parse(load("moby-fedora-mountinfo"))
    (cifs,) = [m for m in mounts if m.fstype == "cifs"]
    assert cifs.source == "//foo/BLA BLA BLA/"
    assert cifs.mountpoint == "/DATA/foo_bla_bla"
    assert cifs.super_option("unc") == "\\\\foo\\BLA BLA BLA"
    assert cifs.super_option("username") == "my_login"


def test_deleted_bind_roots_are_marked():
    mounts, _ = mountinfo.parse(load("util-linux-findmnt-mountinfo-messy"))
    deleted = [m for m in mounts if m.deleted]
    assert {m.mountpoint for m in deleted} == {"/proc/sys/kernel/random/boot_id", "/proc/kmsg"}
    assert all(m.root.endswith("//deleted") for m in deleted)


def test_optional_fields_and_devices():
    mounts, _ = mountinfo.parse(load("util-linux-findmnt-mountinfo-messy"))
    console = next(m for m in mounts if m.mountpoint == "/dev/console")
    assert console.optional == ("shared:57", "master:4")
    assert (console.major, console.minor) == (0, 21)
    assert console.root == "/5"


def test_octal_escapes_in_mountpoint_and_non_utf8_bytes_round_trip():
    line = "36 35 98:0 /mnt1 /mnt/a\\040b\\012c\\134d\xff rw,noatime - ext3 /dev/r\\040oot rw"
    m = mountinfo.parse_line(line.encode("latin-1").decode("utf-8", "surrogateescape"))
    assert m.mountpoint.encode("utf-8", "surrogateescape") == b"/mnt/a b\nc\\d\xff"
    assert m.source == "/dev/r oot"
    assert m.options == ("rw", "noatime")


def test_malformed_lines_are_reported_not_fatal():
    mounts, bad = mountinfo.parse("garbage line\n36 35 98:0 / /x rw - ext4 /dev/a rw\n1 2 x:y\n")
    assert len(mounts) == 1 and len(bad) == 2
    assert bad[0].startswith("line 1:")


def test_mount_of_picks_the_longest_and_topmost_mount():
    mounts, _ = mountinfo.parse(load("util-linux-findmnt-mountinfo-messy"))
    assert mount_of(mounts, "/proc/sys/kernel/random/boot_id").mount_id == 106
    assert mount_of(mounts, "/dev/pts/3").mountpoint == "/dev/pts"
    assert mount_of(mounts, "/home/x").mountpoint == "/"


def test_zfs_dataset_and_atime_policy():
    from vacate.observing.collectors.mounts import atime_policy, zfs_dataset

    # the story's volume as zfs-fuse shows it, and as kernel ZFS does (same line shape)
    fuse = mountinfo.parse_line(
        "412 300 0:77 / /data rw,noatime shared:220 - fuse.zfs scratch/subvol-129-disk-0 "
        "rw,user_id=0,group_id=0,default_permissions,allow_other")
    kern = mountinfo.parse_line(
        "89 30 0:45 / /data rw,relatime shared:40 - zfs scratch/subvol-129-disk-0 "
        "rw,xattr,posixacl,casesensitive")
    assert zfs_dataset(fuse) == zfs_dataset(kern) == "scratch/subvol-129-disk-0"
    assert atime_policy(fuse)[0] is False and "noatime" in atime_policy(fuse)[1]
    assert atime_policy(kern)[0] is True and "relatime" in atime_policy(kern)[1]
    ext4 = next(m for m in mountinfo.parse(load("util-linux-libmount-mountinfo"))[0]
                if m.fstype not in ("zfs", "fuse.zfs"))
    assert zfs_dataset(ext4) is None
