"""The observing layer as one zip: what ``--host`` sends to a far ``python3`` (imported there
from memory by the stage) and what ``vacate payload`` writes as a zipapp to copy by hand.

Only ``.py`` sources: ``vacate/__init__.py`` and ``vacate/observing/`` (no C modules, which a
zip cannot load; the far side runs the Python loops). The zip is deterministic (sorted names,
fixed times), so the same sources give the same bytes and the same sha256.
"""

from __future__ import annotations

import functools
import io
import os
import zipfile

import vacate

MAIN = (b"import sys\nfrom vacate.observing.__main__ import main\n"
        b"sys.exit(main())\n")
FIXED_TIME = (2020, 1, 1, 0, 0, 0)


def sources() -> list[tuple[str, str]]:
    """(name in the zip, file here) of every source the observing layer needs."""
    top = os.path.dirname(os.path.abspath(vacate.__file__))
    out = [("vacate/__init__.py", os.path.join(top, "__init__.py"))]
    base = os.path.join(top, "observing")
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                out.append(("vacate/" + os.path.relpath(path, top).replace(os.sep, "/"), path))
    return out


@functools.lru_cache(maxsize=2)
def build(zipapp: bool = False) -> bytes:
    """The payload's bytes; ``zipapp``: with a ``__main__.py`` (``python3 FILE.pyz``)."""
    buf = io.BytesIO()
    if zipapp:
        buf.write(b"#!/usr/bin/env python3\n")    # (before the zip: its offsets count it)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, path in sources():
            with open(path, "rb") as f:
                z.writestr(zipfile.ZipInfo(name, FIXED_TIME), f.read(),
                           compress_type=zipfile.ZIP_DEFLATED)
        if zipapp:
            z.writestr(zipfile.ZipInfo("__main__.py", FIXED_TIME), MAIN,
                       compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def stage() -> str:
    """The stage's source (``stage.py`` beside this module)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "stage.py"),
              encoding="utf-8") as f:
        return f.read()
