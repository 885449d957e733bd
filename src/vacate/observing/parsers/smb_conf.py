"""Samba ``smb.conf`` (smb.conf(5)): ``[section]`` headers and ``name = value`` parameters.

Names are case-insensitive and blanks inside them do not matter (``read only`` = ``readonly``);
``#`` and ``;`` start comment lines; a trailing ``\\`` continues a line. ``include = FILE``
lines are returned in place (with the section they appear in) for the collector to follow.
Pure: text in, values out.
"""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem
from vacate.observing.parsers.lines import logical_lines
from vacate.observing.parsers.redact import shown_text

# parameter synonyms (smb.conf(5))
SYNONYMS = {"directory": "path", "writeable": "writable", "writeok": "writable",
            "readonly": "readonly"}


@dataclass(frozen=True, **SLOTS)
class SmbParam:
    """One parameter of smb.conf, in its section."""
    line: int
    section: str       # section name as written ("global", "homes", share names)
    name: str          # normalised: lower case, no blanks, synonyms mapped
    value: str
    raw: str


def norm_name(name: str) -> str:
    n = "".join(name.split()).lower()
    return SYNONYMS.get(n, n)


def parse(text: str, source: str = "smb.conf") -> tuple[tuple[SmbParam, ...], tuple[Problem, ...]]:
    params: list[SmbParam] = []
    problems: list[Problem] = []
    section = "global"
    for start, logical in logical_lines(text):
        s = logical.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("["):
            end = s.find("]")
            if end < 0:
                problems.append(Problem("malformed-config", f"unterminated section: {shown_text(s, 120)!r}",
                                        f"{source}:{start}"))
                continue
            section = s[1:end].strip()
            continue
        name, sep, value = s.partition("=")
        if not sep or not name.strip():
            problems.append(Problem("malformed-config", f"not a name = value line: {shown_text(s, 120)!r}",
                                    f"{source}:{start}"))
            continue
        params.append(SmbParam(start, section, norm_name(name), value.strip(), logical))
    return tuple(params), tuple(problems)
