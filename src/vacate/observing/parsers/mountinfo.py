"""``/proc/PID/mountinfo`` (proc(5)), parsed as the kernel writes it.

Fields: ``id parent major:minor root mountpoint options [optional...] - fstype source super``.
The kernel escapes space, tab, newline and backslash in root, mountpoint and source as octal
(``\\040``); super options are not always escaped (cifs writes ``unc=\\\\srv\\a b``), so
everything after the source is taken as one field and split on commas.
"""

from __future__ import annotations

from vacate.observing.model.mount import Mount
from vacate.observing.parsers.paths import is_under, unescape  # noqa: F401 (re-exported)


class MountinfoError(ValueError):
    pass


def parse_line(line: str) -> Mount:
    head, sep, tail = line.partition(" - ")
    if not sep:
        raise MountinfoError(f"no ' - ' separator: {line!r}")
    fields = head.split(" ")
    if len(fields) < 6:
        raise MountinfoError(f"too few fields: {line!r}")
    try:
        mount_id, parent_id = int(fields[0]), int(fields[1])
        major_s, _, minor_s = fields[2].partition(":")
        major, minor = int(major_s), int(minor_s)
    except ValueError as e:
        raise MountinfoError(f"bad numbers in {line!r}") from e
    rest = tail.split(" ", 2)
    if len(rest) < 2:
        raise MountinfoError(f"too few fields after separator: {line!r}")
    fstype = unescape(rest[0])
    source = unescape(rest[1])
    super_opts = tuple(rest[2].split(",")) if len(rest) > 2 and rest[2] else ()
    return Mount(
        mount_id=mount_id,
        parent_id=parent_id,
        major=major,
        minor=minor,
        root=unescape(fields[3]),
        mountpoint=unescape(fields[4]),
        options=tuple(fields[5].split(",")),
        optional=tuple(f for f in fields[6:] if f),
        fstype=fstype,
        source=source,
        super_options=super_opts,
    )


def parse(text: str) -> tuple[tuple[Mount, ...], tuple[str, ...]]:
    """Parse a whole mountinfo file. Returns the mounts and the lines that could not be parsed
    (with their line numbers), so a caller can warn instead of failing."""
    mounts: list[Mount] = []
    bad: list[str] = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            mounts.append(parse_line(line))
        except MountinfoError as e:
            bad.append(f"line {n}: {e}")
    return tuple(mounts), tuple(bad)
