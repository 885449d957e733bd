"""The ``vacate.volume`` Ansible collection, built from this checkout: ``ansible_collection/``
(galaxy.yml, the modules, the action plugins, docs) copied into a build directory, with one
file made there: ``plugins/module_utils/vacate_payload.py``, the zip ``vacate payload``
ships (:func:`vacate.remote.payload.build`), base64 in lines, and ``vacate_payload_act.py``
beside it, the zip ``vacate apply --host`` sends (with the acting half). So the observing layer the
modules run on a target comes from the one source in ``src/``; nothing of it is committed
twice. Then ``ansible-galaxy collection build`` makes the tarball."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess

import vacate
from vacate.observing import tools
from vacate.observing.errors import UsageError, VacateError
from vacate.remote import payload

PAYLOAD_MODULE = "plugins/module_utils/vacate_payload.py"
ACT_PAYLOAD_MODULE = "plugins/module_utils/vacate_payload_act.py"   # with the acting half
LINE = 76


def sources_dir() -> str:
    """``ansible_collection/`` of this checkout (beside ``src/``)."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(vacate.__file__))))
    found = os.path.join(top, "ansible_collection")
    if not os.path.isfile(os.path.join(found, "galaxy.yml")):
        raise UsageError(f"{found}/galaxy.yml: no collection sources there (the collection "
                         "is built from a checkout of vacate)")
    return found


def payload_module(data: bytes) -> str:
    """The module_utils file holding the payload zip ``data`` and the finder that imports
    it from memory: the bootstrap's own (:func:`finder_source`), the one ``--host`` runs."""
    text = base64.b64encode(data).decode("ascii")
    lines = [f'    "{text[i:i + LINE]}",' for i in range(0, len(text), LINE)]
    return ("# -*- coding: utf-8 -*-\n"
            "# Made by `vacate collection` from vacate's sources; not edited by hand.\n"
            "# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)\n"
            '"""The observing layer, as the zip `vacate payload` ships (base64), and the\n'
            'finder vacate\'s ssh bootstrap imports it with (its Payload class, copied at build)."""'
            "\n\nfrom __future__ import absolute_import, division, print_function\n\n"
            "__metaclass__ = type\n\n"
            "import importlib.abc\nimport importlib.util\nimport io\nimport zipfile\n\n"
            f'SHA256 = "{hashlib.sha256(data).hexdigest()}"\n'
            f"VERSION = {vacate.__version__!r}\n"
            "PAYLOAD = (\n" + "\n".join(lines) + "\n)\n\n\n" + finder_source())


def finder_source() -> str:
    """The source of ``Payload``, the finder of :mod:`vacate.remote.bootstrap` (modules of a zip
    imported from memory), as it stands there."""
    import ast

    text = payload.bootstrap()
    node = next(n for n in ast.parse(text).body
                if isinstance(n, ast.ClassDef) and n.name == "Payload")
    return ast.get_source_segment(text, node) + "\n"


def assemble(build_dir: str) -> str:
    """The collection's tree in ``build_dir/ansible_collections/vacate/volume`` (made anew);
    its path."""
    tree = os.path.join(build_dir, "ansible_collections", "vacate", "volume")
    if os.path.exists(tree):
        shutil.rmtree(tree)
    shutil.copytree(sources_dir(), tree,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests/output"))
    with open(os.path.join(tree, "galaxy.yml"), encoding="utf-8") as f:
        galaxy = f.read()
    with open(os.path.join(tree, "galaxy.yml"), "w", encoding="utf-8") as f:
        f.write(galaxy.replace("@VERSION@", vacate.__version__))
    for name, act in ((PAYLOAD_MODULE, False), (ACT_PAYLOAD_MODULE, True)):
        with open(os.path.join(tree, name), "w", encoding="utf-8") as f:
            f.write(payload_module(payload.build(act=act)))
    return tree


def build(output_dir: str, build_dir: str) -> str:
    """``ansible-galaxy collection build`` of the assembled tree: the tarball's path."""
    galaxy = tools.which("ansible-galaxy")
    if galaxy is None:
        raise UsageError(f"building the collection needs {tools.looked('ansible-galaxy')}",
                         hint="pip install 'vacate[ansible]' (or ansible-core >= 2.15)")
    tree = assemble(build_dir)
    os.makedirs(output_dir, exist_ok=True)
    r = subprocess.run([galaxy, "collection", "build", "--force", "--output-path",
                        os.path.abspath(output_dir), tree], capture_output=True, text=True,
                       timeout=300, check=False)
    if r.returncode != 0:
        raise VacateError(f"ansible-galaxy collection build failed: {r.stderr.strip()[-2000:]}")
    return os.path.join(os.path.abspath(output_dir),
                        f"vacate-volume-{vacate.__version__}.tar.gz")
