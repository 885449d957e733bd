"""Human sizes and ages."""

from __future__ import annotations

import time


def human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    step = 1000.0
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(n) < step or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= step
    return f"{n} B"


def human_age(ts: float | None, now: float | None = None) -> str:
    if ts is None:
        return "-"
    d = (now if now is not None else time.time()) - ts
    if d < 0:
        return "in the future"
    for secs, unit in ((86400 * 365, "y"), (86400 * 30, "mo"), (86400, "d"), (3600, "h"),
                       (60, "min")):
        if d >= secs:
            return f"{d / secs:.0f} {unit} ago"
    return "just now"


def human_duration(seconds: float) -> str:
    """``42 s``, ``3 min``, ``1 h 10 min``."""
    s = round(seconds)
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{round(s / 60)} min"
    h, rem = divmod(s, 3600)
    return f"{h} h {round(rem / 60)} min"
