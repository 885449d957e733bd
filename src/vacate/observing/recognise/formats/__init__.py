"""Pure parsers of the file formats the recognisers look at: bytes or text in, values out.

Each raises :class:`FormatError` (with a message for people) on input it cannot trust, and
:class:`Truncated` when it needs more bytes than it was given, so the reader can decide whether
reading more is allowed.
"""

from __future__ import annotations

import json

try:
    import orjson
except ImportError:             # (a dependency; json does the same, about half as fast)
    orjson = None


def loads(data: bytes | str):
    """``json.loads``, through orjson where it takes the document (twice as fast: a hub
    cache's safetensors headers and shard indexes are tens of MB of JSON). What orjson
    refuses and json takes (integers beyond 64 bits, lone surrogates, NaN, nesting beyond
    1024) is left to json, which raises as it always did on what it refuses too."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


class FormatError(ValueError):
    """The bytes are not what they claim to be."""


class Truncated(FormatError):
    """More bytes are needed than were given (``need``: how many in all, when known)."""

    def __init__(self, message: str, need: int | None = None):
        super().__init__(message)
        self.need = need
