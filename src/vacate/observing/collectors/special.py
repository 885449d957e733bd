"""What a top-level entry that holds no data of its own is (a link, a FIFO, a socket, a
device node), from one ``lstat``: never opened (a FIFO would block). Used wherever items are
made: the recognisers, a sizes-only scan, ``check --no-scan``'s listing. Standard library
only."""

from __future__ import annotations

import os
import stat

from vacate.observing.fsio import file_kind
from vacate.observing.model.inventory import Classification

# what a file that holds no data is, by its type: never opened (a FIFO would block)
_SPECIAL = ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device"),
            (stat.S_ISBLK, "device"))


def special_file(path: str) -> Classification | None:
    """What a top-level entry that is not a directory or a regular file is: a symbolic link
    (what is here, not what it points at, which is elsewhere or an item of its own), a FIFO,
    a socket or a device node; None for a regular file (or one that is gone)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        try:
            to = os.readlink(path)
        except OSError:
            to = "?"
        return Classification("file", f"symbolic link to {to}", confidence=0.95,
                              evidence=("lstat",), details={"link_target": to})
    for test, label in _SPECIAL:
        if test(mode):
            return Classification(label, label, confidence=0.95, evidence=("lstat",),
                                  details={"file_type": file_kind(mode)})
    return None
