"""Pure parsers of the file formats the recognisers look at: bytes or text in, values out.

Each raises :class:`FormatError` (with a message for people) on input it cannot trust, and
:class:`Truncated` when it needs more bytes than it was given, so the reader can decide whether
reading more is allowed.
"""


class FormatError(ValueError):
    """The bytes are not what they claim to be."""


class Truncated(FormatError):
    """More bytes are needed than were given (``need``: how many in all, when known)."""

    def __init__(self, message: str, need: int | None = None):
        super().__init__(message)
        self.need = need
