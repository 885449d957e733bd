"""The optional C modules (``_fastwalk``, ``_fastproc``, ``_fastst``, and act's ``_fastdel``):
each keeps a loop that also exists in Python. Where one was not built (no compiler at install time, a remote host
given only the collectors) the Python loop runs. Where one was built from other sources than
the Python beside it (its ``VERSION`` is not the one asked for), the install is broken: that
is an error, never a quiet fallback. Standard library only."""

from __future__ import annotations

import importlib
import os

from vacate.observing.errors import VacateError


class StaleBuild(VacateError):
    """A C module built from other sources than the Python that imports it."""


def load(name: str, version: int):
    """The C module ``name``, or None where it was not built or ``$VACATE_NO_C`` is set (the
    Python loops, as on a far host). Raises :class:`StaleBuild` where its ``VERSION`` is not
    ``version``."""
    if os.environ.get("VACATE_NO_C"):
        return None
    try:
        mod = importlib.import_module(name)
    except ImportError:
        return None
    got = getattr(mod, "VERSION", None)
    if got != version:
        built = "has no VERSION" if got is None else f"is version {got!r}"
        raise StaleBuild(f"{mod.__file__} {built}; this vacate needs version {version} of "
                         f"{name} (the module was built from other sources)",
                         hint="rebuild the C modules: pip install . (or build_ext --inplace)")
    return mod
