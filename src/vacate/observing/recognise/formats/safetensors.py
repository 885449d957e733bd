"""The safetensors header: ``u64 little-endian N`` then N bytes of JSON naming every tensor's
dtype, shape and byte range. Parameter counts and dtypes come from here, exactly, without
reading any tensor data.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain, compress
from operator import itemgetter, sub
from typing import NamedTuple

from vacate.observing import native
from vacate.observing.compat import SLOTS
from vacate.observing.recognise.formats import FormatError, Truncated, loads

# The safetensors library itself refuses headers above 100 MB.
MAX_HEADER = 100 * 1024 * 1024

DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "I16": 16,
    "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64,
    "F64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "C64": 64,
}
DTYPE_NAMES = {"F16": "fp16", "BF16": "bf16", "F32": "fp32", "F64": "fp64", "F8_E4M3": "fp8",
               "F8_E5M2": "fp8-e5m2", "U8": "u8", "I8": "i8", "I32": "i32", "F4": "fp4"}


class Tensor(NamedTuple):
    """One tensor of a safetensors header: name, dtype, shape, data offsets (a tuple: a big
    model's headers name hundreds of thousands)."""
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True, **SLOTS)
class Header:
    """A safetensors header: its length, its tensors as columns (in the header's order: what
    the recognisers add up, without an object per tensor) and metadata."""
    header_len: int
    names: tuple[str, ...]
    dtypes: tuple[str, ...]
    numels: tuple[int, ...]
    data_len: int                       # where the last tensor's bytes end
    by_dtype: dict[str, int]            # elements of each dtype, in the order met
    metadata: dict[str, str]
    _shapes: tuple = ()
    _offsets: tuple = ()

    @property
    def tensors(self) -> tuple[Tensor, ...]:
        """Every tensor, in the order of its bytes."""
        ts = [Tensor(n, d, tuple(s), o[0], o[1])
              for n, d, s, o in zip(self.names, self.dtypes, self._shapes, self._offsets)]
        ts.sort(key=itemgetter(3))
        return tuple(ts)

    @property
    def file_len(self) -> int:
        """The size the file must have for every tensor's bytes to be there."""
        return 8 + self.header_len + self.data_len

    def numel_by_dtype(self) -> Counter:
        return Counter(self.by_dtype)


def numel_by_dtype(dtypes: Iterable[str], numels: Iterable[int]) -> Counter:
    """The elements of each dtype, from the two columns (of one header, or of several)."""
    dtypes, numels = list(dtypes), list(numels)
    c: Counter = Counter()
    for d in dict.fromkeys(dtypes):  # a few dtypes (in the order met), many tensors: a pass
        # over them for each
        c[d] = sum(compress(numels, map(d.__eq__, dtypes)))
    return c


def header_length(prefix: bytes) -> int:
    """The header length from a file's first 8 bytes; refuses lengths no real file has."""
    if len(prefix) < 8:
        raise Truncated(f"{len(prefix)} bytes, not even the 8-byte header length", 8)
    (n,) = struct.unpack("<Q", prefix[:8])
    if n < 2 or n > MAX_HEADER:
        raise FormatError(f"header length {n} is not plausible (2 .. {MAX_HEADER})")
    return n


def parse(buf: bytes, *, file_size: int | None = None) -> Header:
    """Parse a safetensors header from the start of a file. ``file_size`` (when known) is
    checked against the byte ranges the header claims."""
    n = header_length(buf)
    if len(buf) < 8 + n:
        if file_size is not None and file_size < 8 + n:
            raise FormatError(f"header claims {n} bytes but the file holds {file_size - 8}")
        raise Truncated(f"header needs {n} bytes, have {len(buf) - 8}", 8 + n)
    try:
        obj = loads(buf[8:8 + n])
    except (ValueError, RecursionError) as e:
        raise FormatError(f"header is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise FormatError("header is not a JSON object")
    meta = obj.pop("__metadata__", None) or {}
    if not isinstance(meta, dict):
        raise FormatError("__metadata__ is not an object")
    names, dtypes, numels, shapes, offsets, data_len, by_dtype = _columns(obj)
    h = Header(n, names, dtypes, numels, data_len, by_dtype,
               {str(k): str(v)[:200] for k, v in meta.items()}, shapes, offsets)
    if file_size is not None and h.file_len > file_size:
        raise FormatError(
            f"header places tensor data up to byte {h.file_len} but the file has {file_size}"
            " (truncated, or the header lies)")
    return h


FASTST_VERSION = 1      # the VERSION of _fastst.c this code calls
# the same loop in C (recognise/formats/_fastst.c); None where it was not built
_fastst = native.load("vacate.observing.recognise.formats._fastst", FASTST_VERSION)

_INTS = frozenset({int, bool})      # what JSON's whole numbers (and true/false) become


def _columns(obj: dict) -> tuple:
    """The tensors of a header's JSON object as columns, each checked as :func:`_tensor`
    checks one, but a column at a time (hundreds of thousands of tensors in a big model's
    headers: per tensor, a loop in Python costs several times what decoding the JSON did). Where
    anything is wrong, :func:`_tensor` goes through them one by one to say what. The C loop
    (``_fastst.columns``) makes the same columns, or None for anything not right."""
    if _fastst is not None:
        got = _fastst.columns(obj, DTYPE_BITS)
        if got is not None:
            return got
    names = tuple(obj)
    vals = tuple(obj.values())
    try:
        dtypes = tuple([v["dtype"] for v in vals])
        shapes = tuple([v["shape"] for v in vals])
        offsets = tuple([v["data_offsets"] for v in vals])
        bits = list(map(DTYPE_BITS.__getitem__, dtypes))
        flat = list(chain.from_iterable(shapes))
        if not (set(map(type, dtypes)) <= {str} and set(map(type, shapes)) <= {list}
                and max(map(len, shapes), default=0) <= 16
                and set(map(type, flat)) <= _INTS
                and min(flat, default=0) >= 0 and max(flat, default=0) < 1 << 48
                and set(map(type, offsets)) <= {list} and set(map(len, offsets)) <= {2}):
            raise ValueError
        begins = [o[0] for o in offsets]
        ends = [o[1] for o in offsets]
        if not (set(map(type, begins)) <= _INTS and set(map(type, ends)) <= _INTS
                and min(begins, default=0) >= 0 and max(ends, default=0) < 1 << 56):
            raise ValueError
        numels = tuple(map(math.prod, shapes))
        sizes = [(n * b + 7) // 8 for n, b in zip(numels, bits)]
        if list(map(sub, ends, begins)) != sizes:      # (also: no begin after its end)
            raise ValueError
    except (KeyError, TypeError, ValueError):
        for name, d in obj.items():
            _tensor(name, d)
        raise FormatError("header is not a valid tensor table") from None   # (not reached)
    return (names, dtypes, numels, shapes, offsets, max(ends, default=0),
            dict(numel_by_dtype(dtypes, numels)))


def _tensor(name: str, d: object) -> None:
    if not isinstance(d, dict):
        raise FormatError(f"tensor {name!r}: entry is not an object")
    dtype, shape, offs = d.get("dtype"), d.get("shape"), d.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise FormatError(f"tensor {name!r}: unknown dtype {dtype!r}")
    if (not isinstance(shape, list) or len(shape) > 16
            or not all(isinstance(x, int) and 0 <= x < 1 << 48 for x in shape)):
        raise FormatError(f"tensor {name!r}: bad shape {shape!r}"[:200])
    if (not isinstance(offs, list) or len(offs) != 2
            or not all(isinstance(x, int) and 0 <= x < 1 << 56 for x in offs)
            or offs[0] > offs[1]):
        raise FormatError(f"tensor {name!r}: bad data_offsets {offs!r}"[:200])
    want = math.prod(shape) * DTYPE_BITS[dtype]
    if (want + 7) // 8 != offs[1] - offs[0]:
        raise FormatError(f"tensor {name!r}: {dtype}{list(shape)} needs {(want + 7) // 8} bytes,"
                          f" the header gives it {offs[1] - offs[0]}")
