"""``sha256sum`` file format (GNU coreutils), as bytes: a file name is bytes, not text.

A name holding a backslash, newline or carriage return is escaped (``\\\\``, ``\\n``,
``\\r``) and its line starts with a backslash, exactly as ``sha256sum`` 9.x writes it, so
``sha256sum -c`` reads back the raw name (invalid UTF-8 passes through untouched).
"""

from __future__ import annotations

_ESC = {ord("\\"): b"\\\\", ord("\n"): b"\\n", ord("\r"): b"\\r"}
_UNESC = {b"\\": b"\\", b"n": b"\n", b"r": b"\r"}


def line(hexdigest: str, name: bytes) -> bytes:
    if any(c in name for c in b"\\\n\r"):
        esc = b"".join(_ESC.get(c, bytes((c,))) for c in name)
        return b"\\" + hexdigest.encode() + b"  " + esc + b"\n"
    return hexdigest.encode() + b"  " + name + b"\n"


def parse(data: bytes) -> list[tuple[str, bytes]]:
    """(hexdigest, name) per line; raises ValueError on a malformed line."""
    out = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw:
            continue
        try:
            out.append(parse_line(raw))
        except ValueError:
            raise ValueError(f"line {n}: not a sha256sum line") from None
    return out


_HEX = frozenset(b"0123456789abcdefABCDEF")


def parse_line(raw: bytes) -> tuple[str, bytes]:
    """(hexdigest, name) of one line (without its newline); raises ValueError."""
    escaped = raw.startswith(b"\\")
    if escaped:
        raw = raw[1:]
    digest, sep, name = raw[:64], raw[64:66], raw[66:]
    if sep not in (b"  ", b" *") or len(digest) != 64 or not _HEX.issuperset(digest) \
            or not name:
        raise ValueError("not a sha256sum line")
    if escaped:
        name = _unescape(name)
    return digest.decode("ascii").lower(), name


def _unescape(name: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(name):
        c = name[i:i + 1]
        if c == b"\\" and i + 1 < len(name):
            out += _UNESC.get(name[i + 1:i + 2], name[i:i + 2])
            i += 2
        else:
            out += c
            i += 1
    return bytes(out)
