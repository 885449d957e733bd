"""Frames: how a request and its reply cross an ssh session (or any pipe) intact.

A frame is a header line ``TAG LENGTH SHA256``, the body in base64 lines of at most 76
characters, and a line ``TAG-END``. Everything else on the stream is ignored: a login banner,
a shell's greeting, stray stderr, and what a pseudo-terminal does to a stream (``ssh -tt``
turns ``\\n`` into ``\\r\\n`` and echoes the input back). A frame whose body does not have its
length and checksum is :class:`Damaged`, never taken for a reply. Short base64 lines also
pass a terminal's line discipline (4,096 bytes a line) untouched, and hold no byte a terminal
treats as a signal.

Tags differ by direction (``VACATE-BOOT`` and ``VACATE-REQ`` go to the far side,
``VACATE-REP`` comes back), so an echoed request is never read as the reply. Standard library
only: the far side reads and writes frames with this module (its stage repeats the reading
part, since it runs before anything is imported).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import select
import time
import typing

READY = b"VACATE-READY"      # the bootstrap's first line: send nothing before it
BOOT = b"VACATE-BOOT"
REQUEST = b"VACATE-REQ"
REPLY = b"VACATE-REP"
LINE = 76


class Damaged(ValueError):
    """A frame that does not have the length or checksum its header names."""


class Ended(EOFError):
    """The stream ended before a frame of the awaited tag was complete."""


class Silent(Exception):
    """No byte came within the wait allowed (raised by :class:`Deadlined`)."""


class Deadlined(io.RawIOBase):
    """A pipe's read end as a raw stream whose every read waits at most ``stall_s`` seconds,
    and never past ``until`` (a ``time.monotonic()`` instant) where given: then
    :class:`Silent`. Buffered over, its ``readline`` is the C one."""

    def __init__(self, fd: int, stall_s: float, until: float | None = None):
        super().__init__()
        self.fd = fd
        self.stall_s = stall_s
        self.until = until

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        wait = self.stall_s if self.until is None else \
            min(self.stall_s, self.until - time.monotonic())
        if wait <= 0 or not select.select([self.fd], [], [], wait)[0]:
            raise Silent()
        return os.readv(self.fd, [buf])


RAW = LINE // 4 * 3          # the bytes of body one line carries (57)
CHUNK_LINES = 2048           # lines encoded at once: a frame's pieces are ~150 KB each


def pieces(tag: bytes, body) -> typing.Iterator[bytes]:
    """``body`` framed under ``tag``, in pieces to write one after the other: memory in
    proportion to one piece, not to the body (an observation of millions of files)."""
    view = memoryview(body)
    yield b"%s %d %s\n" % (tag, len(view), hashlib.sha256(view).hexdigest().encode())
    step = RAW * CHUNK_LINES
    for at in range(0, len(view), step):
        part = view[at:at + step]
        yield b"".join([binascii.b2a_base64(part[i:i + RAW]) for i in range(0, len(part), RAW)])
    yield tag + b"-END\n"


def frame(tag: bytes, body: bytes) -> bytes:
    """``body`` framed under ``tag``, whole (:func:`pieces` for a large one)."""
    return b"".join(pieces(tag, body))


def wait_for(readline, marker: bytes) -> None:
    """Read lines until one holds ``marker``; :class:`Ended` when the stream ends first."""
    while True:
        line = readline()
        if not line:
            raise Ended(marker.decode())
        if marker in line:
            return


def read_frame(readline, tag: bytes) -> bytes:
    """The body of the next frame tagged ``tag`` read with ``readline()`` (which returns
    b"" at the end). Lines before the header are skipped; within the body, carriage returns
    and blanks are dropped. :class:`Ended` when the stream ends first, :class:`Damaged`
    when the body is not what the header says."""
    head = tag + b" "
    while True:
        line = readline()
        if not line:
            raise Ended(tag.decode())
        at = line.find(head)
        if at < 0:
            continue
        fields = line[at:].split()
        if len(fields) == 3 and fields[1].isdigit():
            break
    length, digest = int(fields[1]), fields[2].decode("ascii", "replace")
    end = tag + b"-END"
    text = bytearray()                  # (one buffer: no object a line)
    while True:
        line = readline()
        if not line:
            raise Ended(tag.decode())
        line = line.strip()
        if line == end:
            break
        text += line
    try:
        body = base64.b64decode(text, validate=True)
    except ValueError:
        raise Damaged("the frame's body is not base64") from None
    if len(body) != length or hashlib.sha256(body).hexdigest() != digest:
        raise Damaged(f"the frame's body is {len(body)} bytes that do not match its header "
                      f"({length} bytes, sha256 {digest[:12]}...)")
    return body
