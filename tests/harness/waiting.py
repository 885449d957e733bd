"""Waiting for something a real process does (a unit to start, a server to map its model)."""

from __future__ import annotations

import time


def wait_for(cond, what: str, timeout: float = 20.0):
    """``cond()``'s first true value, asked every 50 ms; AssertionError naming ``what`` when
    it stays false for ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
