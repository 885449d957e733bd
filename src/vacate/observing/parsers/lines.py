"""Line handling shared by the line-oriented config parsers (fstab, LXC, exports, smb.conf).
Pure, standard library only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from vacate.observing.model.common import Problem

T = TypeVar("T")


def parse_lines(text: str, source: str, parse_line: Callable[[str, int], T | None]
                ) -> tuple[tuple[T, ...], tuple[Problem, ...]]:
    """``parse_line(line, number)`` on every line: None skips it, ValueError becomes a
    ``malformed-config`` problem at ``source:LINE`` and the rest is still read."""
    out: list[T] = []
    problems: list[Problem] = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            value = parse_line(line, n)
        except ValueError as e:
            problems.append(Problem("malformed-config", str(e), f"{source}:{n}"))
            continue
        if value is not None:
            out.append(value)
    return tuple(out), tuple(problems)


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, joined text) with trailing-backslash continuations joined."""
    start, buf = 0, []
    for n, t in enumerate(text.splitlines(), 1):
        if not buf:
            start = n
        if t.rstrip().endswith("\\"):
            buf.append(t.rstrip()[:-1])
            continue
        buf.append(t)
        yield start, " ".join(buf)
        buf = []
    if buf:
        yield start, " ".join(buf)
