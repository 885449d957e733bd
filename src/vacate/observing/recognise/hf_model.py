"""Hugging Face model directories: config.json, safetensors / pytorch weights (single or
sharded), parameters and dtypes from the safetensors headers, quantisation, completeness
(missing shards, Git LFS pointers) and where the model can be had again."""

from __future__ import annotations

import os
import re
from collections import Counter

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise import draft_model, quant
from vacate.observing.recognise.base import Ctx, Listing, cls, dirs
from vacate.observing.recognise.formats.text import LFS_HEAD, front_matter, lfs_pointer
from vacate.observing.recognise.read import INDEX_CAP, Reader
from vacate.observing.recognise.safetensors_header import dtype_summary, human_params, read_header

SHARD = re.compile(r"^(?P<stem>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.(?P<ext>safetensors|bin)$")
BIN = re.compile(r"^(pytorch_model|model|adapter_model).*\.bin$")
HUB_URL = re.compile(r"huggingface\.co/(?!datasets/|spaces/)([\w.-]+/[\w.-]+?)(?:\.git)?/?$")
REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def _cfg_get(cfg: dict, *keys):
    for src in (cfg, cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}):
        for k in keys:
            v = src.get(k)
            if v is not None:
                return v
    return None


def describe(reader: Reader, path: str, lst: Listing, size_bytes: int, *,
             within: str | None = None, name: str | None = None,
             hub: tuple[str, str | None] | None = None) -> Classification | None:
    """What the model directory ``path`` holds. ``within``: follow symlinks that stay inside
    it (a hub cache snapshot); ``hub``: (repo id, revision) when a hub cache names them."""
    name = name or os.path.basename(path)
    join = lambda n: f"{path}/{n}"

    def size(n: str) -> int:
        f = lst.files[n]
        return (reader.size(join(n), within) or 0) if f.is_link else f.size

    st_files = sorted(n for n in lst.files if n.endswith(".safetensors"))
    bin_files = sorted(n for n in lst.files if n.endswith(".bin") and BIN.match(n))
    has_cfg = "config.json" in lst.files
    if not has_cfg and not st_files and not bin_files:
        return None
    evidence: list[str] = []
    conf = 0.9
    cfg = reader.json(join("config.json"), within=within, what="config.json") if has_cfg else None
    if has_cfg and not isinstance(cfg, dict):
        cfg, conf = None, 0.5
        evidence.append("config.json unreadable")
    if cfg is not None:
        if not (cfg.get("architectures") or cfg.get("model_type")) and not (st_files or bin_files):
            return None
        evidence.append("config.json")
    if cfg is None and not (st_files or bin_files):
        return cls("model", f"{name}: model config only, unreadable", confidence=0.3, guess=True,
                   evidence=tuple(evidence))
    cfg = cfg or {}

    # Which weight files should be here: the index's weight map, and NNNNN-of-NNNNN names.
    expected: set[str] = set()
    index_total = None
    for idx in sorted(n for n in lst.files if n.endswith((".safetensors.index.json",
                                                          ".bin.index.json"))):
        j = reader.json(join(idx), INDEX_CAP, within=within, what="shard index")
        if isinstance(j, dict) and isinstance(j.get("weight_map"), dict):
            expected |= set(map(str, j["weight_map"].values()))
            meta = j.get("metadata") if isinstance(j.get("metadata"), dict) else {}
            if isinstance(meta.get("total_size"), int):
                index_total = meta["total_size"]
            evidence.append(idx)
        else:
            conf = min(conf, 0.6)
    series = set()        # (stem, count, ext) of the NNNNN-of-NNNNN names: once per series
    for n in st_files + bin_files:
        m = SHARD.match(n)
        if m and 0 < int(m["n"]) <= 10000:
            series.add((m["stem"], m["n"], m["ext"]))
    for stem, count, ext in series:
        expected |= {f"{stem}-{i:05d}-of-{count}.{ext}" for i in range(1, int(count) + 1)}
    # Repos often ship both formats; the safetensors set is the one that counts when any of it
    # is here or named (a download takes one format, not both).
    if st_files or (not bin_files and any(e.endswith(".safetensors") for e in expected)):
        expected = {e for e in expected if e.endswith(".safetensors")}
        bin_files = []
    elif bin_files:
        expected = {e for e in expected if e.endswith(".bin")}
    missing = sorted(expected - set(lst.files))

    lfs: list[str] = []
    bad: list[str] = []
    headers: list = []
    read_all = True
    linked: list[str] = []
    for n in st_files:
        if reader.expired:
            read_all = False
            break
        if lst.files[n].is_link and within is None:
            linked.append(n)        # weights elsewhere: present, but not ours to read
            continue
        h = read_header(reader, join(n), size(n), within)
        if h == "lfs":
            lfs.append(n)
        elif h is None:
            bad.append(n)
        else:
            headers.append(h)
    for n in bin_files:
        if size(n) <= 1024:
            head = reader.head(join(n), 1024, within=within, quiet=True) or b""
            if head.startswith(LFS_HEAD) and lfs_pointer(head):
                lfs.append(n)
    if st_files and not read_all:
        conf = min(conf, 0.7)

    q = quant.from_config(cfg.get("quantization_config")) or quant.from_config(
        (cfg.get("text_config") or {}).get("quantization_config")
        if isinstance(cfg.get("text_config"), dict) else None)
    if "hf_quant_config.json" in lst.files:
        hq = quant.from_hf_quant_config(reader.json(join("hf_quant_config.json"), within=within,
                                                    what="hf_quant_config.json"))
        if hq is not None:
            q = hq
            evidence.append("hf_quant_config.json")
    params, adjusted = quant.count_params(headers, q)
    if not any(h.names for h in headers):
        params = None
    if not read_all:
        params = None       # a partial sum is not a parameter count
    by_dtype: Counter = Counter()       # (in the order the dtypes are met)
    for h in headers:
        by_dtype.update(h.by_dtype)
    dtype, dtypes = dtype_summary(by_dtype)
    cfg_dtype = _cfg_get(cfg, "torch_dtype", "dtype")

    draft = draft_model.detect(cfg)
    kind = "draft-model" if draft else "model"
    model_type = cfg.get("model_type") or _cfg_get(cfg, "model_type")
    archs = cfg.get("architectures") if isinstance(cfg.get("architectures"), list) else []

    # Completeness.
    weights = st_files + bin_files
    n_shards = len(expected) or len(weights)
    fmt = "safetensors" if st_files or any(e.endswith(".safetensors") for e in expected) \
        else "pytorch"
    if not weights and not expected:
        state, complete = "no weights (config only)", False
    elif lfs and len(lfs) == len(weights):
        state, complete = "weights are Git LFS pointers, not downloaded" + (
            f" ({len(missing)} more shards absent)" if missing else ""), False
    elif not weights:
        state, complete = f"index only, no weights ({len(missing)} shards missing)", False
    elif missing or lfs or bad:
        parts = []
        if missing:
            parts.append(f"{len(missing)} of {n_shards} shards missing")
        if lfs:
            parts.append(f"{len(lfs)} LFS pointers")
        if bad:
            parts.append(f"{len(bad)} unreadable")
        state, complete = "INCOMPLETE: " + ", ".join(parts), False
    elif linked:
        state, complete = f"{len(linked)} of {n_shards} shards are symlinks (not followed)", None
    else:
        state, complete = "complete", True
    if complete is False and weights + missing:
        reader.warn("incomplete-model", path, state)
        conf = min(conf, 0.8)
    if bad:
        conf = min(conf, 0.5)

    # Where it can be had again.
    card = {}
    if "README.md" in lst.files:
        card = front_matter(reader.text(join("README.md"), 256 * 1024, within=within,
                                        what="model card") or "")
    base = card.get("base_model")
    base = base[0] if isinstance(base, list) and base else (base or None)
    nop = cfg.get("_name_or_path") if isinstance(cfg.get("_name_or_path"), str) else None
    recoverable, source, guess = None, None, False
    git = git_remote_repo(reader, path) if within is None else None
    if hub:
        recoverable, source = "re-downloadable", f"hf:{hub[0]}" + (f"@{hub[1]}" if hub[1] else "")
        evidence.append("hub cache layout")
    elif git:
        recoverable, source = "re-downloadable", f"hf:{git}"
        evidence.append(".git/config remote")
    elif nop and REPO_ID.match(nop) and nop.split("/")[1].lower() == name.lower():
        recoverable, source, guess = "re-downloadable", f"hf:{nop}", True
        evidence.append("config.json _name_or_path names this model")
    derived = base or (nop if nop and REPO_ID.match(nop) and source != f"hf:{nop}" else None)
    if not source and q and derived and isinstance(derived, str) and REPO_ID.match(derived):
        # A quantisation of a published model can be made again from it (GPU hours, not
        # data loss). The card's base_model_relation says so; a matching name suggests it.
        said = card.get("base_model_relation") == "quantized"
        if said or name.lower().startswith(derived.split("/")[1].lower()):
            recoverable, source, guess = "regenerable", f"hf:{derived}", not said
            evidence.append("quantised from the model card's base_model"
                            if said else "name and quantisation match base_model")

    parts = [name]
    if model_type:
        parts.append(str(model_type))
    if draft:
        parts.append(f"{draft.variant} draft model")
    parts.append(q.label if q else (dtype or (str(cfg_dtype) if cfg_dtype else "")))
    if params:
        parts.append(f"{human_params(params)} params")
    if weights or expected:
        parts.append(f"{n_shards} {fmt} " + ("shards" if n_shards > 1 else "file"))
    parts.append(state)
    parts.append(human_bytes(size_bytes))
    if derived:
        parts.append(f"quantised from {derived}" if recoverable == "regenerable"
                     else f"derived from {derived}")
    label = ", ".join(p for p in parts if p)
    if draft:
        conf = min(conf, max(draft.confidence, 0.6))
        evidence.extend(draft.reasons)
    return cls(
        kind, label, recoverable=recoverable, source=source, confidence=conf, guess=guess,
        evidence=tuple(evidence),
        name=name, architecture=archs[0] if archs else None, model_type=model_type,
        draft=draft.variant if draft else None,
        draft_details=draft.details if draft else None,
        parameters=params, parameters_unpacked=adjusted or None,
        dtype=dtype or cfg_dtype, dtypes=dtypes or None,
        quantization=q.details if q else None, quantization_label=q.label if q else None,
        format=fmt if weights or expected else None, shards=n_shards or None,
        shards_present=len(weights) - len(lfs) - len(bad) if weights else None,
        missing_shards=missing[:20] or None, lfs_pointers=lfs[:20] or None,
        unreadable_shards=bad[:20] or None, linked_shards=linked[:20] or None,
        complete=complete,
        index_total_size=index_total, base_model=derived,
        hidden_size=_cfg_get(cfg, "hidden_size"), layers=_cfg_get(cfg, "num_hidden_layers"),
        experts=_cfg_get(cfg, "num_experts", "n_routed_experts", "num_local_experts"),
        revision=hub[1] if hub else None,
    )


def git_remote_repo(reader: Reader, path: str) -> str | None:
    """The HF repo id a git clone of a model came from (.git/config remote URL)."""
    text = reader.text(os.path.join(path, ".git", "config"), 64 * 1024, what="git config") \
        if os.path.isdir(os.path.join(path, ".git")) else None
    for line in (text or "").splitlines():
        k, _, v = line.strip().partition("=")
        if k.strip() == "url":
            m = HUB_URL.search(v.strip())
            if m:
                return m.group(1)
    return None


@dirs
def hf_model_dir(ctx: Ctx) -> Classification | None:
    return describe(ctx.reader, ctx.path, ctx.listing(), ctx.stats.apparent_bytes)


@dirs
def peft_adapter(ctx: Ctx) -> Classification | None:
    """A PEFT adapter (LoRA, ...): adapter_config.json naming its base model."""
    lst = ctx.listing()
    if "adapter_config.json" not in lst.files:
        return None
    cfg = ctx.reader.json(ctx.join("adapter_config.json"), what="adapter_config.json")
    if not isinstance(cfg, dict):
        return cls("model", "adapter (adapter_config.json unreadable)", confidence=0.4)
    base = cfg.get("base_model_name_or_path")
    peft = str(cfg.get("peft_type") or "PEFT")
    params = None
    for n in lst.with_suffix(".safetensors"):
        h = read_header(ctx.reader, ctx.join(n.name), n.size)
        if h is not None and h != "lfs":
            params = (params or 0) + sum(h.numels)
    r = cfg.get("r")
    label = f"{peft} adapter" + (f" (r={r})" if isinstance(r, int) else "") + (
        f" for {base}" if isinstance(base, str) else "") + (
        f", {human_params(params)} params" if params else "") + (
        f", {human_bytes(ctx.stats.apparent_bytes)}")
    return cls("model", label, recoverable="unique", confidence=0.92,
               evidence=("adapter_config.json",), adapter=peft,
               base_model=base if isinstance(base, str) else None, rank=r, parameters=params)
