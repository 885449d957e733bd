"""Datasets: jsonl / parquet / arrow / csv shards, webdataset tars, the HF datasets cache.
The first record of a jsonl file tells ShareGPT from chat messages from instruction data."""

from __future__ import annotations

import json
import re

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise.base import Ctx, cls, dirs, files

DATA_EXT = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet", ".arrow", ".csv", ".tsv",
            ".json", ".tfrecord", ".npy")
WEBDATASET = re.compile(r"^(.*[-_])?\d{4,}\.tar$")
MAGIC = {".parquet": b"PAR1", ".arrow": b"ARROW1"}


def record_format(line: bytes) -> str | None:
    """What one jsonl record looks like: ShareGPT, chat messages, instruction, prompt/response."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(rec, dict):
        return None
    conv = rec.get("conversations") or rec.get("conversation")
    if isinstance(conv, list) and conv and isinstance(conv[0], dict) and (
            "from" in conv[0] or "value" in conv[0]):
        return "ShareGPT"
    msgs = rec.get("messages") if isinstance(rec.get("messages"), list) else conv
    if isinstance(msgs, list) and msgs and isinstance(msgs[0], dict) and "role" in msgs[0]:
        return "chat messages"
    if "instruction" in rec and ("output" in rec or "response" in rec):
        return "instruction"
    if "prompt" in rec and ("completion" in rec or "response" in rec or "chosen" in rec):
        return "prompt/response"
    if "text" in rec:
        return "text"
    return "records"


def sniff(ctx: Ctx, path: str, ext: str) -> tuple[str | None, bool]:
    """(format name, content matches the extension)."""
    head = ctx.reader.head(path, 64 * 1024, quiet=True) or b""
    if ext in MAGIC:
        return ext[1:], head.startswith(MAGIC[ext])
    if ext == ".jsonl":
        first = head.split(b"\n", 1)[0]
        if len(first) == len(head) and len(head) == 64 * 1024:
            return "jsonl", True           # a record longer than we look at
        f = record_format(first)
        return f, f is not None
    return None, True


@files
def data_file(ctx: Ctx) -> Classification | None:
    ext = next((e for e in DATA_EXT if ctx.name.endswith(e)), None)
    if ext is None or ext in (".json", ".npy") or ctx.stats.apparent_bytes == 0:
        return None
    fmt, ok = sniff(ctx, ctx.path, ext)
    if not ok:
        return None
    return cls("dataset", f"{fmt or ext[1:]} data file, {human_bytes(ctx.stats.apparent_bytes)}",
               confidence=0.6, evidence=("content" if fmt else "name",), format_name=fmt,
               format=ext[1:])


@dirs
def dataset_dir(ctx: Ctx) -> Classification | None:
    lst = ctx.listing()
    if not lst.files:
        return None
    if "dataset_info.json" in lst.files and lst.with_suffix(".arrow"):
        return cls("dataset", f"Hugging Face datasets cache entry, "
                   f"{len(lst.with_suffix('.arrow'))} arrow files, "
                   f"{human_bytes(ctx.stats.apparent_bytes)}", recoverable="re-downloadable",
                   guess=True, confidence=0.85, evidence=("dataset_info.json",), format="arrow")
    total = sum(f.size for f in lst.files.values()) or 1
    groups: dict[str, list] = {}
    for n, f in lst.files.items():
        ext = f.ext
        if ext == ".tar" and not WEBDATASET.match(n):
            continue
        if ext in DATA_EXT and ext != ".json" or ext == ".tar":
            groups.setdefault(ext, []).append(f)
    if not groups:
        return None
    ext, shards = max(groups.items(), key=lambda kv: sum(f.size for f in kv[1]))
    share = sum(f.size for f in shards) / total
    if share < 0.6 or (len(shards) < 2 and lst.dirs != ()):
        return None
    fmt, ok = sniff(ctx, ctx.join(shards[0].name), ext)
    if not ok:
        ctx.reader.warn("malformed-file", ctx.join(shards[0].name),
                        f"named {ext} but its content does not look like it")
    what = "webdataset tar shards" if ext == ".tar" else f"{ext[1:]} shards"
    label = f"dataset: {len(shards)} {what}" + (f" ({fmt})" if fmt and fmt != ext[1:] else "") \
        + f", {human_bytes(ctx.stats.apparent_bytes)}"
    return cls("dataset", label, confidence=0.8 if ok else 0.5, evidence=("file names",)
               + (("first record",) if fmt else ()), format=ext[1:], format_name=fmt,
               shards=len(shards))
