"""The ``zfs send`` stream's records (``dmu_replay_record_t``, OpenZFS ``zfs_ioctl.h``), read
without ZFS: the BEGIN record's toguid, and the whole stream walked record by record to its
END, so that a stream cut short or changed in its structure is told without receiving it.

Every record is 312 bytes: ``drr_type`` (u32), ``drr_payloadlen`` (u32), then the union.
BEGIN: magic (u64 ``0x2F5bacbac``), versioninfo (u64: the low 2 bits are 1 for one dataset's
stream, 2 for a compound one — ``-R``/``-p`` — whose BEGIN carries an nvlist payload and whose
substreams each have their own BEGIN … END), creation time, type, flags, toguid, fromguid,
toname[256]. The records after it carry data: OBJECT a bonus buffer (``drr_bonuslen`` rounded
up to 8), WRITE and SPILL ``drr_length`` bytes; END holds the stream's checksum and toguid.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from vacate.observing.compat import SLOTS

RECORD = 312
MAGIC = 0x2F5BACBAC
BEGIN, OBJECT, FREEOBJECTS, WRITE, FREE, END, WRITE_BYREF, SPILL = range(8)
_NAMES = ("BEGIN", "OBJECT", "FREEOBJECTS", "WRITE", "FREE", "END", "WRITE_BYREF", "SPILL")
MAX_PAYLOAD = 1 << 26          # no record carries more (a block is at most 16 MiB)
_BEGIN = struct.Struct("<IIQQQIIQQ256s")


class StreamError(ValueError):
    """The stream is not a whole ``zfs send`` stream (the message says where)."""


@dataclass(frozen=True, **SLOTS)
class Begin:
    """A send stream's DRR_BEGIN record: what the stream is of."""

    compound: bool
    creation: int
    toguid: int
    fromguid: int
    toname: str


@dataclass(frozen=True, **SLOTS)
class Walked:
    """What walking the stream found: its first BEGIN, each substream's toguid, how many
    records and bytes."""
    begin: Begin
    toguids: tuple[int, ...]
    records: int
    bytes: int


def parse_begin(rec: bytes) -> Begin:
    if len(rec) < RECORD:
        raise StreamError(f"the stream is {len(rec)} bytes, shorter than its BEGIN record")
    typ, _plen, magic, vinfo, ctime, _ot, _fl, toguid, fromguid, name = _BEGIN.unpack_from(rec)
    if typ != BEGIN or magic != MAGIC:
        raise StreamError("not a zfs send stream (no BEGIN record with the stream's magic "
                          "at its start; a byte-swapped stream is not read here)")
    return Begin((vinfo & 3) == 2, ctime, toguid, fromguid,
                 name.split(b"\0", 1)[0].decode("utf-8", "replace"))


def _u64(rec: bytes, off: int) -> int:
    return int.from_bytes(rec[off:off + 8], "little")


def _payload(typ: int, plen: int, rec: bytes) -> int:
    """Bytes of data that follow a record."""
    if typ == BEGIN:
        return plen
    if typ == OBJECT:          # drr_object: object, type, bonustype, blksz, bonuslen
        bonuslen = int.from_bytes(rec[28:32], "little")
        return (bonuslen + 7) & ~7
    if typ == WRITE:           # drr_write: object, type(+pad), offset, length
        return _u64(rec, 32)
    if typ == SPILL:           # drr_spill: object, length
        return _u64(rec, 16)
    return 0


class Walker:
    """Fed the stream's bytes in any pieces (``feed``), then ``end()``: walks every record,
    checking each type, the BEGIN/END nesting and that the stream ends with its END."""

    def __init__(self):
        self.buf = bytearray()
        self.skip = 0                 # payload bytes still to pass over
        self.depth = 0                # 1 inside a (sub)stream
        self.header_open = False      # a compound stream's header, before its END
        self.compound = False
        self.done = False
        self.begin: Begin | None = None
        self.toguids: list[int] = []
        self.records = 0
        self.offset = 0               # bytes consumed so far

    def feed(self, data) -> None:
        mv = memoryview(data)
        while mv:
            if self.skip:
                k = min(self.skip, len(mv))
                self.skip -= k
                self.offset += k
                self._data(mv[:k], not self.skip)
                mv = mv[k:]
                continue
            need = RECORD - len(self.buf)
            self.buf += mv[:need]
            mv = mv[need:]
            if len(self.buf) == RECORD:
                rec = bytes(self.buf)
                self.buf.clear()
                self._record(rec)

    def _record(self, rec: bytes) -> None:
        at = self.offset
        self.offset += RECORD
        if self.done:
            raise StreamError(f"data after the stream's last END record (byte {at:,})")
        typ, plen = struct.unpack_from("<II", rec)
        if typ >= len(_NAMES):
            raise StreamError(f"record {self.records + 1} (byte {at:,}) has no known type "
                              f"({typ}): the stream is damaged")
        self.records += 1
        if typ == BEGIN:
            b = parse_begin(rec)
            if self.begin is None:
                self.begin, self.compound = b, b.compound
                self.header_open = b.compound      # its nvlist, closed by an END
                self.depth = 0 if b.compound else 1
                if not b.compound:
                    self.toguids.append(b.toguid)
            elif self.compound and not self.header_open and self.depth == 0:
                self.depth = 1                     # a substream of a compound stream
                self.toguids.append(b.toguid)
            else:
                raise StreamError(f"a BEGIN record inside a stream (byte {at:,})")
        elif typ == END:
            if self.begin is None:
                raise StreamError(f"an END record with no BEGIN (byte {at:,})")
            if self.header_open:
                self.header_open = False
            elif self.depth == 1:
                self.depth = 0
                self.done = not self.compound
            else:
                self.done = True                   # a compound stream's last END
        elif self.depth != 1:
            raise StreamError(f"a {_NAMES[typ]} record outside a stream (byte {at:,})")
        n = _payload(typ, plen, rec)
        if n > MAX_PAYLOAD:
            raise StreamError(f"record {self.records} ({_NAMES[typ]}, byte {at:,}) says "
                              f"{n:,} bytes follow, more than any record carries")
        self.skip = n
        self._took(typ, rec, n)

    def _took(self, typ: int, rec: bytes, payload: int) -> None:
        """A record walked, ``payload`` bytes of data to follow (for a subclass)."""

    def _data(self, piece: memoryview, last: bool) -> None:
        """A piece of the last record's data, ``last`` where it is the end of it (for a
        subclass)."""

    def end(self) -> Walked:
        if self.begin is None:
            raise StreamError("the stream is empty")
        if not self.done or self.skip or self.buf:
            raise StreamError(f"the stream ends at byte {self.offset + len(self.buf):,} "
                              "before its END record: it was cut short")
        return Walked(self.begin, tuple(self.toguids), self.records, self.offset)
