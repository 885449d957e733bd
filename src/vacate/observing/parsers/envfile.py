"""``KEY=value`` environment files as systemd's ``EnvironmentFile=`` reads them (also the shape of
``/etc/environment`` and ``/etc/default/*``).

Blank lines and lines starting with ``#`` or ``;`` are comments; ``export`` before a key is
allowed; values may be ``"double quoted"`` (``\\`` escapes ``"``, ``\\``, `````, ``$`` and a
newline), ``'single quoted'`` (literal, may span lines) or bare (a backslash escapes the next
character, a backslash at the end of the line continues it; trailing blanks are dropped).
Pure, standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.parsers.redact import shown_text

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


@dataclass(frozen=True, **SLOTS)
class EnvAssignment:
    """One ``KEY=value`` of an environment file."""
    key: str
    value: str
    line: int      # 1-based line where the assignment starts
    text: str      # the source text of the assignment (for evidence; redact before showing)


def _value(text: str, i: int) -> tuple[str, int]:
    """Read a value starting at ``text[i]``; returns it and the index after it."""
    out: list[str] = []
    n = len(text)
    pending_ws: list[str] = []
    while i < n and text[i] in " \t":
        i += 1
    while i < n:
        c = text[i]
        if c == "\n":
            break
        if c == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j
            out.extend(pending_ws)
            pending_ws = []
            out.append(text[i + 1:j])
            i = j + 1
            continue
        if c == '"':
            i += 1
            out.extend(pending_ws)
            pending_ws = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    if nxt == "\n":
                        i += 2
                        continue
                    if nxt in '"\\`$':
                        out.append(nxt)
                        i += 2
                        continue
                out.append(text[i])
                i += 1
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                i += 2
                continue
            out.extend(pending_ws)
            pending_ws = []
            out.append(text[i + 1])
            i += 2
            continue
        if c in " \t":
            pending_ws.append(c)
        else:
            out.extend(pending_ws)
            pending_ws = []
            out.append(c)
        i += 1
    return "".join(out), i


def parse(text: str) -> tuple[tuple[EnvAssignment, ...], tuple[str, ...]]:
    """Assignments in file order, and warnings for lines that are not assignments."""
    result: list[EnvAssignment] = []
    warnings: list[str] = []
    i, n = 0, len(text)
    line = 1
    while i < n:
        eol = text.find("\n", i)
        eol = n if eol < 0 else eol
        stripped = text[i:eol].strip()
        if not stripped or stripped[0] in "#;":
            i, line = eol + 1, line + 1
            continue
        j = i
        while text[j] in " \t":
            j += 1
        if text.startswith("export", j) and text[j + 6:j + 7] in (" ", "\t"):
            j += 6
            while text[j] in " \t":
                j += 1
        m = _KEY.match(text, j)
        k = m.end() if m else j
        while k < n and text[k] in " \t":
            k += 1
        if not m or k >= n or text[k] != "=":
            warnings.append(f"line {line}: not an assignment: {shown_text(stripped, 80)!r}")
            i, line = eol + 1, line + 1
            continue
        value, end = _value(text, k + 1)
        result.append(EnvAssignment(m.group(0), value, line, text[i:end].strip()))
        line += text.count("\n", i, end) + 1
        i = end + 1
    return tuple(result), tuple(warnings)


def as_dict(assignments: tuple[EnvAssignment, ...]) -> dict[str, str]:
    """The environment the file sets (a later assignment wins)."""
    return {a.key: a.value for a in assignments}
