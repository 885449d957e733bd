"""The observing layer as one zip: what ``--host`` sends to a far ``python3`` (imported there
from memory by the bootstrap) and what ``vacate payload`` writes as a zipapp to copy by hand.

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


# what the acting half adds for ``apply`` on a far host: the act modules and the archive
# writer and reader (all standard library; zstd's command where the zstandard module is
# missing; the sentence a manual step says is observing's, model/sentence.py)
ACT_PARTS = ("act", "archive")
ACT_LEFT = ("archive/s3.py",)


def sources(act: bool = False) -> list[tuple[str, str]]:
    """(name in the zip, file here) of every source the observing layer needs; with ``act``,
    also those the far side of an apply runs (:data:`ACT_PARTS`)."""
    top = os.path.dirname(os.path.abspath(vacate.__file__))
    out = [("vacate/__init__.py", os.path.join(top, "__init__.py"))]
    for part in ("observing",) + (ACT_PARTS if act else ()):
        base = os.path.join(top, part)
        if os.path.isfile(base):
            out.append(("vacate/" + part, base))
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                rel = os.path.relpath(os.path.join(dirpath, name), top).replace(os.sep, "/")
                if name.endswith(".py") and rel not in ACT_LEFT:
                    out.append(("vacate/" + rel, os.path.join(dirpath, name)))
    return out


@functools.lru_cache(maxsize=2)
def build(zipapp: bool = False, act: bool = False) -> bytes:
    """The payload's bytes; ``zipapp``: with a ``__main__.py`` (``python3 FILE.pyz``);
    ``act``: with the acting half, for ``apply`` (:func:`sources`)."""
    buf = io.BytesIO()
    if zipapp:
        buf.write(b"#!/usr/bin/env python3\n")    # (before the zip: its offsets count it)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, path in sources(act):
            with open(path, "rb") as f:
                z.writestr(zipfile.ZipInfo(name, FIXED_TIME), f.read(),
                           compress_type=zipfile.ZIP_DEFLATED)
        if zipapp:
            z.writestr(zipfile.ZipInfo("__main__.py", FIXED_TIME), MAIN,
                       compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def bootstrap() -> str:
    """The bootstrap's source (``bootstrap.py`` beside this module)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "bootstrap.py"),
              encoding="utf-8") as f:
        return f.read()
