"""``/etc/passwd`` (passwd(5)): ``name:password:UID:GID:GECOS:home:shell`` a line.

Lines without a numeric UID (comments, blank lines, NIS ``+``/``-`` entries) are skipped; a
line with fewer than seven fields keeps what it has (an empty home or shell). Pure, standard
library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS

NOBODY = 65534


@dataclass(frozen=True, **SLOTS)
class User:
    """One account of ``/etc/passwd``."""
    name: str
    uid: int
    gid: int | None
    home: str
    shell: str
    line: int


def parse(text: str) -> list[User]:
    """Every account, in file order (a UID may repeat: the first is the one ``getpwuid``
    answers with)."""
    out: list[User] = []
    for n, line in enumerate(text.splitlines(), 1):
        f = line.split(":")
        if len(f) < 3 or not f[2].isdigit() or f[0][:1] in ("+", "-", "#", ""):
            continue
        f += [""] * (7 - len(f))
        out.append(User(f[0], int(f[2]), int(f[3]) if f[3].isdigit() else None, f[5], f[6], n))
    return out


def names(users: list[User]) -> dict[int, str]:
    """UID -> name, the first entry of each UID winning."""
    out: dict[int, str] = {}
    for u in users:
        out.setdefault(u.uid, u.name)
    return out
