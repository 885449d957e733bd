"""The tests' own shape: their folders mirror the packages of ``src/vacate``, and what tests
share lives in the harness package (``tests/harness``), never in a test file that another one
imports."""

from __future__ import annotations

import ast
import os

from harness.paths import SRC, TESTS

# folders of the suite that are not a package of src: the shared harness, the captured
# fixtures, the tests of the harness's own environments, Textual's saved screens
NOT_MIRRORED = {"harness", "fixtures", "lab", "__snapshots__", "__pycache__"}


def test_each_folder_of_tests_is_a_package_of_src():
    strays = []
    for top, dirs, _files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if d not in NOT_MIRRORED]
        rel = os.path.relpath(top, TESTS)
        if rel != "." and not os.path.isfile(os.path.join(SRC, "vacate", rel, "__init__.py")):
            strays.append(rel)
    assert not strays, f"test folders without a package of that name in src/vacate: {strays}"


def _modules_of_tests() -> dict[str, str]:
    """Every Python file of the suite outside the harness, by the name it could be imported
    as when its folder is on sys.path."""
    out = {}
    for top, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if d not in ("harness", "fixtures", "__pycache__")]
        for f in files:
            if f.endswith(".py"):
                out[f[:-3]] = os.path.relpath(os.path.join(top, f), TESTS)
    return out


def _imports(path: str) -> set[str]:
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_no_test_file_is_imported_by_another_nor_by_the_harness():
    tests = _modules_of_tests()
    found = []
    for top, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if d not in ("fixtures", "__pycache__")]
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(top, f)
                found += [f"{os.path.relpath(path, TESTS)} imports {tests[m]}"
                          for m in sorted(_imports(path) & set(tests))]
    assert not found, "share it through tests/harness instead:\n" + "\n".join(found)
