"""Walk the tree below one top-level item, recognising what is there: leaf recognisers first
(a directory they are sure of is not descended into), then, below, the children, and the
composites and the mixed-content summary over what the children turned out to be."""

from __future__ import annotations

import os

from vacate.model.inventory import Classification, Item, Stats
from vacate.output.units import human_bytes
from vacate.recognise import base
from vacate.recognise.base import Ctx, Node
from vacate.recognise.read import Reader

MAX_DEPTH = 6
FILES_PER_DIR = 64      # files recognised per directory, largest first
MAX_NODES = 3000        # directories and files looked at per top-level item
MAX_ITEMS = 500         # sub-items reported per top-level item
SURE = 0.75             # a leaf recogniser this sure ends the descent
GENERIC = ("directory", "file")

PLURAL = {
    "model": "models", "draft-model": "draft models", "gguf": "GGUF files",
    "checkpoint": "checkpoints", "training-output": "training outputs", "dataset": "datasets",
    "installer": "installers", "env-backup": "environment backups", "venv": "venvs",
    "conda-env": "conda envs", "source-code": "source checkouts",
    "container-image": "container images", "vm-image": "VM images", "cache": "caches",
    "logs": "logs", "filesystem-artifact": "filesystem artifacts", "core-dump": "core dumps",
}


class Explorer:
    def __init__(self, dir_stats: dict[str, Stats], budget_s: float = 10.0):
        self.dir_stats = dir_stats
        self.budget_s = budget_s

    def item(self, it: Item) -> tuple[Classification, list[Item], list]:
        reader = Reader(self.budget_s)
        self.nodes = 0
        node = self.node(it.path, it.is_dir, it.stats, 0, it.path, reader)
        subs: list[Item] = []
        self.emit(node, it.path, it.path, subs)
        if reader.expired:
            reader.warn("recognise-timeout", it.path,
                        f"stopped looking after {self.budget_s:.0f} s; the label may be partial")
        return node.classification, subs, reader.problems

    def node(self, path: str, is_dir: bool, stats: Stats, depth: int, top: str,
             reader: Reader) -> Node:
        self.nodes += 1
        ctx = Ctx(path, is_dir, stats, reader, depth, top, self.dir_stats.get)
        if not is_dir:
            c = base.best(ctx, base.FILES) or generic(ctx)
            return Node(path, False, stats, c)
        c = base.best(ctx, base.DIRS)
        if (c is not None and c.confidence >= SURE) or depth >= MAX_DEPTH or reader.expired:
            return Node(path, True, stats, c or generic(ctx))
        ctx.children = self.children(ctx, depth, top, reader)
        leaf = c
        c = base.best(ctx, base.COMPOSITES, c)
        if c is None or c.confidence < 0.5:
            m = mixed(ctx)
            if m is not None and (c is None or m.confidence > c.confidence):
                c = m
        c = c or generic(ctx)
        return Node(path, True, stats, c, ctx.children if c is not leaf else [])

    def children(self, ctx: Ctx, depth: int, top: str, reader: Reader) -> list[Node]:
        lst = ctx.listing()
        out: list[Node] = []
        for d in lst.dirs:
            if self.nodes >= MAX_NODES or reader.expired:
                break
            p = ctx.join(d)
            st = self.dir_stats.get(p)
            if st is None:          # not walked: another filesystem, or unreadable
                continue
            out.append(self.node(p, True, st, depth + 1, top, reader))
        files = sorted(lst.files.values(), key=lambda f: f.size, reverse=True)
        for f in files[:FILES_PER_DIR]:
            if self.nodes >= MAX_NODES or reader.expired:
                break
            p = ctx.join(f.name)
            st = file_stats(p, f)
            out.append(self.node(p, False, st, depth + 1, top, reader))
        rest = files[FILES_PER_DIR:]
        if rest or lst.truncated:
            out.append(Node(ctx.path + os.sep + "*", False,
                            Stats(sum(f.size for f in rest), sum(f.disk for f in rest),
                                  len(rest), 0),
                            Classification("file", "other files", confidence=0.0)))
        return out

    def emit(self, node: Node, top: str, parent: str, out: list[Item]) -> None:
        for ch in node.children:
            if len(out) >= MAX_ITEMS:
                return
            if ch.path.endswith(os.sep + "*"):
                continue
            c = ch.classification
            if c.kind not in GENERIC and c.label != "empty directory":
                rel = os.path.relpath(ch.path, os.path.dirname(top))
                out.append(Item("item:" + rel, ch.path, parent, ch.is_dir, ch.stats, c))
            self.emit(ch, top, parent, out)


def file_stats(path: str, f: base.FileInfo) -> Stats:
    try:
        st = os.lstat(path)
        return Stats(st.st_size, st.st_blocks * 512, 1, 0, st.st_mtime, st.st_atime)
    except OSError:
        return Stats(f.size, f.disk, 1, 0)


def generic(ctx: Ctx) -> Classification:
    if ctx.is_dir:
        return Classification("directory", "directory", confidence=0.0)
    return Classification("file", "file", confidence=0.0)


def summarise(children: list[Node], limit: int = 4) -> tuple[str, list[tuple[str, int]]]:
    """"4.5 TB cache, 2.0 GB checkpoints, ..." from the largest kinds among the children."""
    by: dict[str, list[int]] = {}
    for ch in children:
        k = ch.classification.kind
        if k in GENERIC or ch.classification.label == "empty directory":
            k = "other"
        e = by.setdefault(k, [0, 0])
        e[0] += ch.stats.apparent_bytes
        e[1] += 1
    order = sorted(by.items(), key=lambda kv: kv[1][0], reverse=True)
    parts = []
    for k, (b, n) in order[:limit]:
        noun = "other files" if k == "other" else (
            PLURAL.get(k, k) if n > 1 else k.replace("-", " "))
        parts.append(f"{human_bytes(b)} {f'in {n} ' if n > 1 and k != 'other' else ''}{noun}")
    if len(order) > limit:
        parts.append(f"{len(order) - limit} more kinds")
    return ", ".join(parts), [(k, v[0]) for k, v in order]


def mixed(ctx: Ctx) -> Classification | None:
    kids = ctx.children or []
    known = [c for c in kids if c.classification.kind not in GENERIC]
    if not known:
        return None
    text, order = summarise(kids)
    kinds = [k for k, _ in order if k != "other"]
    if len(kinds) == 1 and order[0][0] != "other":
        recs = {c.classification.recoverable for c in known}
        return base.cls("directory", f"{PLURAL.get(kinds[0], kinds[0])}: " + ", ".join(
                            os.path.basename(c.path) for c in known[:4])
                        + (f" and {len(known) - 4} more" if len(known) > 4 else "")
                        + f"; {text}",
                        recoverable=recs.pop() if len(recs) == 1 else None, confidence=0.5,
                        evidence=("contents",), parts=dict(order))
    return base.cls("directory", f"mixed: {text}", confidence=0.4, evidence=("contents",),
                    parts=dict(order))
