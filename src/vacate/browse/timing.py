"""How long a keypress takes to answer, measured inside the app: from the key event's
arrival (the time Textual stamps on it when the input thread has read the bytes) to each
screen update written to the terminal after it. Off unless ``VACATE_BROWSE_TIMING`` names
a file; then one line per update is appended to it, ``<n>\\t<key>\\t<ms>`` (the n-th key
since start, the key, milliseconds since the key arrived). The key's answer is its last
line: keys sent apart from each other (as ``bench/browse/bench_keys.py`` sends them) leave
nothing else on the screen to update."""

from __future__ import annotations

import os
import time

ENV = "VACATE_BROWSE_TIMING"
WINDOW = 5.0      # updates this long after a key still count as its answer


class KeyTimes:
    """The log, open while the app runs; ``None`` from :func:`from_env` when it is off."""

    def __init__(self, path: str):
        self._out = open(path, "a", buffering=1)  # noqa: SIM115 (lives with the app)
        self._n = 0
        self._key = ""
        self._at: float | None = None

    def key(self, name: str, at: float) -> None:
        """A key arrived at ``at`` (the event's time, ``time.monotonic``'s clock)."""
        self._n += 1
        self._key = name
        self._at = at

    def displayed(self) -> None:
        if self._at is None:
            return
        ms = (time.monotonic() - self._at) * 1000
        if ms > WINDOW * 1000:
            self._at = None
            return
        self._out.write(f"{self._n}\t{self._key}\t{ms:.2f}\n")


def from_env() -> KeyTimes | None:
    path = os.environ.get(ENV)
    return KeyTimes(path) if path else None
