"""The ``vacate.volume`` Ansible collection as a user gets it: ``vacate collection`` makes the
tarball, ``ansible-galaxy collection install`` installs it offline, ``ansible-doc`` renders
each module, and the observing layer inside it is the one ``vacate payload`` ships (built
from the same sources, never a second copy)."""

from __future__ import annotations

import ast
import base64
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest
from harness import collection, extras

from vacate.remote import payload

MODULES = ("check", "observe", "plan", "op")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    return collection.build_and_install(str(tmp_path_factory.mktemp("collection")))


def payload_of(tree: str) -> bytes:
    """The zip in the collection's module_utils, read as data (never imported here)."""
    with open(os.path.join(tree, "plugins", "module_utils", "vacate_payload.py")) as f:
        body = ast.parse(f.read()).body
    values = {n.targets[0].id: ast.literal_eval(n.value) for n in body
              if isinstance(n, ast.Assign) and n.targets[0].id in ("PAYLOAD", "SHA256")}
    data = base64.b64decode("".join(values["PAYLOAD"]))
    assert hashlib.sha256(data).hexdigest() == values["SHA256"]
    return data


def files_of(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist() if n != "__main__.py"}


def test_the_observing_code_in_the_collection_is_vacate_payloads(installed, tmp_path):
    inside = payload_of(installed.tree)
    # what `vacate payload` writes, through the command
    out = tmp_path / "vacate-observe.pyz"
    subprocess.run([sys.executable, "-m", "vacate", "payload", "-o", str(out)], check=True,
                   capture_output=True, env=dict(os.environ, PYTHONPATH=collection.SRC))
    zipapp = out.read_bytes()
    assert files_of(inside) == files_of(zipapp[zipapp.index(b"PK\x03\x04"):])
    assert inside == payload.build()
    # and in the tarball too, nothing else of vacate beside it
    with tarfile.open(installed.tarball) as t:
        names = t.getnames()
        member = t.extractfile("plugins/module_utils/vacate_payload.py").read().decode()
    assert "plugins/module_utils/vacate_payload.py" in names
    assert not [n for n in names if "/vacate/" in n or n.endswith(".so")]
    (tmp_path / "member").mkdir()
    (tmp_path / "member" / "plugins" / "module_utils").mkdir(parents=True)
    (tmp_path / "member" / "plugins" / "module_utils" / "vacate_payload.py").write_text(member)
    assert payload_of(str(tmp_path / "member")) == inside
    # and the finder that imports it from memory there is the ssh bootstrap's own
    from vacate.remote.collection import finder_source

    assert "class Payload(" in finder_source() and finder_source() in member
    assert finder_source() in payload.bootstrap()


@pytest.mark.parametrize("module", MODULES)
def test_ansible_doc_renders_each_module(installed, module):
    doc = extras.tool("ansible-doc", "ansible-core")
    r = subprocess.run([doc, f"vacate.volume.{module}"], capture_output=True, text=True,
                       env=installed.environ(), timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert f"vacate.volume.{module}" in r.stdout
    assert "EXAMPLES" in r.stdout and "OPTIONS" in r.stdout, r.stdout[:2000]
    assert "RETURN VALUES" in r.stdout, r.stdout[-2000:]


@pytest.mark.slow
def test_ansible_test_sanity_passes(tmp_path):
    """``ansible-test sanity`` on the built collection (its own git tree, as ansible-test
    wants one); no ignore file: no exception is taken."""
    from vacate.remote import collection as build

    tree = build.assemble(str(tmp_path))
    assert not os.path.exists(os.path.join(tree, "tests", "sanity"))
    subprocess.run(["git", "init", "-q", tree], check=True)
    tool = extras.tool("ansible-test", "ansible-core")
    r = subprocess.run([tool, "sanity", "--local", "--python",
                        f"{sys.version_info[0]}.{sys.version_info[1]}"], cwd=tree,
                       capture_output=True, text=True, timeout=1200, check=False)
    assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
