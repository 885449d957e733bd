"""The send stream's records walked without ZFS (archive/zfs_stream.py), on streams built
here record by record (the layout of OpenZFS zfs_ioctl.h's dmu_replay_record_t)."""

from __future__ import annotations

import struct

import pytest

from vacate.archive.zfs_stream import (
    BEGIN,
    END,
    MAGIC,
    OBJECT,
    RECORD,
    WRITE,
    StreamError,
    Walker,
)


def rec(typ: int, body: bytes = b"", payloadlen: int = 0) -> bytes:
    r = struct.pack("<II", typ, payloadlen) + body
    return r + bytes(RECORD - len(r))


def begin(toguid: int, compound: bool = False, payload: bytes = b"") -> bytes:
    body = struct.pack("<QQQIIQQ", MAGIC, 2 if compound else 1, 1700000000, 2, 0, toguid, 0)
    return rec(BEGIN, body + b"pool/ds@s1", len(payload)) + payload


def stream(toguid: int = 77) -> bytes:
    obj = rec(OBJECT, struct.pack("<QIIII", 1, 19, 0, 512, 5)) + b"bonus\0\0\0"
    write = rec(WRITE, struct.pack("<QIIQQ", 1, 19, 0, 0, 16)) + bytes(range(16))
    return begin(toguid) + obj + write + rec(END)


def walk(data: bytes, piece: int = 7):
    w = Walker()
    for i in range(0, len(data), piece):
        w.feed(data[i:i + piece])
    return w.end()


def test_a_whole_stream_is_walked_to_its_end_in_any_pieces():
    s = stream()
    for piece in (1, 7, RECORD, len(s)):
        w = walk(s, piece)
        assert w.toguids == (77,) and w.records == 4 and w.bytes == len(s)
        assert w.begin.toname == "pool/ds@s1" and not w.begin.compound


def test_a_compound_stream_its_header_substreams_and_last_end():
    nv = b"\x01\x01" + bytes(14)
    s = begin(0, compound=True, payload=nv) + rec(END) + stream(5) + stream(6) + rec(END)
    w = walk(s)
    assert w.begin.compound and w.toguids == (5, 6)


@pytest.mark.parametrize("cut", [1, 8, RECORD, RECORD + 3])
def test_a_stream_cut_short_is_told(cut):
    with pytest.raises(StreamError, match="cut short"):
        walk(stream()[:-cut])


def test_damage_in_the_structure_is_told():
    s = bytearray(stream())
    s[RECORD:RECORD + 4] = b"\x63\0\0\0"              # the OBJECT's record type: none
    with pytest.raises(StreamError, match="no known type"):
        walk(bytes(s))
    with pytest.raises(StreamError, match="after the stream's last END"):
        walk(stream() + rec(WRITE))
    with pytest.raises(StreamError, match="not a zfs send stream"):
        walk(b"\0" * RECORD * 2)
    with pytest.raises(StreamError, match="outside a stream"):
        walk(begin(0, compound=True) + rec(WRITE))
