"""The ``vacate.volume`` collection built from this checkout (``vacate collection``) and
installed offline into a test directory, and ``ansible-playbook`` runs that use it: the
controller's vacate is this checkout's (``PYTHONPATH``), the collections path the test's."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import vacate
from harness import extras

SRC = os.path.dirname(os.path.dirname(os.path.abspath(vacate.__file__)))


@dataclass(frozen=True)
class Installed:
    tarball: str
    path: str          # the collections path (ansible_collections/ is in it)

    @property
    def tree(self) -> str:
        return os.path.join(self.path, "ansible_collections", "vacate", "volume")

    def environ(self, **more) -> dict:
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=self.path, PYTHONPATH=SRC,
                   ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOWS="1",
                   ANSIBLE_HOST_KEY_CHECKING="0", ANSIBLE_RETRY_FILES_ENABLED="0",
                   ANSIBLE_LOCAL_TEMP=os.path.join(self.path, "local-tmp"))
        env.pop("VACATE_SSH_ARGS", None)
        env.update(more)
        return env


def build_and_install(root: str) -> Installed:
    """``vacate collection`` into ``root/dist``, then ``ansible-galaxy collection install``
    of the tarball into ``root/collections`` (no network: the tarball has no
    dependencies)."""
    galaxy = extras.tool("ansible-galaxy", "ansible-core")
    r = subprocess.run([sys.executable, "-m", "vacate", "collection", "--output-dir",
                        os.path.join(root, "dist"), "--build-dir", os.path.join(root, "build")],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=SRC),
                       timeout=300, check=True)
    tarball = r.stdout.strip()
    path = os.path.join(root, "collections")
    subprocess.run([galaxy, "collection", "install", "--offline", "-p", path, tarball],
                   capture_output=True, text=True, timeout=300, check=True)
    return Installed(tarball, path)


def playbook(installed: Installed, *args: str, env: dict | None = None,
             timeout: float = 600) -> subprocess.CompletedProcess:
    """``ansible-playbook ARGS`` with the collection installed."""
    tool = extras.tool("ansible-playbook", "ansible-core")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=timeout,
                          env=env or installed.environ(), check=False)
