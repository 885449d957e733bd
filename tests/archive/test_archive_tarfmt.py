"""The lean header of small files writes exactly what the general ``header()`` writes, for the
common case and for every field that sends it back to the general path."""

import itertools

from vacate.archive import tarfmt

PATHS = [b"t/a.json", b"t/" + b"n" * 97, b"t/" + b"n" * 98, b"t/new\nline", b"t/bad\xff",
         "t/名前".encode(), b"t/nul\0x"]
SIZES = [0, 1, 512, 8 ** 11 - 1, 8 ** 11]
IDS = [(0, 0), (1000, 100), (8 ** 7 - 1, 0), (8 ** 7, 8 ** 7)]
NAMES = [(b"root", b"root"), (b"", b""), (b"u" * 31, b"g"), (b"u" * 32, "é".encode())]
MTIMES = [0, 1_764_550_000_000_000_000, 1_764_550_000_123_456_789, -1_500_000_000]


def test_file_header_is_the_general_header():
    for path, size, (uid, gid), (uname, gname), mtime in itertools.product(
            PATHS, SIZES, IDS, NAMES, MTIMES):
        fast = tarfmt.file_header(path, size, 0o640, uid, gid, uname, gname, mtime)
        general = tarfmt.header(tarfmt.Member(path=path, type="file", size=size, mode=0o640,
                                              uid=uid, gid=gid, uname=uname, gname=gname,
                                              mtime_ns=mtime))
        assert fast == general, (path, size, uid, gid, uname, gname, mtime)
        # every 512-byte ustar block carries a checksum that a reader accepts
        tarfmt.parse_ustar(fast[:512])
        tarfmt.parse_ustar(fast[-512:])
