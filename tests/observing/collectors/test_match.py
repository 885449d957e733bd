"""VolumeView: how paths on the volume are spelled on the host and inside containers."""

from vacate.observing.collectors.configured.match import (
    VolumeView,
    container_view,
    host_view,
    lines_with_paths,
)
from vacate.observing.model.mount import Mount, Target


def mount(mid, root, mountpoint, dev=(7, 3)):
    return Mount(mid, 1, dev[0], dev[1], root, mountpoint, ("rw",), (), "ext4", "/dev/loop3", ())


def target(path="/data", m=None, others=()):
    m = m or mount(10, "/", "/data")
    return Target(path, m, 0, None, None, None, True, "", None, (), tuple(others))


def test_host_view_includes_bind_mounts_of_the_same_filesystem():
    bind = mount(11, "/models", "/srv/models")
    other_fs = mount(12, "/", "/srv/other", dev=(8, 1))
    v = host_view(target(others=(bind,)), (mount(10, "/", "/data"), bind, other_fs))
    assert v.to_host("/data/eagle3/x") == "/data/eagle3/x"
    assert v.to_host("/srv/models/qwen/config.json") == "/data/models/qwen/config.json"
    assert v.to_host("/srv/other/x") is None
    assert v.to_host("/database") is None and v.to_host("relative/data") is None
    assert v.to_host("/data/../etc/passwd") is None
    assert v.to_host("//data//a/./b") == "/data/a/b"


def test_target_below_the_mountpoint():
    t = target("/data/models")
    v = host_view(t, (mount(10, "/", "/data"), mount(11, "/", "/mnt/again")))
    assert v.to_host("/mnt/again/models/x") == "/data/models/x"
    assert v.to_host("/mnt/again/eagle3") is None
    assert v.to_host("/data/eagle3") is None


def test_container_view_translates_through_the_mount_root():
    t = target()
    ct_mounts = (mount(50, "/", "/", dev=(0, 99)),             # the container's rootfs
                 mount(51, "/", "/data"),                     # lxc.mount.entry: volume at /data
                 mount(52, "/eagle3", "/mnt/mp0"))            # a subdirectory bound
    v = container_view("lxc:129", t, ct_mounts, pid=4242)
    assert v.in_container and v.pid == 4242
    assert v.to_host("/mnt/mp0/draft/model.safetensors") == "/data/eagle3/draft/model.safetensors"
    assert v.to_host("/data/models") == "/data/models"
    assert v.to_host("/etc/fstab") is None
    assert not host_view(t).in_container


def test_a_containers_own_dev_is_not_on_a_volume_its_root_lies_on():
    """Checking / on a host whose containers' roots lie on it: a container's cron script
    writing to /dev/null names its /dev (a tmpfs of its own), not the volume; a file of its
    root is on the volume."""
    root = mount(10, "/", "/", dev=(8, 1))
    t = target("/", root)
    ct_mounts = (mount(60, "/var/lib/lxc/129/rootfs", "/", dev=(8, 1)),
                 mount(61, "/", "/dev", dev=(0, 70)),
                 mount(62, "/", "/proc", dev=(0, 71)))
    v = container_view("lxc:129", t, ct_mounts, pid=4242)
    assert v.to_host("/dev/null") is None and v.to_host("/proc/1/status") is None
    assert v.to_host("/dev") == "/var/lib/lxc/129/rootfs/dev"       # its mount point is
    assert v.to_host("/usr/bin/mandb") == "/var/lib/lxc/129/rootfs/usr/bin/mandb"


def test_paths_in_text():
    v = VolumeView("host", (("/data", "/data"), ("/srv/models", "/data/models")))
    text = ("PATH=/usr/bin:/data/bin --model=/srv/models/q,/database/x '/data/a b' "
            "/mydata/x (/data/paren)")
    found = v.paths_in_text(text)
    assert ("/data/bin", "/data/bin") in found
    assert ("/srv/models/q", "/data/models/q") in found
    assert ("/data/a", "/data/a") in found
    assert ("/data/paren", "/data/paren") in found
    assert not any("database" in s or "mydata" in s for s, _h in found)


def test_lines_with_paths_skips_comments():
    v = VolumeView("host", (("/data", "/data"),))
    text = "# /data/old\nA=/data/new\n\nB=/srv\n  # /data/x\n"
    assert lines_with_paths(v, text) == [(2, "A=/data/new", [("/data/new", "/data/new")])]
