"""What verify and restore find: one named :class:`Finding` each, and the exit code they
make."""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.errors import EXIT_IN_USE, EXIT_OK, EXIT_UNKNOWN


@dataclass(frozen=True, **SLOTS)
class Finding:
    """One thing that does not match. ``code``: manifest-damaged, manifest-unreadable,
    part-missing, part-not-a-file, part-unreadable, part-truncated, part-corrupt,
    part-checksum, part-unlisted, file-checksum, member-missing, member-unexpected,
    member-metadata, sums-mismatch, sums-unreadable, source-changed, source-missing,
    source-extra; a native archive's: stream-damaged, received-mismatch, tree-damaged,
    source-unreadable; restore adds not-restored, and notes what it withheld on purpose
    (device-not-created, setid-dropped)."""

    code: str
    message: str
    path: str | None = None
    part: str | None = None

    def as_json(self) -> dict:
        return {"code": self.code, "message": self.message, "path": self.path,
                "part": self.part}


# what could not be read: the answer is "could not tell" (exit 3), unless something else
# was found to be wrong
UNREADABLE = frozenset({"manifest-unreadable", "part-unreadable", "sums-unreadable",
                        "source-unreadable"})


def exit_code(findings) -> int:
    """0 nothing found, 1 a mismatch or damage, 3 only what could not be read."""
    if not findings:
        return EXIT_OK
    return EXIT_UNKNOWN if all(f.code in UNREADABLE for f in findings) else EXIT_IN_USE
