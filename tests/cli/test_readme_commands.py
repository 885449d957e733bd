"""The README's first command works as it stands on a fresh copy of the repository, as root
on a machine without sudo (a container, a CI runner): a virtual environment, pip install,
then the demo. (The whole suite would not fit CI's time there: only the install and demo.)"""

import os
import shutil
import subprocess

import pytest
from harness.paths import ROOT


def _first_commands() -> list[str]:
    with open(os.path.join(ROOT, "README.md")) as f:
        block = f.read().split("```sh\n", 1)[1].split("```", 1)[0]
    return [ln for ln in block.splitlines() if ln.strip()]


@pytest.mark.root
@pytest.mark.slow
def test_the_install_and_demo_line_runs_as_root_without_sudo(tmp_path):
    if os.geteuid() != 0 or not shutil.which("git"):
        pytest.skip("needs root and git")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    clone = tmp_path / "vacate"
    for f in files:
        if os.path.isfile(os.path.join(ROOT, f)):
            os.makedirs(clone / os.path.dirname(f), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, f), clone / f)
    # the line must not need sudo as root: a sudo first on PATH that refuses, and says it
    # was asked (dropping the directories that hold the real one drops sh with them)
    shim = tmp_path / "no-sudo"
    shim.mkdir()
    (shim / "sudo").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/sudo-asked\nexit 1\n")
    (shim / "sudo").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{shim}:{os.environ['PATH']}"
    line = _first_commands()[0]
    assert "sudo vacate" not in line and ".venv/bin/vacate demo" in line
    r = subprocess.run(["sh", "-c", line], cwd=clone, env=env, capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "not safe to unmount" in r.stdout and "lock-dir" in r.stdout
    assert not (tmp_path / "sudo-asked").exists(), (tmp_path / "sudo-asked").read_text()
