"""A directory's files as columns, with no Python object per file: the names as one bytes
blob and where each ends, the sizes and modification times as 64-bit integers, and the
orders by each size and by time as 32-bit indices (arrays, or memoryviews of the bytes
they were read from). A name is decoded only when it is
read (the rows on screen), so a directory of a hundred thousand files costs a few arrays.

Files are indexed in name order (the order of the names as ``str``, as the walk's names
compare); the other orders are largest or newest first, equal keys in name order."""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from itertools import accumulate

NO_TIME = -(1 << 63)     # a file whose modification time is not known (shown as none)
COLUMNS = ("apparent", "disk", "mtime")
_ENC = ("utf-8", "surrogateescape")


def _index_array(values=()) -> array:
    a = array("I", values)
    if a.itemsize != 4:      # pragma: no cover (every platform CPython runs on)
        a = array("L", values)
    return a


class Files:
    """The files of one directory. ``head``: the directory's path with a trailing ``/``;
    ``names[base:]``: the names, UTF-8 (surrogate escapes as the walk read them), one after
    another; ``ends[k]``: where name ``k`` ends (from ``base``)."""

    __slots__ = ("apparent", "base", "disk", "ends", "head", "mtime", "names", "orders")

    def __init__(self, head: str, apparent: array, disk: array, mtime: array, names: bytes,
                 ends, base: int = 0, orders: dict | None = None):
        self.head = head
        self.apparent = apparent
        self.disk = disk
        self.mtime = mtime
        self.names = names
        self.ends = ends
        self.base = base
        self.orders = {} if orders is None else orders     # column -> indices, made once

    @classmethod
    def from_rows(cls, head: str, rows) -> Files:
        """From ``(name, apparent, disk, mtime_ns or None)`` rows in name order."""
        names = [r[0].encode(*_ENC) for r in rows]
        return cls(head, array("q", [r[1] for r in rows]), array("q", [r[2] for r in rows]),
                   array("q", [NO_TIME if r[3] is None else r[3] for r in rows]),
                   b"".join(names), _index_array(accumulate(map(len, names))))

    def __len__(self) -> int:
        return len(self.apparent)

    def name(self, k: int) -> str:
        ends, b = self.ends, self.base
        return self.names[b + (ends[k - 1] if k else 0):b + ends[k]].decode(*_ENC)

    def path(self, k: int) -> str:
        return self.head + self.name(k)

    def time(self, k: int) -> float | None:
        t = self.mtime[k]
        return None if t == NO_TIME else t / 1e9

    def row(self, k: int) -> tuple:
        """File ``k`` as a drill-down table row: ``(path, apparent, disk, 1, 0, mtime_ns)``."""
        t = self.mtime[k]
        return (self.path(k), self.apparent[k], self.disk[k], 1, 0, None if t == NO_TIME else t)

    def find(self, name: str) -> int | None:
        """The index of the file called ``name``, or None."""
        k = bisect_left(range(len(self)), name, key=self.name)
        return k if k < len(self) and self.name(k) == name else None

    def column(self, col: str) -> array:
        return getattr(self, col)

    def order(self, col: str) -> array:
        """The indices largest (newest) first by ``col``, equal keys in name order."""
        got = self.orders.get(col)
        if got is None:
            c = self.column(col)
            got = self.orders[col] = _index_array(sorted(range(len(c)), key=c.__getitem__,
                                                         reverse=True))
        return got

    def largest(self, col: str) -> int:
        return self.column(col)[self.order(col)[0]] if len(self) else 0


def pack(files: Files, orders: bool = True) -> bytes:
    """The columns as bytes (little-endian): the count and whether the orders follow (4
    bytes each), the three columns, where each name ends, the three orders (when
    ``orders``: else sorted when first asked for), the names."""
    nums = array("q", files.apparent)
    nums += array("q", files.disk)
    nums += array("q", files.mtime)
    idx = _index_array(files.ends)
    for col in COLUMNS if orders else ():
        idx += _index_array(files.order(col))
    if sys.byteorder != "little":
        nums.byteswap()
        idx.byteswap()
    return len(files).to_bytes(4, "little") + int(orders).to_bytes(4, "little") + \
        nums.tobytes() + idx.tobytes() + files.names[files.base:]


def unpack(data, head: str, start: int = 0, end: int | None = None) -> Files:
    """The columns :func:`pack` wrote, at ``data[start:end]`` (bytes, or a file mapped in
    memory), read where they lie: nothing copied, no name decoded, and of a mapped file only
    the pages read are read from the disk."""
    end = len(data) if end is None else end
    if end > len(data) or end - start < 8:
        raise ValueError("the columns are cut short")
    n = int.from_bytes(data[start:start + 4], "little")
    ordered = int.from_bytes(data[start + 4:start + 8], "little")
    at = start + 8 + 24 * n
    base = at + (16 if ordered else 4) * n
    if end < base:
        raise ValueError("the columns are cut short")
    view = memoryview(data)
    if sys.byteorder == "little":
        nums, idx = view[start + 8:at].cast("q"), view[at:base].cast("I")
    else:                   # pragma: no cover (no big-endian machine runs the tests)
        nums, idx = array("q"), _index_array()
        nums.frombytes(view[start + 8:at])
        idx.frombytes(view[at:base])
        nums.byteswap()
        idx.byteswap()
    if n and idx[n - 1] != end - base:
        raise ValueError("the names do not fill their column")
    orders = {col: idx[(i + 1) * n:(i + 2) * n] for i, col in enumerate(COLUMNS)} \
        if ordered else None
    return Files(head, nums[:n], nums[n:2 * n], nums[2 * n:], data, idx[:n], base, orders)
