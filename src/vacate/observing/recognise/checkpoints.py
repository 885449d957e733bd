"""Training checkpoints: ``checkpoint-N``, ``global_stepN``, ``epoch_N_step_M``, optimizer and
scheduler state, ``*.distcp`` (torch distributed checkpoints), DeepSpeed/FSDP shards."""

from __future__ import annotations

import re

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise import hf_model
from vacate.observing.recognise.base import Ctx, cls, dirs, files
from vacate.observing.recognise.safetensors_header import human_params

CKPT_NAME = re.compile(
    r"^(checkpoint[-_]?(?P<a>\d+)|global_step(?P<b>\d+)|(epoch[_-]?\d+[_-])?step[_-]?(?P<c>\d+)"
    r"|epoch[_-]?(?P<d>\d+)|iter_?(?P<e>\d+)|ckpt[-_]?(?P<f>\d+))$")
STATE_FILES = re.compile(
    r"^(optimizer\.(pt|bin)|scheduler\.pt|trainer_state\.json|training_state\.pt|"
    r"rng_state(_\d+)?\.pth|.*\.distcp|zero_pp_rank_.*|.*_optim_states\.pt|"
    r"mp_rank_\d+_model_states\.pt|latest|\.metadata)$")


def step_of(name: str) -> tuple[str, int] | None:
    """("step", 1000) for checkpoint-1000, global_step1000, epoch_0_step_1000; ("epoch", 3)
    for epoch_3."""
    m = CKPT_NAME.match(name)
    if not m:
        return None
    for g in "abcdef":
        if m.group(g):
            return ("epoch" if g == "d" else "step"), int(m.group(g))
    return None


@dirs
def checkpoint_dir(ctx: Ctx) -> Classification | None:
    at = step_of(ctx.name)
    step = at[1] if at else None
    unit = at[0] if at else "step"
    lst = ctx.listing()
    state = sorted(n for n in lst.files if STATE_FILES.match(n))
    state += [d for d in lst.dirs if d.startswith("global_step") or d.startswith("pytorch_model")
              and d.endswith("fsdp")]
    if step is None and not state:
        return None
    model = hf_model.describe(ctx.reader, ctx.path, lst, ctx.stats.apparent_bytes) \
        if lst.has("config.json") or lst.with_suffix(".safetensors", ".bin") else None
    if step is None and (model is None and len(state) < 2
                         or any(d.startswith("global_step") for d in lst.dirs)):
        return None     # a run holding checkpoints (DeepSpeed's latest + global_stepN/)
    ts = ctx.reader.json(ctx.join("trainer_state.json"), what="trainer_state.json") \
        if "trainer_state.json" in lst.files else None
    if isinstance(ts, dict) and isinstance(ts.get("global_step"), int):
        step, unit = ts["global_step"], "step"
    what = "checkpoint"
    if model is not None and model.kind == "draft-model":
        what = f"{model.details.get('draft', 'draft')} draft-model checkpoint"
    elif model is not None:
        what = "model checkpoint"
    extras = []
    if any(n.startswith(("optimizer", "zero_pp", "mp_rank")) or "optim" in n for n in state):
        extras.append("optimizer state")
    if any(n.endswith(".distcp") for n in state):
        extras.append("torch.distributed shards")
    params = model.details.get("parameters") if model is not None else None
    label = f"{what}" + (f", {unit} {step}" if step is not None else "") + (
        f", {human_params(params)} params" if params else "") + (
        f" ({', '.join(extras)})" if extras else "") + f", {human_bytes(ctx.stats.apparent_bytes)}"
    details = dict(model.details) if model is not None else {}
    details.update(state_files=state[:20], **{unit: step})
    # Above a model's 0.9: a model directory named and kept as a training step is a checkpoint.
    conf = 0.93 if (step is not None and (state or model)) else 0.75
    ev = ("directory name",) if step is not None else ()
    return cls("checkpoint", label, recoverable="unique", confidence=conf,
               evidence=ev + tuple(state[:3]) + (model.evidence if model else ()), **details)


@files
def torch_file(ctx: Ctx) -> Classification | None:
    """A single file written by torch.save (a zip holding data.pkl, or a bare pickle)."""
    if not ctx.name.endswith((".pt", ".pth", ".ckpt", ".bin", ".tar")):
        return None
    head = ctx.head(512)
    if head.startswith(b"PK\x03\x04") and b"data.pkl" in head:
        how = "torch.save zip"
    elif head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        how = "pickle"
    else:
        return None
    what = "optimizer state" if "optim" in ctx.name else "PyTorch checkpoint"
    return cls("checkpoint", f"{what} file ({how}), {human_bytes(ctx.stats.apparent_bytes)}",
               confidence=0.6, evidence=(how,), format=how)
