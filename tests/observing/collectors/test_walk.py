"""The walker on a plain directory (no root needed): the worker processes agree with the
single-process walk and with du, hardlinks count once across workers, progress is reported."""

from __future__ import annotations

import io
import os
import subprocess

import pytest

from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.collectors import walk_descent, walk_finish, walk_loops
from vacate.observing.collectors.walk import walk


def du_b(path: str) -> int:
    out = subprocess.run(["du", "-sxb", path], capture_output=True, check=True).stdout
    return int(out.split()[0])


def make_tree(root: str, dirs: int = 60, files: int = 40) -> None:
    first = None
    for d in range(dirs):
        dd = os.path.join(root, f"top{d % 4}", f"mid{d % 7}", f"leaf{d}")
        os.makedirs(dd, exist_ok=True)
        for i in range(files):
            p = os.path.join(dd, f"f{i}")
            if first and i == 0:
                os.link(first, p)          # the same inode under every leaf
                continue
            with open(p, "wb") as f:
                f.write(b"x" * (1000 + (d * 131 + i * 17) % 9000))
            first = first or p


@pytest.mark.slow
@pytest.mark.parametrize("send_dirs", [walk_loops.SEND_DIRS, 2])
def test_workers_agree_with_one_process_and_du(tmp_path, monkeypatch, send_dirs):
    # send_dirs=2: the walkers send what they found in many pieces during the walk
    monkeypatch.setattr(walk_loops, "SEND_DIRS", send_dirs)
    root = str(tmp_path / "tree")
    make_tree(root)
    one = walk(root, workers=1)
    calls: list[tuple[int, int]] = []
    many = walk(root, workers=3, inline_entries=0, progress=lambda e, b: calls.append((e, b)))
    assert many.workers == 3 and one.workers == 0
    assert one.root == many.root
    assert one.root.apparent_bytes == du_b(root)
    assert {d.path: d.stats for d in one.dirs} == {d.path: d.stats for d in many.dirs}
    def sizes(w):   # ties between equal sizes may be broken either way
        return [max(f.apparent_bytes, f.disk_bytes) for f in w.largest]

    assert sizes(one) == sizes(many) and len(one.largest) == 50
    # progress: called, never going backwards, ending at every entry walked
    assert calls and calls == sorted(calls)
    assert calls[-1][0] == many.entries == many.root.files + many.root.dirs


def test_hardlinks_once_and_in_one_place(tmp_path):
    root = str(tmp_path / "tree")
    make_tree(root, dirs=12, files=3)
    w = walk(root, workers=2, inline_entries=0)
    assert w.root.apparent_bytes == du_b(root)
    # the linked inode is counted in exactly one leaf: the one with the smallest path
    leaves = sorted((d for d in w.dirs if os.path.basename(d.path).startswith("leaf")),
                    key=lambda d: d.path)
    size = os.path.getsize(os.path.join(leaves[0].path, "f0"))
    counted = [d.path for d in leaves if d.stats.apparent_bytes == du_b(d.path)]
    assert counted == [leaves[0].path]
    assert all(d.stats.apparent_bytes == du_b(d.path) - size for d in leaves[1:])


def test_single_file_and_missing_path(tmp_path):
    p = tmp_path / "one.bin"
    p.write_bytes(b"z" * 1234)
    w = walk(str(p))
    assert (w.root.apparent_bytes, w.root.files, w.root.dirs) == (1234, 1, 0)
    w = walk(str(tmp_path / "nope"))
    assert w.warnings and w.warnings[0].code == "unreadable"
    err = io.StringIO()
    rc = main(["scan", str(tmp_path / "nope")], Env(stdout=io.StringIO(), stderr=err))
    assert rc == 2 and "no such file" in err.getvalue()


def test_progress_on_request_when_not_a_terminal(tmp_path):
    root = tmp_path / "t"
    make_tree(str(root), dirs=8, files=5)
    out, err = io.StringIO(), io.StringIO()
    assert main(["scan", "--progress", str(root)], Env(stdout=out, stderr=err)) == 0
    assert "scanning" in err.getvalue()
    assert "total" in out.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert main(["scan", str(root)], Env(stdout=out, stderr=err)) == 0
    assert err.getvalue() == ""


def _state(pid: int) -> str | None:
    """A process's state letter, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()[0].decode()


def _children(pid: int) -> set[int]:
    kids = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat[stat.rfind(b")") + 2:].split()[1]) == pid:
            kids.add(int(name))
    return kids


@pytest.mark.slow
def test_sigterm_during_a_walk_leaves_no_worker_behind(tmp_path):
    """`vacate scan` stopped by SIGTERM while its walkers run: exit 143, and every walker
    process it started is gone (none orphaned to keep reading the volume)."""
    import signal
    import sys
    import time

    make_tree(str(tmp_path), dirs=1000, files=60)         # 60k files: workers start
    caught = None
    for _attempt in range(8):
        proc = subprocess.Popen([sys.executable, "-m", "vacate", "scan", "--json",
                                 "--no-recognise", str(tmp_path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        workers: set[int] = set()
        deadline = time.monotonic() + 20
        while proc.poll() is None and not workers and time.monotonic() < deadline:
            workers = _children(proc.pid)
        if workers and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
            if proc.returncode == -signal.SIGTERM and b"stopped by" not in err:
                continue    # the scan had ended: the signal met the interpreter's exit
            caught = (proc.returncode, err, workers)
            break
        proc.communicate(timeout=20)
    if caught is None:
        pytest.skip("the walk finished before its workers could be seen (machine too fast)")
    rc, err, workers = caught
    assert rc == 143, err
    assert b"stopped by SIGTERM" in err
    time.sleep(0.2)
    assert {w for w in workers if _state(w) not in (None, "Z")} == set()


def awkward_tree(root: str) -> None:
    """Every kind of entry the hot loop meets: odd names, hardlinks, symlinks (also dangling),
    a fifo, a socket, sparse and large files, an unreadable directory."""
    import socket

    make_tree(root, dirs=30, files=20)
    odd = os.path.join(root, "odd")
    os.makedirs(odd)
    for name in (b"new\nline", b"latin1-\xe9", b" lead", b"x" * 255):
        with open(os.path.join(odd.encode(), name), "wb") as f:
            f.write(b"o" * 4097)
    os.symlink("nowhere", os.path.join(odd, "dangling"))
    os.symlink("..", os.path.join(odd, "up"))
    os.mkfifo(os.path.join(odd, "fifo"))
    s = socket.socket(socket.AF_UNIX)
    s.bind(os.path.join(odd, "sock"))
    s.close()
    with open(os.path.join(odd, "sparse"), "wb") as f:
        f.truncate(5 << 30)
    with open(os.path.join(odd, "big"), "wb") as f:
        f.write(os.urandom(3 << 20))
    os.link(os.path.join(odd, "big"), os.path.join(root, "big-again"))
    closed = os.path.join(root, "closed")
    os.makedirs(os.path.join(closed, "inner"))
    os.chmod(closed, 0)


@pytest.mark.skipif(walk_descent.fastwalk is None, reason="the C loop was not built")
@pytest.mark.parametrize("workers", [0, 2])
def test_c_loop_and_python_loop_agree(tmp_path, monkeypatch, workers):
    """The walk's hot loop in C (``_fastwalk``) and in Python give the same drill-down,
    largest files, hardlink accounting and warnings, entry for entry."""
    root = str(tmp_path / "tree")
    awkward_tree(root)
    try:
        runs = []
        for loop in (walk_descent.fastwalk, None):
            monkeypatch.setattr(walk_descent, "fastwalk", loop)
            w = walk(root, workers=workers, inline_entries=0 if workers else 10**9)
            runs.append((w.root, list(w.dirs.rows), w.largest, sorted(w.warnings),
                         w.entries))
        assert runs[0] == runs[1]
        if os.geteuid() != 0:
            assert any(p.code == "unreadable-dir" for p in runs[0][3])
        assert runs[0][0].apparent_bytes == du_b(root) or os.geteuid() != 0
    finally:
        os.chmod(os.path.join(root, "closed"), 0o755)


def test_c_loop_is_built():
    """The install builds the C loop where a compiler is (scripts/test-deps.sh installs one):
    a silent fallback would leave the fast path untested."""
    assert walk_descent.fastwalk is not None, (
        "vacate.observing.collectors._fastwalk was not built: reinstall with a C compiler and the Python"
        " headers (pip install -e .)")


@pytest.mark.skipif(walk_descent.fastwalk is None, reason="the C loop was not built")
def test_c_sum_up_and_python_sum_up_agree(tmp_path, monkeypatch):
    """The drill-down added up bottom-up in C (``_fastwalk.sum_up``) and in Python
    (``walk_finish.sum_up_py``): the same rows, on a walked tree and on made-up rows with the
    root ``/`` and a parent that is not there."""
    import copy
    import types

    c = walk_descent.fastwalk
    made = [["/", 1, 1, 0, 1, 5, 5], ["/a", 1, 2, 3, 1, 10, 1], ["/a/b", 4, 5, 6, 1, 3, 20],
            ["/a/b/c", 1, 1, 1, 1, 30, 2], ["/x/y", 7, 7, 7, 1, 99, 99]]
    for root in ("/", "/a"):
        rows_c, rows_py = copy.deepcopy(made), copy.deepcopy(made)
        c.sum_up(rows_c, {r[0]: r for r in rows_c}, root)
        walk_finish.sum_up_py(rows_py, {r[0]: r for r in rows_py}, root)
        assert rows_c == rows_py
    assert rows_py[1] == ["/a", 6, 8, 10, 3, 30, 20]      # /a/b/c into /a/b, then into /a
    assert rows_py[4] == made[4]                          # its parent is not there
    with pytest.raises(TypeError):
        c.sum_up([["/a", 1]], {}, "/")

    root = str(tmp_path / "tree")
    awkward_tree(root)
    try:
        runs = []
        for mod in (c, types.SimpleNamespace(Descent=c.Descent, entries=c.entries,
                                            sum_up=walk_finish.sum_up_py)):
            monkeypatch.setattr(walk_descent, "fastwalk", mod)
            w = walk(root, workers=2, inline_entries=0)
            runs.append((w.root, list(w.dirs.rows), w.top))
        assert runs[0] == runs[1] and len(runs[0][1]) > 5
    finally:
        os.chmod(os.path.join(root, "closed"), 0o755)


@pytest.mark.skipif(walk_descent.fastwalk is None, reason="the C loop was not built")
@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")
@pytest.mark.parametrize("workers", [1, 3])
def test_c_descent_and_python_descent_agree(tmp_path, monkeypatch, workers):
    """The walk in C (``_fastwalk.Descent``) and in Python give the same drill-down, largest
    files, hardlinks and warnings: with a mountpoint to leave out (never stat'ed) and a mount the
    walk was not told of (an ``other-filesystem`` warning), and with the workers asked to
    give work away after every directory."""
    monkeypatch.setattr(walk_loops, "TICK_DIRS", 1)
    root = str(tmp_path / "tree")
    awkward_tree(root)
    known, unknown = (os.path.join(root, "top1", "mid2", n) for n in ("known-mnt", "other-mnt"))
    for m in (known, unknown):
        os.makedirs(m)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", m], check=True)
        with open(os.path.join(m, "inside"), "wb") as f:
            f.write(b"i" * 12345)
    c = walk_descent.fastwalk
    try:
        runs = []
        for mod in (c, None):
            monkeypatch.setattr(walk_descent, "fastwalk", mod)
            w = walk(root, skip=frozenset({known}), workers=workers, inline_entries=0)
            # which worker meets a file first decides ties between equal sizes
            largest = w.largest if workers == 1 else [
                max(f.apparent_bytes, f.disk_bytes) for f in w.largest]
            runs.append((w.root, list(w.dirs.rows), largest, sorted(w.warnings), w.entries,
                         w.top))
        assert runs[0] == runs[1]
        warned = {(p.code, p.path) for p in runs[0][3]}
        assert ("other-filesystem", unknown) in warned
        paths = {r[0] for r in runs[0][1]}
        assert known not in paths and unknown not in paths
        assert runs[0][0].apparent_bytes == du_b(root)     # (du -x leaves both out too)
    finally:
        for m in (known, unknown):
            subprocess.run(["umount", m], check=False)
        os.chmod(os.path.join(root, "closed"), 0o755)


def _descent(root: str):
    st = os.lstat(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    return walk_descent.fastwalk.Descent(fd, root, (st.st_size, st.st_blocks, st.st_mtime_ns,
                                                 st.st_atime_ns), st.st_dev, False, None)


@pytest.mark.skipif(walk_descent.fastwalk is None, reason="the C loop was not built")
def test_c_descent_gives_away_pending_directories(tmp_path):
    """``Descent.split`` hands out pending subdirectories (the older half at every level) by
    path, dev and inode; the descent never lists them itself, and the directories it lists
    plus those below the ones handed out are every directory once."""
    root = str(tmp_path / "t")
    for a in range(4):
        for b in range(6):
            os.makedirs(os.path.join(root, f"a{a}", f"b{b}", "c"))
    d = _descent(root)
    dirs, links, large, warns = [], [], [], []
    done, entries, _ = d.step(3, 1 << 62, dirs, links, large, warns)
    assert not done and len(dirs) == 3
    given = d.split(walk_loops.DEEP)
    # levels: the root (3 of 4 pending: 2 given), an a* (5 of 6: 3 given), a b* (1: 0 given)
    assert len(given) == 5
    for p, dev, ino in given:
        s = os.lstat(p)
        assert (s.st_dev, s.st_ino) == (dev, ino)
    while not done:
        done, e, _ = d.step(1000, 1 << 62, dirs, links, large, warns)
        entries += e
    mine = [r[0] for r in dirs]
    below = [dp for g, _, _ in given for dp, _, _ in os.walk(g)]
    assert sorted(mine + below) == sorted(dp for dp, _, _ in os.walk(root))
    assert entries == len(mine) and warns == links == large == []
    assert d.split(walk_loops.DEEP) == []      # done: nothing left to give


@pytest.mark.skipif(walk_descent.fastwalk is None, reason="the C loop was not built")
def test_c_descent_closes_its_directories(tmp_path):
    """Every directory fd the descent opened is closed: when it ends, when it is closed
    half-way, and when it is dropped half-way without a close."""
    root = str(tmp_path / "t")
    os.makedirs(os.path.join(root, *[f"d{i}" for i in range(30)]))

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = fds()
    d = _descent(root)
    done, entries, _ = d.step(1000, 0, [], [], [], [])
    assert done and entries == 31 and fds() == before
    d = _descent(root)
    d.step(5, 0, [], [], [], [])
    assert fds() == before + 5          # one fd a level
    d.close()
    assert fds() == before
    d = _descent(root)
    d.step(5, 0, [], [], [], [])
    del d
    assert fds() == before


@pytest.mark.slow
@pytest.mark.skipif(walk_descent.fastwalk is None, reason="the C loop was not built")
def test_c_descent_stops_for_a_signal_inside_a_huge_directory(tmp_path):
    """^C (here SIGALRM's handler) is honoured within a directory of 60,000 entries, between
    two getdents64 buffers, not only after it: the directory's row never arrives."""
    import signal

    root = tmp_path / "t"
    big = root / "huge"
    big.mkdir(parents=True)
    for i in range(60_000):
        (big / f"file-with-a-longish-name-{i:06d}").touch()

    class Stopped(Exception):
        pass

    def stop(*_):
        raise Stopped

    before = len(os.listdir("/proc/self/fd"))
    old = signal.signal(signal.SIGALRM, stop)
    d = _descent(str(big))
    dirs: list = []
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.002)
        with pytest.raises(Stopped):
            d.step(1, 0, dirs, [], [], [])
            signal.pause()   # (not reached when the step was cut short)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert dirs == []
    d.close()
    assert len(os.listdir("/proc/self/fd")) == before
    d = _descent(str(big))
    done, entries, _ = d.step(10, 0, dirs, [], [], [])
    assert done and entries == 60_001 and dirs[0][3] == 60_000


@pytest.mark.parametrize("workers", [0, 2])
def test_the_largest_files_of_one_size_are_the_first_by_path_on_every_run(tmp_path, monkeypatch,
                                                                           workers):
    """Issue 31: of more equal-size files than are kept, each run showed another set (the
    ones the walkers happened to meet first). Ties are broken by path, in C and in Python."""
    root = tmp_path / "tree"
    names = []
    for d in ("b", "a", "c"):
        for i in (7, 3, 11, 0, 5, 9, 1, 8, 2, 10, 6, 4):
            p = root / d / f"shard-{i:02d}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(b"x" * 8192)
            names.append(str(p))
    (root / "small").write_bytes(b"y")
    (root / "z-big").write_bytes(b"z" * 9000)
    want = [str(root / "z-big"), *sorted(names)[:5]]
    for loop in {walk_descent.fastwalk, None}:
        monkeypatch.setattr(walk_descent, "fastwalk", loop)
        w = walk(str(root), keep_largest=6, workers=workers,
                 inline_entries=0 if workers else 10**9)
        assert [f.path for f in w.largest] == want, loop
        assert all(type(f.path) is str for f in w.largest)
