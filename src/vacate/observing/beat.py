"""What this process is doing now, in a few words and two counters: what a far worker's
heartbeat says (:mod:`vacate.observing.worker` sends it every few seconds while it answers a
request, and at once when the phase changes). The collectors name their phase
(:func:`doing`) and the long loops count what they have done (:func:`counted`); reading it
(:func:`now`) costs nothing, and nobody has to.
Standard library only.
"""

from __future__ import annotations

_state = {"doing": "", "entries": 0, "bytes": 0}
_told: list = []                 # who is told at once of a new phase (a far worker's beat)


def doing(what: str) -> None:
    """This process now does ``what`` ("walking /data", "reading units", ...)."""
    _state["doing"] = what
    for tell in _told:
        tell()


def tell(fn) -> None:
    """Call ``fn()`` whenever the phase changes (None: no one any more)."""
    _told[:] = [] if fn is None else [fn]


def counted(entries: int, nbytes: int) -> None:
    """So far, in the phase at hand: ``entries`` entries, ``nbytes`` bytes (a walk's progress
    callback)."""
    _state["entries"] = entries
    _state["bytes"] = nbytes


def begin(what: str = "") -> None:
    """A new piece of work: nothing counted yet."""
    _state.update(doing=what, entries=0, bytes=0)


def now() -> dict:
    """``{"doing", "entries", "bytes"}`` as things stand."""
    return dict(_state)
