"""A scan that could not read everything says so: exit 3, each place named once, the totals
a lower bound (as `du` run by the same user)."""

import io
import json
import os

import pytest

from vacate.cli.env import Env
from vacate.cli.main import main


def scan_as(uid: int, path: str, *args: str) -> tuple[int, str]:
    """`vacate scan ARGS PATH` run in-process in a forked child as ``uid``."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            out = io.StringIO()
            code = main(["scan", *args, path], Env(stdout=out, stderr=io.StringIO()))
            with os.fdopen(w, "w") as f:
                f.write(out.getvalue())
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), text


@pytest.mark.root
def test_unreadable_directories_make_the_scan_incomplete(ext4_volume):
    vol = ext4_volume
    os.chmod(vol.workdir, 0o755)
    top = os.path.join(vol.mountpoint, "shared")
    os.makedirs(os.path.join(top, "open"))
    os.makedirs(os.path.join(top, "locked", "inner"))
    with open(os.path.join(top, "open", "a.txt"), "w") as f:
        f.write("x" * 1000)
    with open(os.path.join(top, "locked", "inner", "b.txt"), "w") as f:
        f.write("y" * 1000)
    for d in ("", "open"):
        os.chmod(os.path.join(top, d), 0o755)
    os.chmod(os.path.join(top, "locked"), 0o700)
    rc, text = scan_as(65534, top, "--json")
    assert rc == 3
    doc = json.loads(text)
    unread = [w for w in doc["warnings"] if w["path"] == os.path.join(top, "locked")]
    assert len(unread) == 1 and unread[0]["blocks_verdict"] is True
    assert doc["totals"]["files"] == 1
    # root reads it all: complete, exit 0
    out = io.StringIO()
    assert main(["scan", "--json", top], Env(stdout=out, stderr=io.StringIO())) == 0
    assert json.loads(out.getvalue())["totals"]["files"] == 2
