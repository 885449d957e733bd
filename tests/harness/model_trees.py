"""Model trees as the story has them, built for real: sparse safetensors shards of an NVFP4
model, small models from captured configs, a Hugging Face hub cache, a SpecForge checkout
and an EAGLE-3 training run; and the captured fixtures they are read against (``HF``,
``MISC``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess

import numpy as np
from safetensors.numpy import save_file

from harness.paths import FIXTURES
from vacate.observing.collectors import walk
from vacate.observing.model.inventory import Item
from vacate.observing.recognise import annotate

HF = os.path.join(FIXTURES, "hf")

MISC = os.path.join(FIXTURES, "misc")

BITS = {"U8": 8, "F8_E4M3": 8, "BF16": 16, "F16": 16, "F32": 32, "I32": 32}


def sparse_shard(path: str, specs: list[tuple[str, str, list[int]]],
                 metadata: dict | None = None) -> int:
    """A safetensors file whose header names ``specs`` (name, dtype, shape) and whose data is a
    hole: real header, realistic size, no disk used. Returns the file size."""
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    off = 0
    for name, dtype, shape in specs:
        n = int(np.prod(shape, dtype=np.int64)) * BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + off)
    return 8 + len(raw) + off


def nvfp4_layer(prefix: str, out_f: int, in_f: int) -> list[tuple[str, str, list[int]]]:
    """One linear layer as ModelOpt exports NVFP4: packed U8 weight (two FP4 values per byte),
    FP8 block scales (one per 16 values), a global scale and an input scale."""
    return [(f"{prefix}.weight", "U8", [out_f, in_f // 2]),
            (f"{prefix}.weight_scale", "F8_E4M3", [out_f, in_f // 16]),
            (f"{prefix}.weight_scale_2", "F32", []),
            (f"{prefix}.input_scale", "F32", [])]


def write_json(path: str, obj) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)


def nvfp4_model(d: str, *, shards: int, rows: int, in_f: int = 4096,
                drop: tuple[int, ...] = ()) -> int:
    """A ModelOpt NVFP4 export of a Qwen3.5-MoE-shaped model: config.json, the real
    hf_quant_config.json, an index and ``shards`` sparse shards. Returns the parameter count
    the shards hold (unpacked), computed from what was written."""
    os.makedirs(d, exist_ok=True)
    write_json(os.path.join(d, "config.json"), {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
        "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": in_f,
                        "num_hidden_layers": shards, "num_experts": 512},
        "torch_dtype": "bfloat16"})
    shutil.copy(os.path.join(HF, "nvfp4-modelopt", "hf_quant_config.json"), d)
    weight_map, params = {}, 0
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors"
        specs = nvfp4_layer(f"model.layers.{i}.mlp.experts.down_proj", rows, in_f)
        specs.append((f"model.layers.{i}.input_layernorm.weight", "BF16", [in_f]))
        if i == 1:
            specs.append(("model.embed_tokens.weight", "BF16", [1024, in_f]))
        params += rows * in_f + in_f + (1024 * in_f if i == 1 else 0)
        for n, _, _ in specs:
            weight_map[n] = name
        if i not in drop:
            sparse_shard(os.path.join(d, name), specs)
    write_json(os.path.join(d, "model.safetensors.index.json"),
               {"metadata": {"total_size": 0}, "weight_map": weight_map})
    return params


def small_model(d: str, config_fixture: str | None = None, **cfg) -> int:
    """A small model written by the real safetensors package; returns its parameter count."""
    os.makedirs(d, exist_ok=True)
    if config_fixture:
        with open(os.path.join(HF, config_fixture)) as f:
            conf = json.load(f)
    else:
        conf = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                "num_hidden_layers": 2, "hidden_size": 64}
    conf.update(cfg)
    write_json(os.path.join(d, "config.json"), conf)
    tensors = {"model.embed_tokens.weight": np.zeros((128, 64), np.float16),
               "model.layers.0.mlp.up_proj.weight": np.ones((64, 64), np.float16),
               "lm_head.weight": np.zeros((128, 64), np.float32)}
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    return sum(t.size for t in tensors.values())


def git(cwd: str, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_GLOBAL="/dev/null",
               GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def specforge_checkout(d: str, *, pushed: bool = True) -> None:
    """A git clone of SpecForge, as far as the recognisers look: .git with an origin remote,
    scripts/prepare_hidden_states.py, and the remote-tracking ref."""
    os.makedirs(os.path.join(d, "scripts"))
    with open(os.path.join(d, "scripts", "prepare_hidden_states.py"), "w") as f:
        f.write('"""This script will generate the hidden states for the dataset."""\n')
    git(d, "init", "-q", "-b", "main")
    git(d, "add", ".")
    git(d, "commit", "-q", "-m", "init")
    git(d, "remote", "add", "origin", "https://github.com/sgl-project/SpecForge.git")
    head = git(d, "rev-parse", "HEAD")
    if pushed:
        git(d, "update-ref", "refs/remotes/origin/main", head)


def eagle3_run(root: str, *, ckpts: int = 10, hs_files: int = 20, hs_size: int = 1 << 30,
               target: str = "moonshotai/Kimi-K2.5") -> str:
    """An EAGLE-3 training run as SpecForge leaves it: a SpecForge checkout, hidden states
    cached by its prepare_hidden_states.py (sparse), ShareGPT jsonl shards, draft checkpoints
    (real EAGLE-3 config, sparse shard with a real header), a launch script, a log."""
    e = os.path.join(root, "eagle3")
    specforge_checkout(os.path.join(e, "SpecForge"))
    for i in range(hs_files):
        rows = os.path.join(e, "cache", "hidden_states", f"rows_{i // 10 * 5000}-"
                            f"{i // 10 * 5000 + 5000}")
        os.makedirs(rows, exist_ok=True)
        with open(os.path.join(rows, f"data_{i}.ckpt"), "wb") as f:
            f.write(b"PK\x03\x04")
            f.truncate(hs_size)
    os.makedirs(os.path.join(e, "data"))
    for s in range(3):
        with open(os.path.join(e, "data", f"sharegpt_train_{s:02d}.jsonl"), "w") as f:
            f.writelines(json.dumps({"id": f"{s}-{j}", "conversations": [
                    {"from": "human", "value": "hi " * 20},
                    {"from": "gpt", "value": "hello " * 50}]}) + "\n" for j in range(200))
    out = os.path.join(e, "outputs", "kimi-k2.5-eagle3")
    for k in range(ckpts):
        d = os.path.join(out, f"epoch_{k}_step_{(k + 1) * 1000}")
        os.makedirs(d)
        shutil.copy(os.path.join(HF, "draft", "specforge-deepseek-v3-671b-eagle3.json"),
                    os.path.join(d, "config.json"))
        sparse_shard(os.path.join(d, "model.safetensors"), [
            ("midlayer.self_attn.q_proj.weight", "BF16", [7168, 14336]),
            ("midlayer.mlp.gate_proj.weight", "BF16", [40960, 7168]),
            ("fc.weight", "BF16", [7168, 21504]), ("lm_head.weight", "BF16", [32000, 7168])])
        with open(os.path.join(d, "training_state.pt"), "wb") as f:
            f.truncate(1 << 20)
    with open(os.path.join(e, "train_eagle3_kimi.sh"), "w") as f:
        f.write(f"torchrun scripts/train_eagle3.py \\\n  --target-model-path {target} \\\n"
                "  --draft-model-config configs/kimi-k2-eagle3.json\n")
    os.makedirs(os.path.join(e, "logs"))
    with open(os.path.join(e, "logs", "train.log"), "w") as f:
        f.write("step 1 loss 3.2\n")
    return e


def scan_tree(root: str, budget_s: float = 10.0):
    """The real walker over ``root`` and the recognisers over its top-level entries, as
    core.scan does it. Returns ({relative path: item}, problems)."""
    w = walk.walk(root)
    items = tuple(Item("item:" + os.path.relpath(p, root), p, None, d, s) for p, d, s in w.top)
    out, problems = annotate(items, w.dirs, budget_s=budget_s)
    return {os.path.relpath(i.path, root): i for i in out}, problems


def blob(repo: str, data: bytes, sha256: bool) -> str:
    h = hashlib.sha256(data).hexdigest() if sha256 else hashlib.sha1(data).hexdigest()
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    with open(os.path.join(repo, "blobs", h), "wb") as f:
        f.write(data)
    return h


def hub_repo(hub: str, repo_id: str, revisions: dict[str, dict[str, bytes]],
             main: str) -> str:
    repo = os.path.join(hub, "models--" + repo_id.replace("/", "--"))
    for rev, files in revisions.items():
        snap = os.path.join(repo, "snapshots", rev)
        os.makedirs(snap, exist_ok=True)
        for name, data in files.items():
            h = blob(repo, data, name.endswith(".safetensors"))
            os.symlink(os.path.join("..", "..", "blobs", h), os.path.join(snap, name))
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(main)
    return repo


def side_by_side_tree(root: str) -> tuple:
    for i in range(3):
        small_model(os.path.join(root, f"model-{i}"))
    nvfp4_model(os.path.join(root, "big-model"), shards=3, rows=64)
    for d in range(20):
        os.makedirs(os.path.join(root, "runs", f"checkpoint-{d * 100}"))
        with open(os.path.join(root, "runs", f"checkpoint-{d * 100}", "optimizer.pt"), "wb") as f:
            f.write(b"o" * 100)
    (os.mkdir(os.path.join(root, "empty")))
    with open(os.path.join(root, "requirements-freeze.txt"), "w") as f:
        f.write("torch==2.5.1+cu124\nnumpy==1.26.4\n")
    w = walk.walk(root)
    items = tuple(Item("item:" + os.path.relpath(p, root), p, None, d, s) for p, d, s in w.top)
    return items, w.dirs
