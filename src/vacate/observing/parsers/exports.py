"""NFS exports: ``/etc/exports`` and ``/etc/exports.d/*.exports`` (exports(5)).

``PATH [-DEFAULTOPTS] [CLIENT[(OPTS)]]...``; ``#`` starts a comment (to the end of the line);
a trailing ``\\`` continues the line; the path may be double-quoted and may carry octal escapes
(``\\040``). Pure: text in, values out.
"""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem
from vacate.observing.parsers.lines import logical_lines
from vacate.observing.parsers.mountinfo import unescape
from vacate.observing.parsers.redact import shown_text


@dataclass(frozen=True, **SLOTS)
class Export:
    """One export of /etc/exports (or exports.d, etab): its path and clients."""
    line: int                                     # first line of the entry
    path: str
    clients: tuple[tuple[str, str], ...]          # (host, options); host "" for -defaults
    raw: str


def _strip_comment(s: str) -> str:
    quoted = False
    for i, ch in enumerate(s):
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            return s[:i]
    return s


def parse(text: str, source: str = "exports") -> tuple[tuple[Export, ...], tuple[Problem, ...]]:
    out: list[Export] = []
    problems: list[Problem] = []
    for n, logical in logical_lines(text):
        s = _strip_comment(logical).strip()
        if not s:
            continue
        if s.startswith('"'):
            end = s.find('"', 1)
            if end < 0:
                problems.append(Problem("malformed-config", f"unterminated quote: {shown_text(s, 120)!r}",
                                        f"{source}:{n}"))
                continue
            words = [s[1:end], *s[end + 1:].split()]
        else:
            words = s.split()
        path = unescape(words[0])
        if not path.startswith("/"):
            problems.append(Problem("malformed-config", f"export path is not absolute: {shown_text(s, 120)!r}",
                                    f"{source}:{n}"))
            continue
        clients: list[tuple[str, str]] = []
        for w in words[1:]:
            if w.startswith("-"):
                clients.append(("", w[1:]))
                continue
            host, _, opts = w.partition("(")
            clients.append((host, opts.rstrip(")")))
        out.append(Export(n, path, tuple(clients), logical))
    return tuple(out), tuple(problems)
