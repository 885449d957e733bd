"""ONNX models and TensorRT engines (by name, with a look at the first bytes)."""

from __future__ import annotations

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise.base import Ctx, cls, dirs, files


@files
def onnx_or_engine(ctx: Ctx) -> Classification | None:
    n = ctx.name
    if n.endswith(".onnx"):
        head = ctx.head(2) or b""
        ok = head[:1] == b"\x08"          # field 1 (ir_version), varint
        return cls("model", "ONNX model" + ("" if ok else " (by name)"), confidence=0.85 if ok
                   else 0.5, guess=not ok, evidence=("ONNX protobuf" if ok else "name",),
                   format="onnx")
    if n.endswith((".engine", ".plan", ".trt")):
        return cls("model", "TensorRT engine (built for one GPU and TensorRT version)",
                   recoverable="regenerable", confidence=0.6, guess=True, evidence=("name",),
                   format="tensorrt")
    return None


@dirs
def trtllm_engine_dir(ctx: Ctx) -> Classification | None:
    """A TensorRT-LLM engine directory: config.json with build_config, rankN.engine files."""
    lst = ctx.listing()
    ranks = [n for n in lst.files if n.startswith("rank") and n.endswith(".engine")]
    if not ranks or "config.json" not in lst.files:
        return None
    cfg = ctx.reader.json(ctx.join("config.json"), what="config.json")
    if not isinstance(cfg, dict) or "build_config" not in cfg:
        return None
    pc = cfg.get("pretrained_config") if isinstance(cfg.get("pretrained_config"), dict) else {}
    arch = pc.get("architecture")
    return cls("model", f"TensorRT-LLM engine{f' ({arch})' if arch else ''}, {len(ranks)} ranks, "
               f"{human_bytes(ctx.stats.apparent_bytes)} (built for one GPU type and version)",
               recoverable="regenerable", confidence=0.9, evidence=("config.json build_config",
                                                                   "rank*.engine"),
               format="tensorrt-llm", architecture=arch, ranks=len(ranks),
               version=cfg.get("version"))
