"""What the tests need from the test extra (pyproject.toml's ``test``, installed by
``scripts/test-deps.sh``): missing, the test fails, naming what to install. A skip would read
as "not applicable here" in CI while a whole part of vacate went untested; skips are for what
a machine truly cannot have (no root, no loop devices, no Debian package)."""

from __future__ import annotations

import importlib

import pytest

from vacate.observing import tools


def tool(name: str, package: str) -> str:
    """The command ``name`` that the test extra's ``package`` installs, found as vacate finds
    it (beside the interpreter, then on PATH); the test fails where it is missing."""
    found = tools.which(name)
    if found is None:
        pytest.fail(f"{tools.looked(name)}: it comes with {package}, a declared test extra "
                    "(pip install -e '.[test]', or scripts/test-deps.sh)", pytrace=False)
    return found


def module(name: str, package: str | None = None):
    """The module ``name`` of the test extra; the test fails where it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        pytest.fail(f"cannot import {name} ({e}): {package or name} is a declared test extra "
                    "(pip install -e '.[test]', or scripts/test-deps.sh)", pytrace=False)
