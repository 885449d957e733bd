"""Build (once) the deterministic 1,000,000-file benchmark tree on a loop-mounted ext4 image.

Shape, roughly what a scratch volume of an ML team holds:
  datasets/       training shards: many dirs of jsonl/arrow shards, small files with data
  hub/            a Hugging Face hub-style cache: models--org--name/{blobs,snapshots,refs}, sparse
                  weight blobs, snapshot files as relative symlinks into blobs/ (tree 2: each
                  model complete, 8 shards each beginning with a real safetensors header of
                  its share of the model's tensors, then a hole to the size those tensors
                  need; real config.json, generation_config.json, tokenizer.json and
                  model.safetensors.index.json; refs/main naming the snapshot)
  checkpoints/    runs/checkpoint-N/ with optimizer shards (sparse) and small json files
  src/            source checkouts: nested dirs of small files, hardlinked duplicates
  deep/           a few chains of directories deeper than PATH_MAX
  odd/            names with newlines, spaces and invalid UTF-8
Two versions of the tree, each its own image (built once, reused while its stamp is there;
``mount`` attaches it and prints the mountpoint). Needs root.

  tree 1  /var/tmp/vacate-bench/tree.img   (mnt):  the first tree; its weight blobs are
          zero-filled (64 zero bytes, then a hole) and its configs random bytes, so the
          recognisers report each as malformed, and shard 00000-of-00008 stands where 00008
          should (every model one shard short)
  tree 2  /var/tmp/vacate-bench/tree2.img  (mnt2): the same shape with a hub a download
          would leave (the default)

    python3 bench/scan/bench_scan_tree.py build|mount|umount [--files N] [--tree 1|2]

``VACATE_BENCH_TREE=1`` makes tree 1 the default of this and of bench_scan.py/bench_phases.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass

CACHE = "/var/tmp/vacate-bench"


@dataclass(frozen=True)
class Tree:
    """One version of the bench tree: its image, mountpoint and built-stamp."""
    version: int
    image: str
    mnt: str
    stamp: str


TREES = {
    1: Tree(1, os.path.join(CACHE, "tree.img"), os.path.join(CACHE, "mnt"),
            os.path.join(CACHE, "tree.done")),
    2: Tree(2, os.path.join(CACHE, "tree2.img"), os.path.join(CACHE, "mnt2"),
            os.path.join(CACHE, "tree2.done")),
}
DEFAULT = TREES[int(os.environ.get("VACATE_BENCH_TREE", "2"))]


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def mounted(t: Tree = DEFAULT) -> bool:
    return os.path.ismount(t.mnt)


def mount(t: Tree = DEFAULT, *, writable: bool = False) -> str:
    """Attach the tree's image (read-only unless building it: a benchmark must not change
    the tree, atimes included); a mount left writable by a build is made read-only."""
    os.makedirs(t.mnt, exist_ok=True)
    mode = "rw" if writable else "ro"
    if not mounted(t):
        sh("mount", "-o", f"loop,{mode}", t.image, t.mnt)
    else:
        sh("mount", "-o", f"remount,{mode}", t.mnt)
    return t.mnt


def umount(t: Tree = DEFAULT) -> None:
    if mounted(t):
        sh("umount", t.mnt)


# Model families the hub's models are drawn from: the fields of their published config.json
# (the Qwen2.5 ones as in tests/fixtures/hf/sakura-14b-qwen2.5-index-only/config.json).
# qkv_bias: Qwen2 has q/k/v biases. Sizes: 7-33B parameters, 14-66 GB of bf16, 27 GB mean
# (tree 1's random blobs: 8 x 1-5 GiB, 26 GB mean).
_KEYS = ("architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
         "num_attention_heads", "num_key_value_heads", "vocab_size", "max_position_embeddings",
         "rope_theta", "bos_token_id", "eos_token_id", "qkv_bias")
FAMILIES = tuple(dict(zip(_KEYS, row, strict=True)) for row in (
    (["Qwen2ForCausalLM"], "qwen2", 5120, 13824, 48, 40, 8, 152064, 131072, 1e6, 151643,
     151645, True),
    (["Qwen2ForCausalLM"], "qwen2", 3584, 18944, 28, 28, 4, 152064, 131072, 1e6, 151643,
     151645, True),
    (["Qwen2ForCausalLM"], "qwen2", 5120, 27648, 64, 40, 8, 152064, 131072, 1e6, 151643,
     151645, True),
    (["LlamaForCausalLM"], "llama", 4096, 14336, 32, 32, 8, 128256, 131072, 5e5, 128000,
     128009, False),
    (["LlamaForCausalLM"], "llama", 5120, 13824, 40, 40, 40, 32000, 4096, 1e4, 1, 2, False),
    (["MistralForCausalLM"], "mistral", 4096, 14336, 32, 32, 8, 32768, 32768, 1e6, 1, 2, False),
))
DTYPE_BYTES = {"BF16": 2, "F32": 4}
SHARDS = 8


def tensors(fam: dict, norm_dtype: str) -> list[tuple[str, str, list[int]]]:
    """(name, dtype, shape) of every tensor of a decoder-only model of ``fam``, in the order
    transformers saves them."""
    h, inter, v = fam["hidden_size"], fam["intermediate_size"], fam["vocab_size"]
    kv = h // fam["num_attention_heads"] * fam["num_key_value_heads"]
    out = [("model.embed_tokens.weight", "BF16", [v, h])]
    for i in range(fam["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", norm_dtype, [h]),
                (p + "self_attn.q_proj.weight", "BF16", [h, h]),
                (p + "self_attn.k_proj.weight", "BF16", [kv, h]),
                (p + "self_attn.v_proj.weight", "BF16", [kv, h])]
        if fam["qkv_bias"]:
            out += [(p + "self_attn.q_proj.bias", "BF16", [h]),
                    (p + "self_attn.k_proj.bias", "BF16", [kv]),
                    (p + "self_attn.v_proj.bias", "BF16", [kv])]
        out += [(p + "self_attn.o_proj.weight", "BF16", [h, h]),
                (p + "post_attention_layernorm.weight", norm_dtype, [h]),
                (p + "mlp.gate_proj.weight", "BF16", [inter, h]),
                (p + "mlp.up_proj.weight", "BF16", [inter, h]),
                (p + "mlp.down_proj.weight", "BF16", [h, inter])]
    return out + [("model.norm.weight", norm_dtype, [h]), ("lm_head.weight", "BF16", [v, h])]


def nbytes(dtype: str, shape: list[int]) -> int:
    n = DTYPE_BYTES[dtype]
    for x in shape:
        n *= x
    return n


def shard_headers(ts: list[tuple[str, str, list[int]]]) -> list[tuple[bytes, int, list[str]]]:
    """The model's tensors in ``SHARDS`` consecutive shards of about equal bytes: for each,
    the header (length and JSON, padded with spaces to 8 bytes as the safetensors library
    does), the file size (the last tensor's data ends at the file's end) and its names."""
    total = sum(nbytes(d, s) for _, d, s in ts)
    parts: list[list[tuple[str, str, list[int]]]] = [[] for _ in range(SHARDS)]
    done = 0
    for t in ts:
        b = nbytes(t[1], t[2])
        parts[min(SHARDS - 1, (done + b // 2) * SHARDS // total)].append(t)
        done += b
    out = []
    for part in parts:
        assert part, "a shard with no tensors"
        head: dict = {"__metadata__": {"format": "pt"}}
        off = 0
        for name, dtype, shape in part:
            end = off + nbytes(dtype, shape)
            head[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, end]}
            off = end
        js = json.dumps(head, separators=(",", ":")).encode()
        js += b" " * (-(8 + len(js)) % 8)
        blob = len(js).to_bytes(8, "little") + js
        out.append((blob, len(blob) + off, [n for n, _, _ in part]))
    return out


def git_sha1(data: bytes) -> str:
    """The name the hub gives a small (non-LFS) file's blob: its git blob id."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def tokenizer_json(rnd: random.Random, size: int) -> bytes:
    """A small but well-formed tokenizer.json (BPE) of about ``size`` bytes."""
    abc = "abcdefghijklmnopqrstuvwxyz"
    vocab: dict[str, int] = {}
    doc = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": False,
                             "lstrip": False, "rstrip": False, "normalized": False,
                             "special": True}],
           "normalizer": {"type": "NFC"},
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                             "use_regex": True},
           "post_processor": None, "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "vocab": vocab,
                     "merges": []}}
    dump = lambda: json.dumps(doc, ensure_ascii=False, indent=2).encode()
    while len(dump()) < size:
        tok = "".join(rnd.choice(abc) for _ in range(rnd.randrange(2, 8)))
        if tok not in vocab:
            vocab[tok] = len(vocab)
            if len(tok) > 3 and len(vocab) % 2:
                doc["model"]["merges"].append(f"{tok[:2]} {tok[2:]}")
    return dump()


def write(path: str | bytes, size: int, rnd: random.Random, *, sparse: bool = False,
          dir_fd: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dir_fd)
    try:
        if sparse:
            os.write(fd, b"\0" * 64)
            os.ftruncate(fd, size)
        elif size:
            os.write(fd, rnd.randbytes(size))
    finally:
        os.close(fd)


class Builder:
    def __init__(self, root: str, target: int, seed: int = 42, version: int = 2):
        self.root = root
        self.target = target
        self.version = version
        self.rnd = random.Random(seed)
        self.n = 0

    def f(self, path: str, size: int = 0, **kw) -> None:
        write(path, size, self.rnd, **kw)
        self.n += 1

    def datasets(self, share: int) -> None:
        base = os.path.join(self.root, "datasets")
        per_dir = 500
        for d in range(share // per_dir):
            dd = os.path.join(base, f"corpus-{d // 40:03d}", f"split-{d % 40:02d}")
            os.makedirs(dd, exist_ok=True)
            for i in range(per_dir):
                ext = ("jsonl", "arrow", "parquet")[i % 3]
                self.f(os.path.join(dd, f"shard-{i:05d}.{ext}"), self.rnd.randrange(0, 3000))

    def hub(self, share: int) -> None:
        """Tree 2's hub: 2,500 complete models, as a download leaves them."""
        base = os.path.join(self.root, "hub")
        models = share // 24
        for m in range(models):
            md = os.path.join(base, f"models--org{m % 37}--model-{m:05d}")
            blobs = os.path.join(md, "blobs")
            rev = f"{self.rnd.getrandbits(160):040x}"
            snap = os.path.join(md, "snapshots", rev)
            os.makedirs(blobs, exist_ok=True)
            os.makedirs(snap, exist_ok=True)
            os.makedirs(os.path.join(md, "refs"), exist_ok=True)
            with open(os.path.join(md, "refs", "main"), "w") as f:
                f.write(rev)
            self.n += 1
            fam = dict(self.rnd.choice(FAMILIES))
            norm = "F32" if self.rnd.random() < 0.3 else "BF16"
            ts = tensors(fam, norm)
            index = {"metadata": {"total_size": sum(nbytes(d, s) for _, d, s in ts)},
                     "weight_map": {}}
            files: list[tuple[str, str, bytes, int]] = []    # name, blob, head, size
            for i, (head, size, names) in enumerate(shard_headers(ts), 1):
                name = f"model-{i:05d}-of-{SHARDS:05d}.safetensors"
                index["weight_map"].update((n, name) for n in names)
                files.append((name, f"{self.rnd.getrandbits(256):064x}", head, size))
            index["weight_map"] = dict(sorted(index["weight_map"].items()))
            fam.pop("qkv_bias")
            cfg = {**fam, "attention_dropout": 0.0, "hidden_act": "silu",
                   "initializer_range": 0.02, "rms_norm_eps": 1e-06 if norm == "BF16" else 1e-05,
                   "tie_word_embeddings": False, "torch_dtype": "bfloat16",
                   "transformers_version": f"4.{self.rnd.randrange(38, 50)}.{self.rnd.randrange(3)}",
                   "use_cache": True}
            gen = {"bos_token_id": fam["bos_token_id"], "do_sample": True,
                   "eos_token_id": fam["eos_token_id"], "temperature": 0.7,
                   "top_p": round(self.rnd.uniform(0.8, 0.95), 2),
                   "transformers_version": cfg["transformers_version"]}
            for name, obj in (("config.json", cfg), ("generation_config.json", gen),
                              ("model.safetensors.index.json", index)):
                data = json.dumps(obj, indent=2, sort_keys=True).encode() + b"\n"
                files.append((name, git_sha1(data), data, len(data)))
            data = tokenizer_json(self.rnd, self.rnd.randrange(200, 4000))
            files.append(("tokenizer.json", git_sha1(data), data, len(data)))
            for name, sha, head, size in files:
                fd = os.open(os.path.join(blobs, sha), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                             0o644)
                try:
                    os.write(fd, head)
                    if size > len(head):
                        os.ftruncate(fd, size)
                finally:
                    os.close(fd)
                self.n += 1
                os.symlink(os.path.join("..", "..", "blobs", sha), os.path.join(snap, name))
                self.n += 1

    def hub_zeroed(self, share: int) -> None:
        """Tree 1's hub (kept to rebuild it as it was): zero-filled weight blobs, random
        bytes for configs and refs, shards 00000..00007 of 00008."""
        base = os.path.join(self.root, "hub")
        models = share // 24
        for m in range(models):
            md = os.path.join(base, f"models--org{m % 37}--model-{m:05d}")
            blobs = os.path.join(md, "blobs")
            snap = os.path.join(md, "snapshots", f"{self.rnd.getrandbits(160):040x}")
            os.makedirs(blobs, exist_ok=True)
            os.makedirs(snap, exist_ok=True)
            os.makedirs(os.path.join(md, "refs"), exist_ok=True)
            self.f(os.path.join(md, "refs", "main"), 40)
            for i in range(11):
                sha = f"{self.rnd.getrandbits(256):064x}"
                name = (f"model-{i:05d}-of-00008.safetensors" if i < 8
                        else ("config.json", "tokenizer.json", "generation_config.json")[i - 8])
                if i < 8:
                    self.f(os.path.join(blobs, sha), self.rnd.randrange(1 << 30, 5 << 30),
                           sparse=True)
                else:
                    self.f(os.path.join(blobs, sha), self.rnd.randrange(200, 4000))
                os.symlink(os.path.join("..", "..", "blobs", sha), os.path.join(snap, name))
                self.n += 1

    def checkpoints(self, share: int) -> None:
        base = os.path.join(self.root, "checkpoints")
        per = 20
        for c in range(share // per):
            cd = os.path.join(base, f"run-{c // 100:03d}", f"checkpoint-{(c % 100) * 500}")
            os.makedirs(cd, exist_ok=True)
            for i in range(4):
                self.f(os.path.join(cd, f"optimizer-{i}.pt"), 1 << 28, sparse=True)
            for i in range(per - 4):
                self.f(os.path.join(cd, f"rng_state_{i}.pth"), self.rnd.randrange(100, 2000))

    def src(self, share: int) -> None:
        base = os.path.join(self.root, "src")
        made = 0
        repo = 0
        while made < share:
            rd = os.path.join(base, f"repo-{repo:04d}")
            first = None
            for d in range(30):
                depth = 1 + d % 5
                dd = os.path.join(rd, *(f"pkg{d}_{k}" for k in range(depth)))
                os.makedirs(dd, exist_ok=True)
                for i in range(30):
                    p = os.path.join(dd, f"mod_{i:03d}.py")
                    if first is not None and i % 10 == 0:
                        os.link(first, p)      # hardlinked duplicates (dedup'd checkouts)
                        self.n += 1
                    else:
                        self.f(p, self.rnd.randrange(0, 6000))
                        first = first or p
                    made += 1
                    if made >= share:
                        return
            repo += 1

    def deep(self) -> None:
        for chain in range(3):
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
            path_len = len(self.root)
            name = "d" * 60
            depth = 0
            try:
                for nm in ("deep", f"chain{chain}"):
                    try:
                        os.mkdir(nm, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nfd = os.open(nm, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                    os.close(fd)
                    fd = nfd
                while path_len < 6000:
                    os.mkdir(name, dir_fd=fd)
                    nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                    os.close(fd)
                    fd = nfd
                    path_len += 61
                    depth += 1
                    write("leaf.txt", 10, self.rnd, dir_fd=fd)
                    self.n += 1
            finally:
                os.close(fd)

    def odd(self) -> None:
        base = os.path.join(self.root, "odd")
        os.makedirs(base, exist_ok=True)
        bbase = os.fsencode(base)
        for i in range(200):
            for nm in (f"new\nline-{i}".encode(), b"latin1-\xe9\xff-%d" % i,
                       f"sp ace {i} ".encode(), f"emoji-\u2603-{i}".encode()):
                write(os.path.join(bbase, nm), 10, self.rnd)
                self.n += 1

    def build(self) -> None:
        t = self.target
        self.deep()
        self.odd()
        (self.hub if self.version >= 2 else self.hub_zeroed)(int(t * 0.06))
        self.checkpoints(int(t * 0.10))
        self.datasets(int(t * 0.40))
        self.src(t - self.n)


def build(files: int, t: Tree = DEFAULT) -> None:
    os.makedirs(CACHE, exist_ok=True)
    if os.path.exists(t.stamp):
        print(f"cached: {t.image}")
        return
    umount(t)
    if os.path.exists(t.image):
        os.unlink(t.image)
    with open(t.image, "wb") as f:
        f.truncate(16 << 30)
    sh("mkfs.ext4", "-q", "-F", "-N", str(int(files * 1.3)), "-L", "vacatebench", t.image)
    root = mount(t, writable=True)
    b = Builder(root, files, version=t.version)
    b.build()
    os.sync()
    with open(t.stamp, "w") as f:
        f.write(f"{b.n}\n")
    print(f"built {b.n} entries (files and symlinks) in {t.image}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=("build", "mount", "umount"))
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--tree", type=int, choices=sorted(TREES), default=DEFAULT.version)
    a = ap.parse_args()
    t = TREES[a.tree]
    if os.geteuid() != 0:
        print("needs root (loop mount)", file=sys.stderr)
        return 2
    if a.action == "build":
        build(a.files, t)
    elif a.action == "mount":
        print(mount(t))
    else:
        umount(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
