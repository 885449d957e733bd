"""Quantisation from ``quantization_config`` (config.json) and ``hf_quant_config.json``
(NVIDIA ModelOpt exports), and how quantised tensors map back to parameters. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

from vacate.observing.compat import SLOTS


@dataclass(frozen=True, **SLOTS)
class Quant:
    """A model's quantisation, as its config declares it."""
    method: str          # modelopt, awq, gptq, compressed-tensors, bitsandbytes, fp8, mxfp4, ...
    label: str           # "NVFP4 (modelopt)", "AWQ 4-bit g128", ...
    bits: int | None
    details: dict


def _num(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def from_hf_quant_config(q: dict) -> Quant | None:
    """``hf_quant_config.json``: {"producer": {"name": "modelopt"}, "quantization": {...}}."""
    if not isinstance(q, dict):
        return None
    prod = q.get("producer") if isinstance(q.get("producer"), dict) else {}
    qq = q.get("quantization") if isinstance(q.get("quantization"), dict) else q
    algo = qq.get("quant_algo")
    if not isinstance(algo, str):
        return None
    name = str(prod.get("name") or "modelopt")
    return _modelopt(algo, qq.get("kv_cache_quant_algo"), name, prod.get("version"),
                     _num(qq.get("group_size")))


def _modelopt(algo: str, kv, producer: str, version, group) -> Quant:
    label = f"{algo} ({producer})"
    if isinstance(kv, str) and kv:
        label += f", {kv} KV cache"
    bits = 4 if "FP4" in algo.upper() or "INT4" in algo.upper() or "W4" in algo.upper() else (
        8 if "8" in algo else None)
    d = {"method": producer, "algorithm": algo, "kv_cache": kv, "group_size": group,
         "producer_version": version}
    return Quant(producer, label, bits, {k: v for k, v in d.items() if v is not None})


def from_config(qc: dict) -> Quant | None:
    """``config.json``'s ``quantization_config``."""
    if not isinstance(qc, dict):
        return None
    m = str(qc.get("quant_method") or "").lower()
    bits = _num(qc.get("bits"))
    group = _num(qc.get("group_size"))
    g = f" g{group}" if group and group > 0 else ""
    if m == "modelopt" or ("quant_algo" in qc and not m):
        algo = qc.get("quant_algo") or (qc.get("quantization") or {}).get("quant_algo")
        return _modelopt(str(algo or "?"), qc.get("kv_cache_quant_algo"), "modelopt",
                         qc.get("producer", {}).get("version")
                         if isinstance(qc.get("producer"), dict) else None, group)
    if m == "awq":
        return Quant("awq", f"AWQ {bits or 4}-bit{g}", bits or 4,
                     {"method": "awq", "bits": bits, "group_size": group,
                      "version": qc.get("version")})
    if m == "gptq":
        return Quant("gptq", f"GPTQ {bits or 4}-bit{g}", bits or 4,
                     {"method": "gptq", "bits": bits, "group_size": group,
                      "desc_act": qc.get("desc_act")})
    if m == "compressed-tensors":
        fmt = qc.get("format")
        fmts = {fmt} if isinstance(fmt, str) else set()
        wbits, wtype = None, None
        groups = qc.get("config_groups")
        if isinstance(groups, dict):
            for grp in groups.values():
                if not isinstance(grp, dict):
                    continue
                if isinstance(grp.get("format"), str):
                    fmts.add(grp["format"])      # per-group formats (mixed-precision)
                w = grp.get("weights")
                if isinstance(w, dict) and wbits is None:
                    wbits, wtype = _num(w.get("num_bits")), w.get("type")
        kind = ("NVFP4" if any("nvfp4" in f for f in fmts) else
                f"{'FP' if wtype == 'float' else 'INT'}{wbits}" if wbits else str(fmt))
        # packed 4-bit weights anywhere: U8 tensors hold two values each
        bits = 4 if kind == "NVFP4" or wbits == 4 else wbits
        return Quant("compressed-tensors", f"{kind} (compressed-tensors)", bits,
                     {"method": "compressed-tensors", "format": fmt, "bits": wbits,
                      "type": wtype})
    if m == "bitsandbytes" or "load_in_4bit" in qc or "load_in_8bit" in qc:
        if qc.get("load_in_4bit"):
            t = str(qc.get("bnb_4bit_quant_type") or "fp4").upper()
            return Quant("bitsandbytes", f"bitsandbytes {t} 4-bit", 4,
                         {"method": "bitsandbytes", "bits": 4, "type": t})
        return Quant("bitsandbytes", "bitsandbytes 8-bit", 8, {"method": "bitsandbytes", "bits": 8})
    if m in ("fp8", "fbgemm_fp8"):
        blk = qc.get("weight_block_size")
        extra = f" (block {blk[0]}x{blk[1]})" if isinstance(blk, list) and len(blk) == 2 else ""
        return Quant("fp8", f"FP8{extra}", 8, {"method": m, "fmt": qc.get("fmt"),
                                                "weight_block_size": blk})
    if m == "mxfp4":
        return Quant("mxfp4", "MXFP4", 4, {"method": "mxfp4"})
    if m:
        return Quant(m, f"{m} quantised" + (f" {bits}-bit" if bits else ""), bits,
                     {"method": m, "bits": bits})
    return None


# Tensors that a quantiser adds next to the weights: scales, zero points, indices.
_AUX_SUFFIXES = (
    "weight_scale", "weight_scale_2", "weight_scale_inv", "input_scale", "weight_global_scale",
    "input_global_scale", "k_scale", "v_scale", "output_scale", ".qzeros", ".scales", ".g_idx",
    ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map", ".SCB", "weight_zero_point",
    "_scales", "pre_quant_scale", "weight_shape", "_zero_point",
)


def count_params(headers, quant: Quant | None) -> tuple[int, bool]:
    """Parameters in safetensors ``headers`` (their ``names``, ``dtypes`` and ``numels``
    columns): unquantised, every element counts (the names not even looked at: a hub has
    hundreds of thousands); a quantised model's packed weights are unpacked (two FP4/INT4
    values per byte, 32/bits per int32 word) and its scales and zero points left out.
    Returns (count, adjusted)."""
    if quant is None:
        return sum(sum(h.numels) for h in headers), False
    total, adjusted = 0, False
    for name, dtype, n in chain.from_iterable(zip(h.names, h.dtypes, h.numels)
                                              for h in headers):
        if name.endswith(_AUX_SUFFIXES) or ".quant_state." in name:
            adjusted = True
            continue
        if quant.bits == 4 and dtype == "U8":
            # 4-bit weights travel as bytes holding two values (NVFP4, MXFP4, bnb 4-bit):
            # whatever the tensor is called (".weight", "_packed", "_blocks", or a fused
            # MoE "experts.gate_up_proj").
            total += 2 * n
            adjusted = True
        elif dtype == "I32" and name.endswith(("qweight", "weight_packed")) and quant.bits:
            total += n * (32 // quant.bits)
            adjusted = True
        else:
            total += n
    return total, adjusted
