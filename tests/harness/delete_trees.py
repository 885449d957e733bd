"""Trees on real ext4 and btrfs volumes for the delete and record tests: items with odd names,
deep paths, wide directories; the record made of one and the delete from it."""

import os

import pytest

from vacate.act.delete import delete_item, record_entries


@pytest.fixture(params=["ext4", "btrfs"])
def vol(request):
    from harness.volumes import can_loop_mount, make_volume
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume(request.param, size_mb=256)
    try:
        yield v
    finally:
        v.close()


def put(path, data=b"x"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def put_deep(base, depth=45):
    """A file at the end of ``depth`` directories of 100-byte names below ``base`` (45:
    ~4,600 bytes of path, past PATH_MAX), made one directory fd at a time."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d" * 100, dir_fd=fd)
            nfd = os.open("d" * 100, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        with open(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as f:
            f.write(b"deep")
    finally:
        os.close(fd)


def tree(root):
    """Every path below ``root`` (bytes, relative), as ``find`` lists them."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        for n in dirnames + filenames:
            out.append(os.path.relpath(os.path.join(dirpath, n), os.fsencode(root)))
    return sorted(out)


def record(v, rel):
    item = os.path.join(v.mountpoint, rel)
    return item, record_entries(item, dev=os.stat(v.mountpoint).st_dev)


def delete(v, item, rec, **kw):
    return delete_item(item, rec, target_root=v.mountpoint, dev=os.stat(v.mountpoint).st_dev,
                       **kw)


def make_item(v, rel="item"):
    base = os.path.join(v.mountpoint, rel)
    put(f"{base}/a/b/c/deep.bin", os.urandom(5000))
    put(f"{base}/a/one.txt", b"one")
    put(f"{base}/empty-file", b"")
    os.makedirs(f"{base}/empty-dir")
    os.symlink("a/one.txt", f"{base}/rel-link")
    os.mkfifo(f"{base}/a/fifo")
    os.link(f"{base}/a/one.txt", f"{base}/a/b/hardlink")
    return base

ODD = [b"new\nline", b"latin1-\xe9\xff", b" sp ace ", b"-dash", b"emoji-\xe2\x98\x83",
       b"back\\slash", b"tab\there", b"*?[glob]"]


def big_item(v, rel="big", dirs=60, files=200):
    base = os.path.join(v.mountpoint, rel)
    for d in range(dirs):
        dd = os.path.join(base, f"top{d % 3}", f"mid{d}", "leaf")
        os.makedirs(dd)
        for i in range(files):
            with open(os.path.join(dd, f"f{i}"), "wb") as f:
                f.write(b"y" * (i % 7))
    return base
