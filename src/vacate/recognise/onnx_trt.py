"""ONNX models and TensorRT engines (by name, with a look at the first bytes)."""

from __future__ import annotations

from vacate.model.inventory import Classification
from vacate.recognise.base import Ctx, cls, files


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
