"""Caches: pip, Hugging Face (root, datasets, xet), torch hub, triton, ccache, __pycache__,
torch inductor / extension builds: all regenerable."""

from __future__ import annotations

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise.base import Ctx, cls, dirs


def _c(ctx: Ctx, what: str, ev: str, conf: float = 0.9) -> Classification:
    return cls("cache", f"{what}, {human_bytes(ctx.stats.apparent_bytes)}", recoverable="regenerable",
               confidence=conf, evidence=(ev,), what=what)


@dirs
def cache_dir(ctx: Ctx) -> Classification | None:
    n = ctx.name
    lst = ctx.listing()
    names = set(lst.dirs) | set(lst.files)
    if n == "__pycache__":
        return _c(ctx, "Python bytecode cache", "name __pycache__", 0.95)
    if {"http-v2", "http", "wheels", "selfcheck"} & names and n in ("pip", "pip-cache"):
        return _c(ctx, "pip cache", "pip cache layout")
    if n in ("huggingface", "hf") and ({"hub", "datasets", "xet", "token",
                                       "modules", "assets"} & names):
        return _c(ctx, "Hugging Face cache root", "hub/ datasets/ inside", 0.7)  # look inside
    if n == "xet" and lst.dirs:
        return _c(ctx, "Hugging Face xet cache", "name xet", 0.7)
    if (n == "hub" and "checkpoints" in lst.dirs) or (n == "torch" and "hub" in lst.dirs):
        return _c(ctx, "torch hub cache", "hub/checkpoints")
    if n in (".triton", "triton") and "cache" in lst.dirs or (n == "cache" and ctx.path.endswith(
            ".triton/cache")):
        return _c(ctx, "Triton kernel cache", "name .triton")
    if "ccache.conf" in names or (n in ("ccache", ".ccache") and "stats" in names):
        return _c(ctx, "ccache", "ccache.conf")
    if n in ("torchinductor_root",) or n.startswith("torchinductor_") or n == "torch_extensions":
        return _c(ctx, "torch compile cache", f"name {n}")
    if n in ("flashinfer", ".flashinfer") and "cached_ops" in names:
        return _c(ctx, "FlashInfer JIT cache", "cached_ops/")
    if n in ("vllm", ".vllm") and "torch_compile_cache" in names:
        return _c(ctx, "vLLM compile cache", "torch_compile_cache/")
    if n == ".cache":
        return _c(ctx, "user cache directory (.cache)", "name .cache", 0.6)
    return None
