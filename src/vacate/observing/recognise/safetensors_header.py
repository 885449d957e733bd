"""Single ``.safetensors`` files, and the bounded header read every model recogniser uses."""

from __future__ import annotations

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise.base import Ctx, cls, files
from vacate.observing.recognise.formats import FormatError, safetensors
from vacate.observing.recognise.formats.text import LFS_HEAD, lfs_pointer
from vacate.observing.recognise.read import Reader

HEAD = 64 * 1024      # one read covers the header of most shards; longer ones get a second


def read_header(reader: Reader, path: str, size: int,
                within: str | None = None) -> safetensors.Header | str | None:
    """The parsed header; "lfs" for a Git LFS pointer; None (with a warning) when the file is
    not a believable safetensors file. Reads at most 8 + header length bytes."""
    buf = reader.head(path, min(HEAD, max(size, 8)), within=within)
    if buf is None:
        return None
    if buf.startswith(LFS_HEAD) and lfs_pointer(buf):
        return "lfs"
    try:
        n = safetensors.header_length(buf)
        if len(buf) < 8 + n and size >= 8 + n:
            buf = reader.head(path, 8 + n, within=within) or b""
        return safetensors.parse(buf, file_size=size)
    except FormatError as e:
        reader.warn("malformed-file", path, f"not a valid safetensors file: {e}")
        return None


def dtype_summary(numel_by_dtype) -> tuple[str | None, dict[str, int]]:
    """The dominant dtype's short name and the element count of each."""
    total = sum(numel_by_dtype.values())
    if not total:
        return None, {}
    main = max(numel_by_dtype, key=numel_by_dtype.get)
    return safetensors.DTYPE_NAMES.get(main, main.lower()), dict(numel_by_dtype)


def human_params(n: int) -> str:
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            v = n / div
            return f"{v:.0f}{unit}" if v >= 100 else f"{v:.1f}{unit}".replace(".0" + unit, unit)
    return str(n)


@files
def safetensors_file(ctx: Ctx) -> Classification | None:
    if not ctx.name.endswith(".safetensors"):
        return None
    h = read_header(ctx.reader, ctx.path, ctx.stats.apparent_bytes)
    if h == "lfs":
        return cls("file", "Git LFS pointer to a safetensors file (the weights are not here)",
                   confidence=0.8, evidence=("Git LFS pointer text",), lfs_pointer=True)
    if h is None:
        return cls("file", "file named .safetensors, not a valid one", confidence=0.3,
                   guess=True, evidence=("name only",))
    params = sum(h.numels)
    dtype, dtypes = dtype_summary(h.numel_by_dtype())
    return cls("model", f"safetensors weights, {len(h.names)} tensors, "
               f"{human_params(params)} params, {dtype}, {human_bytes(ctx.stats.apparent_bytes)}",
               confidence=0.7, evidence=("safetensors header",), parameters=params,
               dtype=dtype, dtypes=dtypes, tensors=len(h.names), format="safetensors")
