"""``/etc/fstab`` (fstab(5)) and the fstab-format lines of LXC (``lxc.mount.entry``).

Fields: ``spec file vfstype mntops freq passno``, separated by blanks; space, tab and backslash
inside a field are written as octal escapes (``\\040``). ``#`` starts a comment line; anything
after the sixth field is ignored (libmount does the same, and people put ``# notes`` there).
Pure: text in, values out.
"""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem
from vacate.observing.parsers.lines import parse_lines
from vacate.observing.parsers.mountinfo import unescape
from vacate.observing.parsers.redact import shown_text

# spec prefixes that name a device by a tag (resolved via /dev/disk/by-* or blkid)
TAGS = ("UUID", "LABEL", "PARTUUID", "PARTLABEL", "ID")


@dataclass(frozen=True, **SLOTS)
class FstabEntry:
    """One line of an fstab (or ``lxc.mount.entry``), its fields unescaped."""
    line: int            # 1-based line number in the file
    source: str          # spec, unescaped: /dev/sdb1, UUID=..., /data/x (bind), host:/export
    target: str          # mount point (relative for lxc.mount.entry)
    fstype: str
    options: tuple[str, ...]
    freq: int
    passno: int
    raw: str             # the line as written

    @property
    def tag(self) -> tuple[str, str] | None:
        """``("UUID", "abc")`` for a tagged spec, else None."""
        key, sep, value = self.source.partition("=")
        if sep and key.upper() in TAGS and value:
            return key.upper(), value.strip('"')
        return None

    def has_option(self, name: str) -> bool:
        return name in self.options

    def option(self, name: str) -> str | None:
        for opt in self.options:
            key, sep, value = opt.partition("=")
            if key == name and sep:
                return value
        return None

    @property
    def is_bind(self) -> bool:
        return any(o in ("bind", "rbind") for o in self.options)

    @property
    def is_swap(self) -> bool:
        return self.fstype == "swap"


def parse_line(text: str, line: int = 0) -> FstabEntry | None:
    """One fstab-format line; None for blank and comment lines. Raises ValueError when the
    line has fewer than two fields."""
    stripped = text.strip()
    if not stripped or stripped.startswith("#"):
        return None
    fields = stripped.split()
    if len(fields) < 2:
        raise ValueError(f"fstab line needs at least a source and a mount point: {shown_text(stripped, 120)!r}")
    fields = fields[:6]
    # a trailing "# comment" that starts before the sixth field ends the entry there
    for i, f in enumerate(fields):
        if f.startswith("#") and i >= 2:
            fields = fields[:i]
            break
    fields += [""] * (6 - len(fields))
    spec, target, fstype, opts, freq, passno = fields

    def _num(s: str) -> int:
        return int(s) if s.isdigit() else 0

    return FstabEntry(
        line=line,
        source=unescape(spec),
        target=unescape(target),
        fstype=unescape(fstype) or "auto",
        options=tuple(unescape(o) for o in opts.split(",") if o) or ("defaults",),
        freq=_num(freq),
        passno=_num(passno),
        raw=text.rstrip("\n"),
    )


def parse(text: str, source: str = "fstab") -> tuple[tuple[FstabEntry, ...], tuple[Problem, ...]]:
    """Every entry of an fstab file; malformed lines become problems (``source:LINE``)."""
    return parse_lines(text, source, parse_line)
