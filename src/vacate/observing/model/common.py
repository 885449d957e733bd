"""Values shared by every result."""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS


@dataclass(frozen=True, **SLOTS)
class Problem:
    """Something that could not be read or looked wrong; kept inside the result, never raised.

    ``code`` is stable and machine-readable (``unreadable-dir``, ``vanished``, ``symlink-loop``,
    ``permission-denied``, ``malformed-config``, ...); ``message`` is for people.
    ``blocks_verdict`` marks problems that make a safety verdict impossible ("could not tell").
    """

    code: str
    message: str
    path: str | None = None
    blocks_verdict: bool = False

    def as_json(self) -> dict:
        d = {"code": self.code, "message": self.message, "path": self.path}
        if self.blocks_verdict:
            d["blocks_verdict"] = True
        return d
