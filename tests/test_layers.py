"""The layers are a contract (DEVELOPERS.md, "Architecture"; ``[tool.importlinter]`` in
pyproject.toml): ``lint-imports`` holds every one of them over this checkout's sources, and a
single import that runs up a layer breaks it."""

from __future__ import annotations

import os
import shutil
import subprocess

from harness.extras import tool
from harness.paths import ROOT


def lint_imports(root: str) -> subprocess.CompletedProcess:
    """``lint-imports`` over ``root``'s pyproject.toml and ``root/src`` (not an installed
    vacate: PYTHONPATH names the sources checked)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "src"))
    return subprocess.run([tool("lint-imports", "import-linter"), "--no-cache", "--no-logo"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_every_layer_contract_is_kept():
    r = lint_imports(ROOT)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout, r.stdout[-3000:]


def test_an_import_up_a_layer_breaks_the_contract(tmp_path):
    """A copy of the sources where the journal (act) imports the apply flow, and the model
    (observing) the output: lint-imports fails, naming the contracts broken."""
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path)
    shutil.copytree(os.path.join(ROOT, "src", "vacate"), tmp_path / "src" / "vacate",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.h"))
    for rel, line in (("act/journal.py", "from vacate.flow import apply"),
                      ("observing/model/plan.py", "from vacate.output import jsonfmt")):
        with open(tmp_path / "src" / "vacate" / rel, "a", encoding="utf-8") as f:
            f.write(f"\n{line}  # noqa\n")
    r = lint_imports(str(tmp_path))
    assert r.returncode != 0, r.stdout[-3000:]
    for broken in ("each layer imports only the layers below it BROKEN",
                   "observing imports nothing of vacate outside itself (it ships alone) BROKEN",
                   ("act and archive import nothing that does not ship with them to a far "
                    "host BROKEN"),
                   "vacate.act.journal -> vacate.flow.apply",
                   "vacate.observing.model.plan -> vacate.output.jsonfmt"):
        assert broken in " ".join(r.stdout.split()), r.stdout[-6000:]
