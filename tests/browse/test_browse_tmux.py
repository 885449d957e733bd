"""The installed command for real, in tmux: ``vacate browse`` on a saved observation of the
demo's volume (the story's /data), the verdict and items on screen, into ``eagle3/``, a
mark, ``w``; the written plan's items and actions equal those of ``vacate plan`` run with the
command line the screen showed."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest
from harness.paths import SRC
from harness.retire import cli

from vacate import demo

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def vol():
    if not demo.can_loop_mount():
        pytest.skip("needs root and losetup")
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    d = demo.create(loop=True)
    yield d.path
    d.close()


class Tmux:
    def __init__(self, name: str, cmd: str, cols: int = 100, rows: int = 30):
        self.name = name
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", str(cols), "-y", str(rows),
                        cmd], check=True)

    def keys(self, *keys: str) -> None:
        for k in keys:               # one at a time: Escape then a letter would read as Alt
            subprocess.run(["tmux", "send-keys", "-t", self.name, k], check=True)
            time.sleep(0.3)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name],
                              capture_output=True, text=True, check=True).stdout

    def wait(self, text: str, timeout: float = 30) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = self.screen()
            if text in s:
                return s
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never showed:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True,
                       check=False)


def _command_on(page: str) -> str:
    """The command line the write page shows, read as a shell reads it (a line that ends
    with a backslash goes on on the next)."""
    lines = [ln.strip().strip("│").strip() for ln in page.splitlines()]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("the same plan in a script"))
    out = []
    for ln in lines[at + 1:]:
        if not ln:
            break
        out.append(ln[:-1].rstrip() if ln.endswith("\\") else ln)
    return " ".join(out)


def test_browse_in_tmux_marks_and_writes_the_plan_vacate_plan_makes(vol, tmp_path):
    obs = str(tmp_path / "obs.json")
    rc, _, err = cli("observe", vol, "-o", obs)
    assert rc == 0, err
    out, bk = str(tmp_path / "out.plan"), str(tmp_path / "bk")
    cmd = (f"cd {shlex.quote(str(tmp_path))} && PYTHONPATH={shlex.quote(os.path.abspath(SRC))} "
           f"{shlex.quote(sys.executable)} -m vacate browse obs.json --archive-to {bk} -o {out}; "
           "echo browse-exited=$?; sleep 60")
    t = Tmux("vacate-browse-test", cmd)
    try:
        s = t.wait("safe to unmount")
        for name in ("eagle3/", "models/", "lost+found/", "cuda_13.0.1_580.82.07_linux.run"):
            assert name in s, s
        assert "[##########]" in s
        t.keys("Enter")
        s = t.wait(f"{vol}/eagle3/  sort")
        assert "cache/" in s and "outputs/" in s
        t.keys("Space")
        t.wait("k  keep")
        t.keys("k")
        t.wait("1 marked")
        t.keys("BSpace", "w")
        page = t.wait("the same plan in a script", timeout=60)
        shown = _command_on(t.screen())
        t.keys("Escape")
        t.keys("q")
        t.wait("browse-exited=0")
    finally:
        t.close()
    assert "--keep eagle3/" in shown, page
    argv = shlex.split(shown)
    assert argv[:3] == ["vacate", "plan", vol], (shown, page)
    argv[argv.index("-o") + 1] = str(tmp_path / "again.plan")
    rc, _, err = cli(*argv[1:])
    assert rc == 0, err
    with open(out) as f:
        written = json.load(f)
    with open(tmp_path / "again.plan") as f:
        again = json.load(f)
    got = {i["path"]: i["action"] for i in written["items"]}
    assert got == {i["path"]: i["action"] for i in again["items"]}
    assert any(a == "keep" and p.startswith(f"{vol}/eagle3/") for p, a in got.items()), got
