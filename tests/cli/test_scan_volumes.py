"""`vacate scan` on real loop-mounted ext4, xfs and btrfs volumes with awkward contents: totals
equal du's to the byte, nested mounts are not walked, odd names survive --json."""

from __future__ import annotations

import io
import json
import os
import socket
import stat
import subprocess

import pytest

from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.collectors import walk_descent
from vacate.observing.collectors.walk import walk

pytestmark = pytest.mark.root

NEWLINE_NAME = b"two\nlines.txt"
LATIN1_NAME = b"caf\xe9-\xff.bin"          # not valid UTF-8
DEEP_NAME = "d" * 200


def du(*args: str) -> int:
    out = subprocess.run(["du", "-0", *args], capture_output=True, check=False).stdout
    return sum(int(rec.split(b"\t", 1)[0]) for rec in out.split(b"\0") if rec.strip())


def count(*find_args: str) -> int:
    """How many entries ``find`` lists."""
    out = subprocess.run(["find", *find_args, "-printf", "x"], capture_output=True, check=True)
    return len(out.stdout)


def make_deep(root: str, min_len: int = 5000) -> str:
    """A chain of directories whose full path is longer than PATH_MAX; returns the path."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    path = root
    try:
        while len(path) < min_len:
            os.mkdir(DEEP_NAME, dir_fd=fd)
            nfd = os.open(DEEP_NAME, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
            path = os.path.join(path, DEEP_NAME)
        leaf = os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"x" * 12345)
        os.close(leaf)
    finally:
        os.close(fd)
    return path


def fill(root: str) -> None:
    """Awkward contents: data, a sparse file, hardlinks across directories, symlinks (dangling,
    looping, to a directory), a fifo, a socket, a device node, odd names, a deep chain."""
    os.makedirs(os.path.join(root, "data", "sub"))
    with open(os.path.join(root, "data", "blob.bin"), "wb") as f:
        f.write(os.urandom(300_000))
    with open(os.path.join(root, "sparse.img"), "wb") as f:
        f.write(b"head")
        f.truncate(3 << 30)
    with open(os.path.join(root, "data", "sub", "linked.txt"), "wb") as f:
        f.write(b"L" * 70_000)
    os.link(os.path.join(root, "data", "sub", "linked.txt"), os.path.join(root, "link-top.txt"))
    os.link(os.path.join(root, "data", "sub", "linked.txt"), os.path.join(root, "data", "l2"))
    os.symlink("nowhere", os.path.join(root, "dangling"))
    os.symlink("loop-b", os.path.join(root, "loop-a"))
    os.symlink("loop-a", os.path.join(root, "loop-b"))
    os.symlink("data", os.path.join(root, "data-link"))
    os.mkfifo(os.path.join(root, "data", "fifo"))
    s = socket.socket(socket.AF_UNIX)
    s.bind(os.path.join(root, "data", "sock"))
    s.close()
    os.mknod(os.path.join(root, "data", "null"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    broot = os.fsencode(root)
    for name in (NEWLINE_NAME, LATIN1_NAME):
        with open(os.path.join(broot, b"data", name), "wb") as f:
            f.write(b"odd" * 100)
    os.mkdir(os.path.join(broot, b"dir\nwith-newline"))
    os.mkdir(os.path.join(root, "deep"))
    make_deep(os.path.join(root, "deep"))
    os.mkdir(os.path.join(root, "empty"))
    open(os.path.join(root, "empty.txt"), "wb").close()


@pytest.fixture
def filled(volume):
    fill(volume.mountpoint)
    nested = volume.mount_tmpfs("data/nested")
    with open(os.path.join(nested, "big-on-tmpfs"), "wb") as f:
        f.write(b"t" * 1_000_000)
    subvol = None
    if volume.fstype == "btrfs":
        subvol = os.path.join(volume.mountpoint, "subvol")
        subprocess.run(["btrfs", "subvolume", "create", subvol], check=True,
                       capture_output=True)
        with open(os.path.join(subvol, "in-subvol.bin"), "wb") as f:
            f.write(b"s" * 123_457)
        os.link(os.path.join(subvol, "in-subvol.bin"), os.path.join(subvol, "again"))
    return volume, subvol


def expected(root: str, subvol: str | None, *du_args: str) -> int:
    """What du says. ``du -x`` does not enter a btrfs subvolume (own st_dev) and does not count
    the subvolume's directory either; vacate walks it, so add du -x of the subvolume."""
    total = du("-sx", *du_args, root)
    if subvol:
        total += du("-sx", *du_args, subvol)
    return total


def scan_json(path: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    rc = main(["scan", "--json", path], Env(stdout=out, stderr=err))
    assert rc == 0, err.getvalue()
    return json.loads(out.getvalue())


def dir_records(doc: dict) -> list[dict]:
    """The drill-down (``dirs``: a ``columns`` header and one row per directory) as records."""
    cols = doc["dirs"]["columns"]
    return [dict(zip(cols, row, strict=True)) for row in doc["dirs"]["rows"]]


def test_totals_equal_du(filled, monkeypatch):
    vol, subvol = filled
    root = vol.mountpoint
    doc = scan_json(root)
    tot = doc["totals"]
    assert tot["apparent_bytes"] == expected(root, subvol, "-b")
    assert tot["disk_bytes"] == expected(root, subvol, "-B1")
    # per top-level item as well; the hardlinked file is counted once, in one of the items
    # that hold a name of it, so those two are compared together
    items = {os.path.basename(i["path"]): i for i in doc["items"]}
    linked = [os.path.join(root, "data"), os.path.join(root, "link-top.txt")]
    for item in doc["items"]:
        if item["path"] in linked or item["path"] == subvol:
            continue
        assert item["apparent_bytes"] == du("-sxb", item["path"]), item["path"]
        assert item["disk_bytes"] == du("-sxB1", item["path"]), item["path"]
    pair = items["data"]["apparent_bytes"] + items["link-top.txt"]["apparent_bytes"]
    assert pair == du("-sxb", *linked)
    assert items["link-top.txt"]["files"] == 1
    # the same through the worker processes (a tree split over 2 workers from the start)
    w = walk(root, skip=frozenset({os.path.join(root, "data/nested")}),
             subvolumes=vol.fstype == "btrfs", workers=2, inline_entries=0)
    assert w.workers == 2
    assert (w.root.apparent_bytes, w.root.disk_bytes) == (tot["apparent_bytes"],
                                                          tot["disk_bytes"])
    assert (w.root.files, w.root.dirs) == (tot["files"], tot["dirs"])
    # and with the hot loop in Python (where the C one is built, the runs above used it)
    monkeypatch.setattr(walk_descent, "fastwalk", None)
    pure = walk(root, skip=frozenset({os.path.join(root, "data/nested")}),
                subvolumes=vol.fstype == "btrfs", workers=2, inline_entries=0)
    assert (pure.root, list(pure.dirs.rows)) == (w.root, list(w.dirs.rows))


def test_counts_and_kinds(filled):
    vol, subvol = filled
    root = vol.mountpoint
    doc = scan_json(root)
    nd = count(root, "-xdev", "!", "-type", "d")
    dd = count(root, "-xdev", "-type", "d")
    if subvol:   # find -xdev lists the subvolume directory but not what is in it
        nd += count(subvol, "-xdev", "!", "-type", "d")
        dd += count(subvol, "-xdev", "-mindepth", "1", "-type", "d")
    # find lists the nested mountpoint (on tmpfs), vacate does not walk into it at all
    dd -= 1
    assert doc["totals"]["files"] == nd
    assert doc["totals"]["dirs"] == dd
    tgt = doc["target"]
    assert tgt["fstype"] == vol.fstype
    assert tgt["mountpoint"] == root
    assert [m["mountpoint"] for m in tgt["nested_mounts"]] == [os.path.join(root, "data/nested")]
    dirs = dir_records(doc)
    # the drill-down's first row is the target itself: the totals again (times in ns there)
    first = dirs[0]
    assert first["path"] == root
    for k in ("apparent_bytes", "disk_bytes", "files", "dirs"):
        assert first[k] == doc["totals"][k]
    for k in ("mtime", "atime"):    # the same instant: st_mtime from st_mtime_ns, exactly
        ns = first[f"newest_{k}_ns"]
        assert divmod(ns, 10**9)[0] + divmod(ns, 10**9)[1] * 1e-9 == doc["totals"][f"newest_{k}"]
    walked = [d["path"] for d in dirs] + [f["path"] for f in doc["largest_files"]]
    assert not [p for p in walked if "/data/nested" in p]
    assert doc["warnings"] == []
    items = {os.path.basename(i["path"]): i for i in doc["items"]}
    empty = items["empty.txt"]
    assert (empty["apparent_bytes"], empty["files"], empty["is_dir"]) == (0, 1, False)
    assert empty["newest_mtime"] == os.lstat(os.path.join(root, "empty.txt")).st_mtime
    assert items["loop-a"]["files"] == 1 and items["data-link"]["is_dir"] is False
    largest = doc["largest_files"][0]
    assert largest["path"] == os.path.join(root, "sparse.img")
    assert largest["apparent_bytes"] == 3 << 30 and largest["disk_bytes"] < 1 << 20


def test_odd_names_round_trip(filled):
    vol, _ = filled
    root = vol.mountpoint
    doc = scan_json(root)
    names = {os.fsencode(d["path"]) for d in dir_records(doc)}
    names |= {os.fsencode(i["path"]) for i in doc["items"]}
    assert os.path.join(os.fsencode(root), b"dir\nwith-newline") in names
    deep = [d["path"] for d in dir_records(doc) if d["path"].endswith("/" + DEEP_NAME)]
    assert max(len(p) for p in deep) > 4096
    # a path with invalid UTF-8 comes back byte-exact from the JSON
    w = walk(os.path.join(root, "data"), keep_largest=100)
    paths = {os.fsencode(f.path) for f in w.largest}
    assert os.path.join(os.fsencode(root), b"data", LATIN1_NAME) in paths
    assert os.path.join(os.fsencode(root), b"data", NEWLINE_NAME) in paths
    doc2 = scan_json(os.path.join(root, "data"))
    back = {os.fsencode(f["path"]) for f in doc2["largest_files"]}
    assert os.path.join(os.fsencode(root), b"data", LATIN1_NAME) in back
    for p in back:
        os.lstat(p)    # every reported path names a real file, exactly


def walk_as(uid: int, path: str, pure: bool = False) -> dict:
    """Walk ``path`` in a forked child that runs as ``uid`` (root reads everything, so an
    unreadable directory needs another user); the result comes back as JSON. ``pure``: with
    the walk's hot loop in Python even where the C one is built."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:    # child: never returns into pytest
        code = 1
        try:
            os.close(r)
            if pure:
                walk_descent.fastwalk = None
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            res = walk(path)
            doc = {"apparent": res.root.apparent_bytes, "disk": res.root.disk_bytes,
                   "files": res.root.files,
                   "warnings": [[p.code, p.path] for p in res.warnings]}
            with os.fdopen(w, "w") as f:
                json.dump(doc, f)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(data)


def test_unreadable_dir_is_a_warning(ext4_volume):
    vol = ext4_volume
    os.chmod(vol.workdir, 0o755)          # our own temp dir: let the other user reach the mount
    top = os.path.join(vol.mountpoint, "shared")
    os.makedirs(os.path.join(top, "open", "inner"))
    os.makedirs(os.path.join(top, "locked", "secret"))
    for d in ("open/inner", "locked/secret"):
        with open(os.path.join(top, d, "f.bin"), "wb") as f:
            f.write(b"x" * 50_000)
    for d in ("", "open", "open/inner"):
        os.chmod(os.path.join(top, d), 0o755)
    os.chmod(os.path.join(top, "locked"), 0o700)
    nobody = 65534
    got = walk_as(nobody, top)
    assert got["warnings"] == [["unreadable-dir", os.path.join(top, "locked")]]
    du_nobody = subprocess.run(["du", "-sxb", top], capture_output=True, check=False,
                               user=nobody)
    assert du_nobody.returncode != 0 and b"Permission denied" in du_nobody.stderr
    assert got["apparent"] == int(du_nobody.stdout.split()[0])
    assert got["files"] == 1


def test_entries_that_cannot_be_stated_c_and_python_loops(ext4_volume):
    """A directory that may be listed but not entered (r-- for the user): every entry in it
    is a warning with its path, the same from the C loop and the Python loop."""
    vol = ext4_volume
    os.chmod(vol.workdir, 0o755)
    top = os.path.join(vol.mountpoint, "shared2")
    os.makedirs(os.path.join(top, "listonly", "sub"))
    for name in ("a.bin", "b.bin"):
        with open(os.path.join(top, "listonly", name), "wb") as f:
            f.write(b"y" * 10_000)
    os.makedirs(os.path.join(top, "locked"))
    os.chmod(top, 0o755)
    os.chmod(os.path.join(top, "listonly"), 0o744)      # others: r-- (names, no stat)
    os.chmod(os.path.join(top, "locked"), 0o700)
    nobody = 65534
    fast, pure = walk_as(nobody, top), walk_as(nobody, top, pure=True)
    assert fast == pure
    listonly = os.path.join(top, "listonly")
    assert sorted(fast["warnings"]) == sorted(
        [["unreadable-dir", os.path.join(top, "locked")]]
        + [["unreadable", os.path.join(listonly, n)] for n in ("a.bin", "b.bin", "sub")])


def test_files_vanishing_mid_walk(ext4_volume):
    """Another process deletes a tree while it is walked: the scan goes on, what vanished
    becomes a warning with its path, and the untouched part is still counted exactly."""
    root = ext4_volume.mountpoint
    stable = os.path.join(root, "stable")
    os.makedirs(os.path.join(stable, "a"))
    with open(os.path.join(stable, "a", "keep.bin"), "wb") as f:
        f.write(b"k" * 77_777)
    churn = os.path.join(root, "churn")
    seen_vanished = False
    for _attempt in range(10):
        for i in range(1500):
            d = os.path.join(churn, f"d{i:04d}")
            os.makedirs(d)
            for j in range(3):
                with open(os.path.join(d, f"f{j}"), "wb") as f:
                    f.write(b"c" * 5000)
        rm = subprocess.Popen(["rm", "-rf", churn])
        try:
            res = walk(root, workers=2, inline_entries=500)
        finally:
            rm.wait()
        codes = {p.code for p in res.warnings}
        assert codes <= {"vanished", "changed"}, res.warnings
        assert all(p.path.startswith(churn) for p in res.warnings)
        top = {p: s for p, _, s in res.top}
        assert top[stable].apparent_bytes == du("-sxb", stable)
        if "vanished" in codes:
            seen_vanished = True
            break
    assert seen_vanished, "no walk raced with the deletion in 10 tries"


def ncdu_tree_totals(node, seen: set, names: set, prefix: bytes = b"") -> tuple[int, int]:
    """Sum a parsed ncdu export as ncdu does: each hardlinked inode once, excluded ones not."""
    if isinstance(node, list):
        info, children = node[0], node[1:]
    else:
        info, children = node, []
    name = os.fsencode(info["name"])
    path = prefix + b"/" + name if prefix else name
    names.add((path, info.get("excluded")))
    if info.get("excluded"):
        return 0, 0
    asize, dsize = 0, 0
    if not (info.get("hlnkc") and info["ino"] in seen):
        seen.add(info.get("ino"))
        asize, dsize = info.get("asize", 0), info.get("dsize", 0)
    for c in children:
        a, d = ncdu_tree_totals(c, seen, names, path)
        asize, dsize = asize + a, dsize + d
    return asize, dsize


def test_ncdu_export_opens_in_ncdu(filled, tmp_path):
    vol, _ = filled
    root = vol.mountpoint
    export = tmp_path / "scan.ncdu.json"
    out, err = io.StringIO(), io.StringIO()
    rc = main(["scan", "--json", "--ncdu", str(export), root], Env(stdout=out, stderr=err))
    assert rc == 0, err.getvalue()
    doc = json.loads(out.getvalue())
    # real ncdu reads the file and writes it back out: that is the proof it parsed it
    again = subprocess.run(["ncdu", "-f", str(export), "-o", "-"], capture_output=True,
                           check=True, timeout=60).stdout
    parsed = json.loads(again.decode("utf-8", "surrogateescape"))
    assert parsed[0] == 1 and parsed[2]["progname"] == "ncdu"
    names: set = set()
    asize, dsize = ncdu_tree_totals(parsed[3], set(), names)
    assert (asize, dsize) == (doc["totals"]["apparent_bytes"], doc["totals"]["disk_bytes"])
    broot = os.fsencode(root)
    assert (broot + b"/data/" + LATIN1_NAME, None) in names
    assert (broot + b"/data/" + NEWLINE_NAME, None) in names
    # the nested mount is listed as excluded, not walked (ncdu 1.18 writes it back as "othfs")
    excluded = {kind for path, kind in names if path == broot + b"/data/nested"}
    assert excluded in ({"otherfs"}, {"othfs"})


def test_bind_mounts_inside_and_elsewhere(ext4_volume):
    """A bind of part of the volume inside it is a nested mount (it blocks an unmount) and is
    not walked twice; a bind elsewhere is listed as another place the filesystem is seen."""
    vol = ext4_volume
    root = vol.mountpoint
    os.makedirs(os.path.join(root, "models", "m1"))
    with open(os.path.join(root, "models", "m1", "w.bin"), "wb") as f:
        f.write(b"w" * 200_000)
    inside = vol.bind(os.path.join(root, "models"), os.path.join(root, "again", "models"))
    elsewhere = vol.bind(os.path.join(root, "models"), os.path.join(vol.workdir, "elsewhere"))
    doc = scan_json(root)
    tgt = doc["target"]
    assert [m["mountpoint"] for m in tgt["nested_mounts"]] == [inside]
    assert [m["mountpoint"] for m in tgt["other_mounts"]] == [elsewhere]
    assert tgt["other_mounts"][0]["root"] == "/models"
    assert doc["totals"]["apparent_bytes"] == du("-sxb", "--exclude=again", root) + du(
        "-sxb", os.path.join(root, "again"), "--exclude=models")
    assert not [d for d in dir_records(doc) if d["path"].startswith(inside)]


def test_a_walk_that_read_the_disk_means_the_recognisers_will_wait(ext4_volume, monkeypatch):
    """Freshly mounted (nothing of it cached), the walk reads the volume's metadata from the
    disk, and the scan has its recognisers look side by side as for a cold cache (8
    processes, the hub read ahead); walked again, it reads next to nothing."""
    from vacate.observing import recognise
    from vacate.observing import scan as scan_mod

    vol = ext4_volume
    for d in range(40):
        os.makedirs(os.path.join(vol.mountpoint, "data", f"d{d}"))
        for i in range(100):
            with open(os.path.join(vol.mountpoint, "data", f"d{d}", f"f{i}"), "wb") as f:
                f.write(b"x" * i)
    os.sync()
    subprocess.run(["umount", vol.mountpoint], check=True)
    subprocess.run(["mount", vol.device, vol.mountpoint], check=True)
    said: list[bool] = []
    real = recognise.annotate
    monkeypatch.setattr(recognise, "annotate",
                        lambda *a, **k: said.append(k["cpu_bound"]) or real(*a, **k))

    def walked() -> tuple:
        use0 = scan_mod._usage()
        w = walk(vol.mountpoint, workers=2, inline_entries=10)
        use1 = scan_mod._usage()
        return w, use1[1] - use0[1]

    w, blocks = walked()
    assert w.workers == 2 and w.entries >= 4040
    assert blocks * 512 >= scan_mod.READ_PER_ENTRY * w.entries      # read from the disk
    assert not scan_mod.cpu_bound(w, 1.0, (2.0, blocks))              # however busy
    subprocess.run(["umount", vol.mountpoint], check=True)
    subprocess.run(["mount", vol.device, vol.mountpoint], check=True)
    scan_mod.scan(vol.mountpoint)
    assert said == [False]
    w, blocks = walked()                                             # now cached
    assert blocks * 512 < scan_mod.READ_PER_ENTRY * w.entries
    assert scan_mod.cpu_bound(w, 1.0, (2.0, blocks))                  # and busy: computes
    assert not scan_mod.cpu_bound(w, 1.0, (0.2, blocks))              # waited on something
