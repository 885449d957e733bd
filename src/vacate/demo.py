"""The built-in example: the story's ``/data`` as a small real volume.

As root it is a loop-mounted ext4 image (64 MB on disk); otherwise a plain directory. The
contents stand in for the story's volume with sparse files: real safetensors headers (8-byte
little-endian length + JSON) in front of holes, so a 234 GB model costs a few kB
(sizes as vacate shows them: powers of 1000):

  models/Qwen3.5-397B-A17B-NVFP4/   config.json, hf_quant_config.json (modelopt NVFP4),
                                    ~50 sparse shards + model.safetensors.index.json
  eagle3/                           SpecForge checkout, ShareGPT JSONL, cached hidden states
                                    (4.8 TB sparse), EAGLE-3 draft checkpoints
  cuda_13.0.1_580.82.07_linux.run   makeself header, 4.3 GB sparse
  ml-env-backup-cuda128.txt         pip freeze of a CUDA 12.8 environment
  lost+found/

Nothing here prints; the CLI (``vacate demo``) renders.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

MODEL = "Qwen3.5-397B-A17B-NVFP4"
MODEL_PATH = f"models/{MODEL}"
RUNFILE = "cuda_13.0.1_580.82.07_linux.run"
RUNFILE_SIZE = 4_302_681_723
FREEZE = "ml-env-backup-cuda128.txt"
IMAGE_MB = 64
DAY = 86400.0

DTYPE_BYTES = {"U8": 1, "F8_E4M3": 1, "BF16": 2, "F16": 2, "F32": 4, "I64": 8}

# Qwen3.5-397B-A17B text model (hybrid linear / full attention, 512 experts, 10 routed)
HIDDEN, LAYERS, EXPERTS, MOE_I, SHARED_I, VOCAB = 4096, 60, 512, 1024, 1024, 248320
HEADS, KV_HEADS, HEAD_DIM = 32, 2, 256


# -- safetensors ---------------------------------------------------------------------------
def safetensors_header(tensors: list[tuple[str, str, list[int]]],
                       metadata: dict[str, str] | None = None) -> tuple[bytes, int]:
    """The header of a safetensors file (length prefix included) and the size of the data
    that follows it; tensors are laid out back to back in the order given."""
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    off = 0
    for name, dtype, shape in tensors:
        n = math.prod(shape) * DTYPE_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)          # the format pads the header to 8 bytes
    return struct.pack("<Q", len(raw)) + raw, off


def write_sparse(path: str, head: bytes, size: int, mtime: float, atime: float) -> None:
    """``head`` at the start, a hole up to ``size`` bytes."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(max(size, len(head)))
    os.utime(path, (atime, mtime))


def write_text(path: str, text: str, mtime: float, atime: float | None = None) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.utime(path, (atime or mtime, mtime))


def write_safetensors(path: str, tensors: list[tuple[str, str, list[int]]], mtime: float,
                      atime: float, metadata: dict[str, str] | None = None) -> int:
    head, data = safetensors_header(tensors, metadata)
    write_sparse(path, head, len(head) + data, mtime, atime)
    return len(head) + data


# -- the model -----------------------------------------------------------------------------
def model_tensors() -> list[tuple[str, str, list[int]]]:
    """Tensor names, dtypes and shapes of the NVFP4 checkpoint: experts in FP4 (two values
    per byte) with FP8 block scales (one per 16 values), attention, router and embeddings in
    BF16 (excluded from quantisation, as modelopt does)."""
    t: list[tuple[str, str, list[int]]] = [
        ("model.language_model.embed_tokens.weight", "BF16", [VOCAB, HIDDEN])]
    for i in range(LAYERS):
        p = f"model.language_model.layers.{i}"
        t.append((f"{p}.input_layernorm.weight", "BF16", [HIDDEN]))
        if i % 4 == 3:
            q = HEADS * HEAD_DIM
            t += [(f"{p}.self_attn.q_proj.weight", "BF16", [2 * q, HIDDEN]),
                  (f"{p}.self_attn.k_proj.weight", "BF16", [KV_HEADS * HEAD_DIM, HIDDEN]),
                  (f"{p}.self_attn.v_proj.weight", "BF16", [KV_HEADS * HEAD_DIM, HIDDEN]),
                  (f"{p}.self_attn.o_proj.weight", "BF16", [HIDDEN, q])]
        else:
            t += [(f"{p}.linear_attn.in_proj_qkvz.weight", "BF16", [12288, HIDDEN]),
                  (f"{p}.linear_attn.in_proj_ba.weight", "BF16", [128, HIDDEN]),
                  (f"{p}.linear_attn.out_proj.weight", "BF16", [HIDDEN, 8192])]
        t += [(f"{p}.post_attention_layernorm.weight", "BF16", [HIDDEN]),
              (f"{p}.mlp.gate.weight", "BF16", [EXPERTS, HIDDEN]),
              (f"{p}.mlp.shared_expert.gate_up_proj.weight", "BF16", [2 * SHARED_I, HIDDEN]),
              (f"{p}.mlp.shared_expert.down_proj.weight", "BF16", [HIDDEN, SHARED_I]),
              (f"{p}.mlp.experts.gate_up_proj", "U8", [EXPERTS, 2 * MOE_I, HIDDEN // 2]),
              (f"{p}.mlp.experts.gate_up_proj_weight_scale", "F8_E4M3",
               [EXPERTS, 2 * MOE_I, HIDDEN // 16]),
              (f"{p}.mlp.experts.gate_up_proj_weight_scale_2", "F32", [EXPERTS]),
              (f"{p}.mlp.experts.gate_up_proj_input_scale", "F32", [EXPERTS]),
              (f"{p}.mlp.experts.down_proj", "U8", [EXPERTS, HIDDEN, MOE_I // 2]),
              (f"{p}.mlp.experts.down_proj_weight_scale", "F8_E4M3",
               [EXPERTS, HIDDEN, MOE_I // 16]),
              (f"{p}.mlp.experts.down_proj_weight_scale_2", "F32", [EXPERTS]),
              (f"{p}.mlp.experts.down_proj_input_scale", "F32", [EXPERTS])]
    t += [("model.language_model.norm.weight", "BF16", [HIDDEN]),
          ("lm_head.weight", "BF16", [VOCAB, HIDDEN])]
    return t


def shards(tensors: list, max_bytes: int = 5_000_000_000) -> list[list]:
    out: list[list] = [[]]
    size = 0
    for t in tensors:
        n = math.prod(t[2]) * DTYPE_BYTES[t[1]]
        if out[-1] and size + n > max_bytes:
            out.append([])
            size = 0
        out[-1].append(t)
        size += n
    return out


QUANT = {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
         "exclude_modules": ["lm_head", "model.language_model.embed_tokens", "*.mlp.gate",
                             "*.self_attn*", "*.linear_attn*", "*.shared_expert*",
                             "model.visual*"]}


def model_config() -> dict:
    layer_types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(LAYERS)]
    return {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": {
            "model_type": "qwen3_5_moe_text", "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
            "num_experts": EXPERTS, "num_experts_per_tok": 10, "moe_intermediate_size": MOE_I,
            "shared_expert_intermediate_size": SHARED_I, "vocab_size": VOCAB,
            "full_attention_interval": 4, "layer_types": layer_types,
            "linear_num_key_heads": 16, "linear_num_value_heads": 64,
            "linear_key_head_dim": 128, "linear_value_head_dim": 128,
            "max_position_embeddings": 262144, "rms_norm_eps": 1e-06, "dtype": "bfloat16",
        },
        "tie_word_embeddings": False,
        "transformers_version": "4.57.0.dev0",
        "quantization_config": {"quant_method": "modelopt", **QUANT},
    }


def build_model(root: str, now: float) -> None:
    d = os.path.join(root, MODEL_PATH)
    os.makedirs(d)
    mt, at = now - 62 * DAY, now - 3600      # downloaded two months ago, read an hour ago
    tensors = model_tensors()
    groups = shards(tensors)
    weight_map: dict[str, str] = {}
    total = 0
    for k, group in enumerate(groups, 1):
        name = f"model-{k:05d}-of-{len(groups):05d}.safetensors"
        write_safetensors(os.path.join(d, name), group, mt, at)
        for t in group:
            weight_map[t[0]] = name
            total += math.prod(t[2]) * DTYPE_BYTES[t[1]]
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    write_text(os.path.join(d, "model.safetensors.index.json"), json.dumps(index, indent=2), mt,
               at)
    write_text(os.path.join(d, "config.json"), json.dumps(model_config(), indent=2), mt, at)
    hq = {"producer": {"name": "modelopt", "version": "0.37.0"}, "quantization": QUANT}
    write_text(os.path.join(d, "hf_quant_config.json"), json.dumps(hq, indent=4), mt, at)
    write_text(os.path.join(d, "generation_config.json"), json.dumps(
        {"bos_token_id": 248044, "eos_token_id": [248046, 248044], "do_sample": True,
         "temperature": 0.6, "top_p": 0.95, "top_k": 20}, indent=2), mt, at)
    write_text(os.path.join(d, "tokenizer_config.json"), json.dumps(
        {"tokenizer_class": "Qwen2Tokenizer", "model_max_length": 262144,
         "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, indent=2), mt, at)
    write_text(os.path.join(d, "README.md"),
               f"---\nlicense: apache-2.0\nbase_model: Qwen/Qwen3.5-397B-A17B\nlibrary_name: "
               f"transformers\ntags: [nvfp4, modelopt]\n---\n# {MODEL}\n\nNVFP4 quantisation "
               "of Qwen3.5-397B-A17B made with NVIDIA TensorRT Model Optimizer; serve with "
               "SGLang (`--quantization modelopt_fp4`).\n", mt, at)


# -- EAGLE-3 material ----------------------------------------------------------------------
DRAFT_CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
    "hidden_size": HIDDEN, "intermediate_size": 12288, "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": VOCAB,
    "draft_vocab_size": 32000, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06,
    "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57],
                     "use_aux_hidden_state": True},
}

SHAREGPT_TURNS = [
    ("How do I resize an ext4 filesystem online?",
     "Grow the block device first, then run `resize2fs /dev/XXX` while it is mounted."),
    ("Explain speculative decoding in one paragraph.",
     ("A small draft model proposes several tokens; the large model verifies them in one "
      "forward pass and keeps the longest accepted prefix.")),
    ("What does NVFP4 mean?",
     ("A 4-bit floating-point format with FP8 scales per block of 16 values and a per-tensor "
      "FP32 scale, used on Blackwell GPUs.")),
]


def build_eagle3(root: str, now: float) -> None:
    e = os.path.join(root, "eagle3")
    old, older = now - 95 * DAY, now - 140 * DAY
    # a SpecForge checkout with the script that writes the hidden states
    sf = os.path.join(e, "SpecForge")
    for sub in ("scripts", "specforge", "configs", ".git"):
        os.makedirs(os.path.join(sf, sub))
    write_text(os.path.join(sf, "README.md"), "# SpecForge\n\nTrain speculative decoding "
               "models (EAGLE-3) for SGLang.\n", older)
    write_text(os.path.join(sf, "pyproject.toml"),
               '[project]\nname = "specforge"\nversion = "0.1.0"\n', older)
    write_text(os.path.join(sf, "specforge", "__init__.py"), '__version__ = "0.1.0"\n', older)
    write_text(os.path.join(sf, "scripts", "prepare_hidden_states.py"),
               '"""Run the target model over the data and cache its hidden states."""\n'
               "import argparse\n", older)
    write_text(os.path.join(sf, "scripts", "train_eagle3.py"),
               '"""Train an EAGLE-3 draft head on cached hidden states."""\nimport argparse\n',
               older)
    write_text(os.path.join(sf, "configs", "qwen3.5-397b-a17b-eagle3.json"),
               json.dumps(DRAFT_CONFIG, indent=2), older)
    write_text(os.path.join(sf, ".git", "HEAD"), "ref: refs/heads/main\n", older)
    write_text(os.path.join(sf, ".git", "config"),
               '[remote "origin"]\n\turl = https://github.com/sgl-project/SpecForge.git\n'
               '\tfetch = +refs/heads/*:refs/remotes/origin/*\n', older)
    target = f"/data/{MODEL_PATH}"
    write_text(os.path.join(e, "run_qwen3.5_eagle3.sh"),
               "#!/bin/sh\nset -e\ncd SpecForge\n"
               "python scripts/prepare_hidden_states.py --target-model-path "
               f"{target} --data-path ../data/sharegpt --output-path ../cache/hidden_states\n"
               "torchrun --nproc_per_node 8 scripts/train_eagle3.py --target-model-path "
               f"{target} --draft-model-config configs/qwen3.5-397b-a17b-eagle3.json "
               "--output-dir ../outputs/qwen3.5-397b-a17b-eagle3 --num-epochs 6\n", old)
    # ShareGPT-style training data
    data = os.path.join(e, "data", "sharegpt")
    os.makedirs(data)
    for k in range(4):
        lines = []
        for i in range(50):
            q, a = SHAREGPT_TURNS[(i + k) % len(SHAREGPT_TURNS)]
            lines.append(json.dumps({"id": f"sg-{k}-{i}", "conversations": [
                {"from": "human", "value": q}, {"from": "gpt", "value": a}]}))
        write_text(os.path.join(data, f"sharegpt_train_{k:02d}.jsonl"), "\n".join(lines) + "\n",
                   older)
    # cached hidden states: 24 row ranges x 5 files x 40 GB = 4.8 TB (torch zip files)
    hs = os.path.join(e, "cache", "hidden_states")
    for r in range(24):
        rd = os.path.join(hs, f"rows_{r * 2000}-{(r + 1) * 2000}")
        os.makedirs(rd)
        for n in range(5):
            write_sparse(os.path.join(rd, f"data_{r * 2000 + n * 400}.ckpt"),
                         b"PK\x03\x04" + b"\0" * 26 + b"archive/data.pkl", 40_000_000_000,
                         old, old)
    # draft checkpoints, one per epoch
    out = os.path.join(e, "outputs", "qwen3.5-397b-a17b-eagle3")
    draft = [("midlayer.self_attn.q_proj.weight", "BF16", [4096, 2 * HIDDEN]),
             ("midlayer.self_attn.k_proj.weight", "BF16", [1024, 2 * HIDDEN]),
             ("midlayer.self_attn.v_proj.weight", "BF16", [1024, 2 * HIDDEN]),
             ("midlayer.self_attn.o_proj.weight", "BF16", [HIDDEN, 4096]),
             ("midlayer.mlp.gate_proj.weight", "BF16", [12288, HIDDEN]),
             ("midlayer.mlp.up_proj.weight", "BF16", [12288, HIDDEN]),
             ("midlayer.mlp.down_proj.weight", "BF16", [HIDDEN, 12288]),
             ("fc.weight", "BF16", [HIDDEN, 3 * HIDDEN]),
             ("norm.weight", "BF16", [HIDDEN]),
             ("lm_head.weight", "BF16", [32000, HIDDEN]),
             ("d2t", "I64", [32000]), ("t2d", "U8", [VOCAB])]
    for ep in range(6):
        cd = os.path.join(out, f"epoch_{ep}")
        os.makedirs(cd)
        t = old + ep * 0.5 * DAY
        write_text(os.path.join(cd, "config.json"), json.dumps(DRAFT_CONFIG, indent=2), t)
        write_safetensors(os.path.join(cd, "model.safetensors"), draft, t, t)
        write_sparse(os.path.join(cd, "training_state.pt"), b"PK\x03\x04", 3_200_000_000, t, t)


# -- the rest ------------------------------------------------------------------------------
MAKESELF_HEAD = """#!/bin/sh
# This script was generated using Makeself 2.4.5
# The license covering this archive and its contents, if any, is wholly independent of the
# Makeself license (GPL)

ORIG_UMASK=`umask`
CRCsum="0000000000"
MD5="00000000000000000000000000000000"
SHA="0000000000000000000000000000000000000000000000000000000000000000"
TMPROOT=${TMPDIR:=/tmp}
USER_PWD="$PWD"
export USER_PWD
ARCHIVE_DIR=`dirname "$0"`
export ARCHIVE_DIR

label="CUDA Toolkit 13.0.1 (driver 580.82.07)"
script="./cuda-installer"
scriptargs=""
licensetxt=""
helpheader=''
targetdir="pkg"
filesizes="4302653440"
"""

FREEZE_PKGS = """accelerate==1.7.0
aiohttp==3.11.18
annotated-types==0.7.0
datasets==3.6.0
einops==0.8.1
fastapi==0.115.12
filelock==3.18.0
flashinfer-python==0.2.5
fsspec==2025.3.0
huggingface-hub==0.32.4
idna==3.10
Jinja2==3.1.6
modelscope==1.26.0
msgspec==0.19.0
ninja==1.11.1.4
numpy==2.2.6
nvidia-cublas-cu12==12.8.3.14
nvidia-cuda-cupti-cu12==12.8.57
nvidia-cuda-nvrtc-cu12==12.8.61
nvidia-cuda-runtime-cu12==12.8.57
nvidia-cudnn-cu12==9.7.1.26
nvidia-cufft-cu12==11.3.3.41
nvidia-cufile-cu12==1.13.0.11
nvidia-curand-cu12==10.3.9.55
nvidia-cusolver-cu12==11.7.2.55
nvidia-cusparse-cu12==12.5.7.53
nvidia-cusparselt-cu12==0.6.3
nvidia-ml-py==12.575.51
nvidia-modelopt==0.29.0
nvidia-nccl-cu12==2.26.2
nvidia-nvjitlink-cu12==12.8.61
nvidia-nvtx-cu12==12.8.55
orjson==3.10.18
outlines==0.1.11
packaging==25.0
pillow==11.2.1
psutil==7.0.0
pydantic==2.11.5
pyzmq==26.4.0
requests==2.32.3
safetensors==0.5.3
sentencepiece==0.2.0
sgl-kernel==0.1.4
sglang==0.4.6.post5
tiktoken==0.9.0
tokenizers==0.21.1
torch==2.7.1+cu128
torchao==0.11.0
torchaudio==2.7.1+cu128
torchvision==0.22.1+cu128
tqdm==4.67.1
transformers==4.52.4
triton==3.3.1
uvicorn==0.34.3
uvloop==0.21.0
xgrammar==0.1.19
"""


def build_rest(root: str, now: float) -> None:
    old = now - 120 * DAY
    write_sparse(os.path.join(root, RUNFILE), MAKESELF_HEAD.encode(), RUNFILE_SIZE, old, old)
    write_text(os.path.join(root, FREEZE), FREEZE_PKGS, now - 200 * DAY)
    lf = os.path.join(root, "lost+found")
    if not os.path.isdir(lf):
        os.mkdir(lf, 0o700)


def build_tree(root: str) -> None:
    """Write the story's contents into the (empty) directory ``root``."""
    now = time.time()
    build_model(root, now)
    build_eagle3(root, now)
    build_rest(root, now)
    settle_dir_times(root)


def settle_dir_times(root: str) -> None:
    """Give every directory below ``root`` the times of its newest content, as if the tree
    had been written back then rather than a moment ago."""
    for d, subdirs, files in os.walk(root, topdown=False):
        if d == root:
            continue
        times = [os.lstat(os.path.join(d, n)) for n in subdirs + files]
        if times:
            os.utime(d, (max(t.st_atime for t in times), max(t.st_mtime for t in times)),
                     follow_symlinks=False)


# -- where it lives ------------------------------------------------------------------------
def _run(*cmd: str) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise OSError(f"{' '.join(cmd)}: {p.stderr.strip() or p.returncode}")
    return p.stdout.strip()


def can_loop_mount() -> bool:
    return (os.geteuid() == 0 and all(shutil.which(c) for c in ("losetup", "mkfs.ext4", "mount"))
            and os.path.exists("/dev/loop-control"))


@dataclass
class Demo:
    """The example volume: a loop-mounted ext4 image or a plain directory."""

    path: str                       # the stand-in for /data
    workdir: str | None = None      # temp dir we made (image, mountpoint); removed on close
    image: str | None = None
    device: str | None = None
    undo: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "loop-mounted ext4 image" if self.device else "plain directory"

    def teardown_commands(self) -> list[str]:
        cmds = []
        if self.device:
            cmds += [f"umount {self.path}", f"losetup -d {self.device}"]
        cmds.append(f"rm -rf {self.workdir or self.path}")
        return cmds

    def close(self) -> list[str]:
        """Undo what was made, in reverse; returns what could not be undone."""
        problems = []
        if self.device:
            cmds = [("losetup", "-d", self.device)]
            if os.path.ismount(self.path):
                cmds.insert(0, ("umount", self.path))
            else:       # retired by the demo's apply: unmounted, its mount point locked
                cmds.append(("chattr", "-i", self.path))
            for cmd in cmds:
                try:
                    _run(*cmd)
                except OSError as e:
                    problems.append(str(e))
        if not problems:
            shutil.rmtree(self.workdir or self.path, ignore_errors=True)
        return problems


def create(dir: str | None = None, *, loop: bool | None = None) -> Demo:
    """Make the example volume and fill it. ``dir``: build a plain directory ``DIR/data``
    there; otherwise a loop-mounted ext4 image when root (``loop``), else a temp directory."""
    if dir is not None:
        path = os.path.join(os.path.abspath(dir), "data")
        os.makedirs(path)
        demo = Demo(path=path)
    elif loop if loop is not None else can_loop_mount():
        workdir = tempfile.mkdtemp(prefix="vacate-demo-")
        os.chmod(workdir, 0o755)
        demo = Demo(path=os.path.join(workdir, "data"), workdir=workdir,
                    image=os.path.join(workdir, "data.img"))
        try:
            with open(demo.image, "wb") as f:
                f.truncate(IMAGE_MB << 20)
            # 4 kB blocks: sparse files up to 16 TB (1 kB blocks, mke2fs's choice for a small
            # image, would stop at 16 GB)
            _run("mkfs.ext4", "-q", "-F", "-b", "4096", "-L", "data", "-E",
                 "root_owner=0:0", demo.image)
            os.mkdir(demo.path)
            demo.device = _run("losetup", "-f", "--show", demo.image)
            try:
                _run("mount", "-t", "ext4", "-o", "relatime", demo.device, demo.path)
            except OSError:
                _run("losetup", "-d", demo.device)
                demo.device = None
                raise
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
    else:
        workdir = tempfile.mkdtemp(prefix="vacate-demo-")
        demo = Demo(path=os.path.join(workdir, "data"), workdir=workdir)
        os.mkdir(demo.path)
    try:
        build_tree(demo.path)
    except BaseException:
        demo.close()
        raise
    return demo
