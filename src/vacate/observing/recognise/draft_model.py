"""Draft models for speculative decoding (EAGLE, EAGLE-3, Medusa, MTP heads, DFlash), told
apart from ordinary models by their config alone. Pure: a config dict in."""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS


@dataclass(frozen=True, **SLOTS)
class Draft:
    """A speculative-decoding draft model, and why it was taken for one."""
    variant: str            # "EAGLE-3", "EAGLE", "Medusa", "MTP", "DFlash", "DSpark", ...
    confidence: float
    reasons: tuple[str, ...]
    details: dict


def detect(cfg: dict) -> Draft | None:
    if not isinstance(cfg, dict):
        return None
    archs = [a for a in cfg.get("architectures") or () if isinstance(a, str)]
    arch = " ".join(archs)
    low = arch.lower()
    layers = cfg.get("num_hidden_layers")
    details = {k: cfg[k] for k in ("draft_vocab_size", "num_target_layers", "medusa_num_heads",
                                   "num_nextn_predict_layers") if k in cfg}
    if isinstance(layers, int):
        details["decoder_layers"] = layers
    ec = cfg.get("eagle_config")
    dc = cfg.get("dflash_config")
    if "eagle3" in low:
        return Draft("EAGLE-3", 0.95, (f"architecture {arch}",), details)
    if isinstance(ec, dict):
        v = "EAGLE-3" if ec.get("use_aux_hidden_state") or ec.get(
            "eagle_aux_hidden_state_layer_ids") else "EAGLE"
        return Draft(v, 0.9, ("config has eagle_config",), details)
    if "dspark" in low or (isinstance(dc, dict) and dc.get("projector_type") == "dspark"):
        return Draft("DSpark", 0.9, (f"architecture {arch}",), details)
    if "dflash" in low or isinstance(dc, dict):
        return Draft("DFlash", 0.9, (f"architecture {arch or 'dflash_config'}",), details)
    if "eagle" in low:
        return Draft("EAGLE", 0.9, (f"architecture {arch}",), details)
    if "medusa" in low or "medusa_num_heads" in cfg:
        return Draft("Medusa", 0.9, ("Medusa heads",), details)
    if "mtp" in low or "nextn" in low or str(cfg.get("model_type", "")).endswith("_mtp"):
        return Draft("MTP", 0.85, (f"architecture {arch}",), details)
    if "draft_vocab_size" in cfg:
        return Draft("EAGLE-3", 0.85, ("config has draft_vocab_size",), details)
    if "drafter" in low or "draft" in low:
        return Draft("draft", 0.8, (f"architecture {arch}",), details)
    if layers == 1 and any(a.endswith("ForCausalLM") for a in archs) and int(
            cfg.get("hidden_size") or 0) >= 1024:
        return Draft("EAGLE-style", 0.6,
                     ("one decoder layer at a full model's width (an EAGLE draft head)",),
                     details)
    return None
