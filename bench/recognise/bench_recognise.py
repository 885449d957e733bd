"""What recognising costs on top of walking, and how little it reads.

Builds trees in a fresh temp dir, then per round (interleaved) times ``du -s``, the walk alone
(``collectors.walk``) and the recognisers over the walk's result (``recognise.annotate``),
and counts the bytes the recognisers read (``rchar`` of /proc/self/io). Prints medians and the
ratios against ``du -s`` and against the walk.

    python3 bench/recognise/bench_recognise.py --runs 5

Trees: ``story`` (``vacate demo``'s volume: a 234 GB NVFP4 model in 61 sparse shards, 4.8 TB
of hidden states, draft checkpoints, ...), ``hub`` (a Hugging Face hub cache of 40 model repos,
2 revisions each, sparse shards), ``smallfiles`` (200k small files in 2,000 directories under
20 top-level entries: nothing to recognise, the most listing per byte).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

from vacate import demo
from vacate.observing.collectors import walk
from vacate.observing.model.inventory import Item
from vacate.observing.recognise import annotate


def build_story(root: str) -> None:
    demo.build_tree(root)


def build_hub(root: str) -> None:
    from test_recognise import sparse_shard

    hub = os.path.join(root, "hub")
    for r in range(40):
        repo = os.path.join(hub, f"models--org{r}--Model-{r}B")
        blobs = os.path.join(repo, "blobs")
        os.makedirs(blobs)
        files = {}
        conf = json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})
        with open(os.path.join(blobs, f"c{r:038d}"), "w") as f:
            f.write(conf)
        files["config.json"] = f"c{r:038d}"
        for s in range(1, 5):
            name = f"model-{s:05d}-of-00004.safetensors"
            h = f"{r:032d}{s:032d}"
            sparse_shard(os.path.join(blobs, h), [(f"layers.{s}.w", "BF16", [8192, 65536])])
            files[name] = h
        for rev in (f"{r:040d}", f"{r + 1:040d}"):
            snap = os.path.join(repo, "snapshots", rev)
            os.makedirs(snap)
            for n, h in files.items():
                os.symlink(os.path.join("..", "..", "blobs", h), os.path.join(snap, n))
        os.makedirs(os.path.join(repo, "refs"))
        with open(os.path.join(repo, "refs", "main"), "w") as f:
            f.write(f"{r + 1:040d}")


def build_smallfiles(root: str) -> None:
    for t in range(20):
        for d in range(100):
            p = os.path.join(root, f"top{t}", f"sub{d}")
            os.makedirs(p)
            for i in range(100):
                with open(os.path.join(p, f"f{i}.txt"), "w") as f:
                    f.write("x")


def rchar() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def one_round(root: str) -> dict[str, float]:
    t = time.perf_counter()
    subprocess.run(["du", "-s", root], check=True, capture_output=True)
    du = time.perf_counter() - t
    t = time.perf_counter()
    w = walk.walk(root)
    wt = time.perf_counter() - t
    items = tuple(Item("item:" + os.path.relpath(p, root), p, None, d, s) for p, d, s in w.top)
    r0 = rchar()
    t = time.perf_counter()
    out, _ = annotate(items, w.dirs)
    at = time.perf_counter() - t
    return {"du": du, "walk": wt, "annotate": at, "read": rchar() - r0,
            "items": len(out), "apparent": w.root.apparent_bytes, "entries": w.entries}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--trees", default="story,hub,smallfiles")
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="vacate-bench-recognise-")
    try:
        roots = {}
        for name in a.trees.split(","):
            roots[name] = os.path.join(base, name)
            os.makedirs(roots[name])
            globals()[f"build_{name}"](roots[name])
        res: dict[str, list[dict]] = {n: [] for n in roots}
        for _ in range(a.runs):
            for n, r in roots.items():
                res[n].append(one_round(r))
        print(f"{a.runs} rounds, interleaved; medians")
        print("| tree | entries | apparent | du -s ms | walk ms | recognise ms | recognise/du |"
              " recognise/walk | bytes read by recognisers | items |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n, rs in res.items():
            def med(k, rs=rs):
                return statistics.median(x[k] for x in rs)
            print(f"| {n} | {rs[0]['entries']:,} | {rs[0]['apparent'] / 1e9:,.1f} GB | "
                  f"{med('du') * 1e3:.1f} | {med('walk') * 1e3:.1f} | {med('annotate') * 1e3:.1f}"
                  f" | {med('annotate') / med('du'):.2f} | {med('annotate') / med('walk'):.2f} | "
                  f"{med('read') / 1e6:.2f} MB | {rs[0]['items']} |")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
