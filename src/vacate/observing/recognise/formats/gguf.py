"""The GGUF header: magic, version, key/value metadata, tensor infos. Architecture, name,
file type and the parameter count (sum of tensor element counts) come from here."""

from __future__ import annotations

import math
import struct
from collections import Counter
from dataclasses import dataclass
from typing import Any

from vacate.observing.compat import SLOTS
from vacate.observing.recognise.formats import FormatError, Truncated

GGML_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
    10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
    17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
    23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16",
    34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4", 40: "NVFP4",
}
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
    29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
    38: "MXFP4_MOE", 39: "NVFP4",
}
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}
MAX_STRING = 16 * 1024 * 1024
MAX_COUNT = 1 << 24


@dataclass(frozen=True, **SLOTS)
class GGUFHeader:
    """The header of a GGUF file: metadata, tensor types and counts."""
    version: int
    tensor_count: int
    metadata: dict[str, Any]      # arrays longer than 16 items are kept as their length only
    tensor_types: dict[str, int]  # ggml type name -> element count
    parameters: int
    header_bytes: int

    @property
    def architecture(self) -> str | None:
        a = self.metadata.get("general.architecture")
        return a if isinstance(a, str) else None

    @property
    def file_type(self) -> str | None:
        ft = self.metadata.get("general.file_type")
        return FILE_TYPES.get(ft) if isinstance(ft, int) else None


class _Buf:
    __slots__ = ("b", "i")

    def __init__(self, b: bytes):
        self.b = b
        self.i = 0

    def take(self, n: int) -> bytes:
        if self.i + n > len(self.b):
            raise Truncated(f"header continues past byte {len(self.b)}", None)
        out = self.b[self.i:self.i + n]
        self.i += n
        return out

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > MAX_STRING:
            raise FormatError(f"string of {n} bytes at byte {self.i}")
        return self.take(n).decode("utf-8", "replace")


def parse(buf: bytes) -> GGUFHeader:
    """Parse a GGUF header from the start of a file (raises Truncated if ``buf`` ends early)."""
    b = _Buf(buf)
    if b.take(4) != b"GGUF":
        raise FormatError("no GGUF magic")
    version = b.unpack("<I")
    if version not in (2, 3):
        raise FormatError(f"GGUF version {version} not understood")
    n_tensors, n_kv = b.unpack("<Q"), b.unpack("<Q")
    if n_tensors > MAX_COUNT or n_kv > MAX_COUNT:
        raise FormatError(f"implausible counts: {n_tensors} tensors, {n_kv} keys")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = b.string()
        meta[key] = _value(b, b.unpack("<I"), depth=0)
    types: Counter = Counter()
    params = 0
    for _ in range(n_tensors):
        b.string()
        nd = b.unpack("<I")
        if nd > 8:
            raise FormatError(f"tensor with {nd} dimensions")
        dims = [b.unpack("<Q") for _ in range(nd)]
        t = b.unpack("<I")
        b.unpack("<Q")
        n = math.prod(dims)
        params += n
        types[GGML_TYPES.get(t, f"type{t}")] += n
    return GGUFHeader(version, n_tensors, meta, dict(types), params, b.i)


def _value(b: _Buf, vtype: int, depth: int) -> Any:
    if vtype in _SCALAR:
        return b.unpack(_SCALAR[vtype])
    if vtype == 8:
        return b.string()
    if vtype == 9:
        if depth > 2:
            raise FormatError("arrays nested too deep")
        itype, n = b.unpack("<I"), b.unpack("<Q")
        if n > MAX_COUNT * 16:
            raise FormatError(f"array of {n} items")
        if itype in _SCALAR:        # fixed size: skip without a Python loop
            size = struct.calcsize(_SCALAR[itype])
            raw = b.take(size * n)
            if n <= 16:
                return list(struct.unpack(f"<{n}{_SCALAR[itype][1]}", raw))
            return {"array_len": n}
        items = [_value(b, itype, depth + 1) for _ in range(n)]
        return items if n <= 16 else {"array_len": n}
    raise FormatError(f"unknown value type {vtype}")
