"""File names as the report shows them, and hidden.

A name on a volume is any bytes but ``/`` and NUL: it may hold a newline, a right-to-left
mark, markup, or bytes that are not UTF-8 (kept as lone surrogates ``\\udcXX`` by
``surrogateescape``). :func:`shown` makes it one line of plain text: undecodable bytes as
``\\xNN``, control characters as ``\\n``, ``\\t`` or ``\\xNN``, right-to-left and other bidi
controls as ``\\u202e`` (shown, not obeyed: ``gnp.exe`` must not read as ``exe.png``); what is left is still
hostile (``<img onerror=…>``) and is escaped where it is written (Jinja2's autoescape, rich's
Text).

:class:`Hider` is ``--hide-names``: every path on the volume below its top level becomes its
top-level name and ``…``, and so does the rest of the line after it (a name may hold
spaces and quotes: hiding too much is the safe side; the treemap shows such an entry as its kind and size), in every
string of the report — evidence, command lines, config lines, restore commands."""

from __future__ import annotations

import re

_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BAD = re.compile(r"[\udc80-\udcff\x00-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _one(m: re.Match) -> str:
    c = m.group()
    if c in _CONTROL:
        return _CONTROL[c]
    o = ord(c)
    if 0x2000 <= o < 0x2100:                   # a bidi control: shown, not obeyed
        return f"\\u{o:04x}"
    return f"\\x{o - 0xdc00 if o >= 0xdc00 else o:02x}"


def shown(s: str) -> str:
    """``s`` as one line of text (see the module's docstring)."""
    return _BAD.sub(_one, s) if _BAD.search(s) else s


HIDDEN = "…"


class Hider:
    """Hides the names below the top level of the volume at ``target`` whose top-level
    entries are ``tops`` (their names); see the module's docstring."""

    def __init__(self, target: str, tops):
        self.target = target.rstrip("/")
        names = sorted({t for t in tops if t}, key=len, reverse=True)
        alt = "|".join(re.escape(n) for n in names) or r"(?!x)x"
        # an absolute path on the volume with something below its top level ...
        self._abs = re.compile(re.escape(self.target) + r"/([^/\n]+)/[^\n]+")
        # ... and the same path relative to the volume (archive members, restore commands)
        self._rel = re.compile(r"(?<![\w./-])(" + alt + r")/[^\n]+")

    def text(self, s: str) -> str:
        if s.startswith(self.target + "/"):         # a path, whatever its name holds
            top, *below = s[len(self.target) + 1:].split("/", 1)
            return f"{self.target}/{top}/{HIDDEN}" if below else s
        s = self._abs.sub(lambda m: f"{self.target}/{m.group(1)}/{HIDDEN}", s)
        return self._rel.sub(lambda m: f"{m.group(1)}/{HIDDEN}", s)

    def all(self, value):
        """``value`` (a JSON-like document) with :meth:`text` applied to every string."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.all(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.all(v) for v in value]
        return value
