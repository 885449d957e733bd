"""Training runs: hidden-state caches (regenerable when the script that wrote them is in the
same tree), sets of checkpoints, and the run directory that holds checkpoints together with
data, caches and code (e.g. an EAGLE-3 draft-model run made with SpecForge)."""

from __future__ import annotations

import os
import re

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise.base import Ctx, Node, cls, composite, dirs, list_dir

HIDDEN_NAME = re.compile(r"(hidden[_-]?states?|hs[_-]cache|aux[_-]hidden)", re.IGNORECASE)
TENSOR_EXT = (".ckpt", ".pt", ".pth", ".npy", ".npz", ".safetensors", ".bin", ".arrow")
GENERATORS = ("prepare_hidden_states.py", "prepare_hidden_states_hf.py",
              "generate_hidden_states.py", "dump_hidden_states.py", "ge_data_all.py")
TARGET_ARG = re.compile(r"""--(?:target[-_]model[-_]path|target-model|base-model-path)[= ]+"""
                        r"""["']?([^\s"'\\]+)""")


def find_generator(ctx: Ctx) -> str | None:
    """A script in the same tree (between this directory and its top-level item) that writes
    hidden states: SpecForge's scripts/prepare_hidden_states.py and kin."""
    d = os.path.dirname(ctx.path)
    looked = 0
    while True:
        for sub in ("", "scripts") + tuple(list_dir(d, ctx.reader).dirs[:40]):
            for g in GENERATORS:
                for cand in (os.path.join(d, sub, g), os.path.join(d, sub, "scripts", g)):
                    looked += 1
                    if os.path.isfile(cand) and not os.path.islink(cand):
                        return cand
        if d == ctx.top or len(d) <= len(ctx.top) or looked > 2000:
            return None
        d = os.path.dirname(d)


@dirs
def hidden_state_cache(ctx: Ctx) -> Classification | None:
    named = bool(HIDDEN_NAME.search(ctx.name))
    lst = ctx.listing()
    tensors = lst.with_suffix(*TENSOR_EXT)
    rows = [d for d in lst.dirs if re.match(r"^rows?_\d+", d)]
    if not named and not (rows and len(rows) >= len(lst.dirs) / 2):
        return None
    if not tensors and not rows and not lst.dirs:
        return None
    gen = find_generator(ctx)
    n = ctx.stats.files
    label = (f"cached hidden states, {n:,} files, {human_bytes(ctx.stats.apparent_bytes)}"
             + (f" (regenerable with {os.path.relpath(gen, os.path.dirname(ctx.top))})"
                if gen else " (regenerable only if the generating script and target model"
                            " are at hand)"))
    return cls("cache", label, recoverable="regenerable" if gen else None,
               confidence=0.85 if named else 0.7, guess=not named and not gen,
               evidence=("directory name" if named else "rows_* layout",)
               + ((f"generator {gen}",) if gen else ()), what="hidden-states",
               generator=gen)


def flatten(nodes: list[Node]) -> list[Node]:
    out = []
    for n in nodes:
        out.append(n)
        out.extend(flatten(n.children))
    return out


@composite
def checkpoint_set(ctx: Ctx) -> Classification | None:
    kids = [k for k in ctx.children or () if not k.path.endswith(os.sep + "*")]
    ck = [k for k in kids if k.classification.kind == "checkpoint"]
    need = 1 if ctx.listing().has("latest") else 2      # DeepSpeed names its newest one
    if len(ck) < need or len(ck) < 0.6 * len([k for k in kids if k.is_dir]):
        return None
    drafts = [k for k in ck if "draft" in k.classification.label]
    names = sorted((os.path.basename(k.path) for k in ck), key=_natural)
    what = f"{len(ck)} " + ("draft-model checkpoint" if len(drafts) == len(ck)
                            else "checkpoint") + ("s" if len(ck) > 1 else "")
    span = f"{names[0]} … {names[-1]}" if len(names) > 1 else names[0]
    return cls("training-output", f"{what} ({span}), "
               f"{human_bytes(ctx.stats.apparent_bytes)}", recoverable="unique", confidence=0.85,
               evidence=("checkpoint directories",), checkpoints=len(ck),
               first=names[0], last=names[-1])


def _natural(s: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


@composite
def training_run(ctx: Ctx) -> Classification | None:
    allnodes = flatten(ctx.children or [])
    ck = [n for n in allnodes if n.classification.kind == "checkpoint"]
    if not ck:
        return None
    hs = [n for n in allnodes if n.classification.details.get("what") == "hidden-states"]
    data = [n for n in allnodes if n.classification.kind == "dataset"]
    code = [n for n in allnodes if n.classification.kind == "source-code"]
    logs = [n for n in allnodes if n.classification.kind == "logs"]
    if not (hs or data or code or logs):
        return None
    variants = {n.classification.details.get("draft") for n in ck} - {None}
    variant = variants.pop() if len(variants) == 1 else None
    target = _target_model(ctx, allnodes)
    head = (f"{variant} draft-model training run" if variant else "training run") + (
        f" for {target}" if target else "")
    parts = []
    if hs:
        b = sum(n.stats.apparent_bytes for n in hs)
        regen = all(n.classification.recoverable == "regenerable" for n in hs)
        parts.append(f"{human_bytes(b)} cached hidden states"
                     + (" (regenerable)" if regen else ""))
    dk = "draft " if variant else ""
    parts.append(f"{len(ck)} {dk}checkpoint" + ("s" if len(ck) != 1 else "")
                 + f" ({human_bytes(sum(n.stats.apparent_bytes for n in ck))})")
    if data:
        b = sum(n.stats.apparent_bytes for n in data)
        fmts = {n.classification.details.get("format_name") for n in data} - {None}
        shards = sum(n.classification.details.get("shards") or 1 for n in data)
        parts.append(f"{human_bytes(b)} of " + (f"{fmts.pop()} " if len(fmts) == 1 else "")
                     + ("shards" if shards > 1 else "training data"))
    for c in code:
        parts.append(f"a {c.classification.details.get('project') or 'source'} checkout")
    if logs:
        parts.append(f"{len(logs)} log" + ("s" if len(logs) > 1 else ""))
    return cls("training-output", f"{head}: " + ", ".join(parts), recoverable="unique",
               confidence=0.85, evidence=("checkpoints with data/caches/code alongside",),
               draft=variant, target_model=target, checkpoints=len(ck),
               hidden_state_bytes=sum(n.stats.apparent_bytes for n in hs) or None)


def _target_model(ctx: Ctx, nodes: list[Node]) -> str | None:
    """The target model a run names in its launch scripts (--target-model-path ...)."""
    scripts = [n for n in nodes if not n.is_dir and n.path.endswith((".sh", ".yaml", ".yml",
                                                                     ".json", ".txt"))
               and n.stats.apparent_bytes < 64 * 1024 and "/." not in n.path]
    for n in scripts[:30]:
        text = ctx.reader.text(n.path, 64 * 1024) or ""
        m = TARGET_ARG.search(text)
        if m and "$" not in m.group(1):
            return m.group(1).rstrip("/").split("/")[-1]
    return None
