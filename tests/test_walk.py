"""The walker on a plain directory (no root needed): the worker processes agree with the
single-process walk and with du, hardlinks count once across workers, progress is reported."""

from __future__ import annotations

import io
import os
import subprocess

import pytest

from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.collectors import walk as walk_mod
from vacate.collectors.walk import walk


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


@pytest.mark.parametrize("send_dirs", [walk_mod.SEND_DIRS, 2])
def test_workers_agree_with_one_process_and_du(tmp_path, monkeypatch, send_dirs):
    # send_dirs=2: the walkers send what they found in many pieces during the walk
    monkeypatch.setattr(walk_mod, "SEND_DIRS", send_dirs)
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


def test_sigterm_during_a_walk_leaves_no_worker_behind(tmp_path):
    """`vacate scan` stopped by SIGTERM while its walkers run: exit 143, and every walker
    process it started is gone (none orphaned to keep reading the volume)."""
    import signal
    import sys
    import time

    make_tree(str(tmp_path), dirs=400, files=60)          # 24k files: workers start
    caught = None
    for _attempt in range(5):
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
