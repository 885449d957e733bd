"""GGUF files (llama.cpp): architecture, name, file type, parameter count from the header."""

from __future__ import annotations

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise.base import Ctx, cls, files
from vacate.observing.recognise.formats import FormatError, Truncated, gguf
from vacate.observing.recognise.safetensors_header import human_params

FIRST = 1024 * 1024
CAP = 64 * 1024 * 1024    # tokenizer vocabularies make headers of a few MB at most


@files
def gguf_file(ctx: Ctx) -> Classification | None:
    head = ctx.head(4) or b""
    if head != b"GGUF":
        if ctx.name.endswith(".gguf"):
            ctx.reader.warn("malformed-file", ctx.path, "named .gguf but has no GGUF magic")
            return cls("file", "file named .gguf, not a GGUF file", confidence=0.3, guess=True)
        return None
    n = FIRST
    while True:
        buf = ctx.reader.head(ctx.path, n) or b""
        try:
            h = gguf.parse(buf)
            break
        except Truncated:
            if len(buf) < n or n >= CAP or ctx.reader.expired:
                ctx.reader.warn("malformed-file", ctx.path, "GGUF header is truncated or"
                                f" larger than {human_bytes(CAP)}")
                return cls("gguf", f"GGUF file (header unreadable), "
                           f"{human_bytes(ctx.stats.apparent_bytes)}", confidence=0.5)
            n *= 4
        except FormatError as e:
            ctx.reader.warn("malformed-file", ctx.path, f"not a valid GGUF header: {e}")
            return cls("gguf", "GGUF file (header unreadable)", confidence=0.4)
    name = h.metadata.get("general.name")
    ftype = h.file_type or (max(h.tensor_types, key=h.tensor_types.get) if h.tensor_types
                            else None)
    parts = [str(name) if isinstance(name, str) else ctx.name, h.architecture, ftype,
             f"{human_params(h.parameters)} params" if h.parameters else None,
             f"{h.tensor_count} tensors", human_bytes(ctx.stats.apparent_bytes)]
    src = h.metadata.get("general.source.url") or h.metadata.get("general.source.huggingface"
                                                                   ".repository")
    return cls("gguf", "GGUF " + ", ".join(p for p in parts if p), confidence=0.95,
               evidence=("GGUF header",), source=src if isinstance(src, str) else None,
               architecture=h.architecture, name=name if isinstance(name, str) else None,
               quantization=ftype, parameters=h.parameters, tensors=h.tensor_count,
               tensor_types=h.tensor_types, gguf_version=h.version)
