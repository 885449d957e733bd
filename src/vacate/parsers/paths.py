"""Path text as the kernel writes it: prefix tests and octal unescaping. No imports beyond the
standard library, and ``re`` only when there is something to unescape: the first look over
/proc (:mod:`vacate.collectors.procs_probe`) uses these before the rest of vacate is imported."""

from __future__ import annotations


def is_under(path: str, top: str) -> bool:
    """``path`` is ``top`` or inside it (purely by name)."""
    if top == "/":
        return path.startswith("/")
    return path == top or path.startswith(top.rstrip("/") + "/")


def unescape(field: str) -> str:
    """Undo the kernel's octal escapes (``\\040`` -> space). Bytes above 0x7f stay as they are
    in the surrogate-escaped string, so the result round-trips through ``os.fsencode``."""
    if "\\" not in field:
        return field
    import re

    raw = field.encode("utf-8", "surrogateescape")
    raw = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8) & 0xFF]), raw)
    return raw.decode("utf-8", "surrogateescape")
