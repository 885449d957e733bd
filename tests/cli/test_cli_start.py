"""How the ``vacate`` command starts and ends: what `vacate check` imports before it answers
(start-up is most of its time against ``fuser``), and that the read-only commands, which end
without the interpreter's teardown, still deliver all their output and the right status."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from vacate.observing.errors import EXIT_ERROR


def _vacate(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vacate", *args], text=True, check=False,
                          **kw)


def test_check_does_not_load_inspect(tmp_path):
    """dataclasses imports inspect (and ast, dis, tokenize); the entry point puts a stand-in
    in its place, so `vacate check` does not pay for them. The answer is complete."""
    r = _vacate("check", "--json", "--no-scan", "--no-config", str(tmp_path),
                capture_output=True, env=dict(os.environ, PYTHONPROFILEIMPORTTIME="1"))
    assert r.returncode in (0, 1), r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["schema"] == "vacate.check/1" and doc["verdict"]["safe_to_unmount"] in (True,
                                                                                      False)
    imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines()
                if line.startswith("import time:")}
    assert "vacate.flow.check" in imported          # the import log is the real one
    assert not {"inspect", "ast", "dis", "tokenize"} & imported


def test_inspect_stand_in_loads_the_real_module_when_used():
    """Code that does use inspect (a dataclass without a docstring asks it for the
    signature; rich uses it) gets the real module, loaded at that moment."""
    code = (
        "import sys\n"
        "from vacate.cli.main import _lazy_inspect\n"
        "_lazy_inspect()\n"
        "import dataclasses\n"
        "assert 'ast' not in sys.modules\n"
        "@dataclasses.dataclass\n"
        "class Point:\n"
        "    x: int\n"
        "    y: int = 0\n"
        "import inspect\n"
        "print(Point.__doc__)\n"
        "print(inspect.signature(Point), inspect.isclass(Point), 'ast' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["Point(x: int, y: int = 0)",
                                     "(x: int, y: int = 0) -> None True True"]


@pytest.mark.parametrize("command", ["check", "scan"])
def test_read_only_command_whose_reader_went_away(tmp_path, command):
    """`vacate check --json | head -c0`: the answer cannot be delivered, so the status is 2
    (not the verdict's), and no traceback is printed."""
    (tmp_path / "f").write_text("x")
    r_fd, w_fd = os.pipe()
    os.close(r_fd)                                  # the reader is gone before we write
    try:
        args = ["check", "--json", "--no-scan", "--no-config"] if command == "check" else \
            ["scan", "--json", "--no-recognise"]
        r = _vacate(*args, str(tmp_path), stdout=w_fd, stderr=subprocess.PIPE)
    finally:
        os.close(w_fd)
    assert r.returncode == EXIT_ERROR
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr


def test_scan_output_is_whole_through_a_pipe(tmp_path):
    """The quick exit flushes first: a large document arrives whole through a pipe."""
    for i in range(300):
        (tmp_path / f"file-{i:04d}-{'x' * 100}").write_text("y" * i)
    r = _vacate("scan", "--json", "--no-recognise", str(tmp_path), capture_output=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["totals"]["files"] == 300


def test_every_dataclass_has_a_docstring():
    """A dataclass without a docstring makes dataclasses ask inspect for its signature, which
    loads inspect (and ast, dis, tokenize) at start-up: every dataclass of vacate has one."""
    import ast
    import pathlib

    import vacate

    missing = []
    for p in pathlib.Path(vacate.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ClassDef) and ast.get_docstring(node) is None
                    and any("dataclass" in ast.unparse(d) for d in node.decorator_list)):
                missing.append(f"{p.name}:{node.lineno} {node.name}")
    assert not missing
