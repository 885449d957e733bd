"""Walk the tree below one top-level item, recognising what is there: leaf recognisers first
(a directory they are sure of is not descended into), then, below, the children, and the
composites and the mixed-content summary over what the children turned out to be."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from vacate.observing.collectors.special import special_file
from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification, Item, Stats
from vacate.observing.recognise import base
from vacate.observing.recognise.base import Ctx, Node
from vacate.observing.recognise.read import Reader

MAX_DEPTH = 6
SUBDIRS_PER_DIR = 32    # subdirectories looked into per directory, largest first, plus
MAX_ITEMS = 500         # sub-items reported per top-level item
# ... and those whose names say what they are (hub repos, checkpoints), as many as can still
# be reported: looking at more of one directory's than that is time spent on nothing shown
NAMED_SUBDIRS = MAX_ITEMS - SUBDIRS_PER_DIR
NAMED = re.compile(r"^(models|datasets|spaces)--|checkpoint|global_step|epoch|step|iter_|ckpt",
                   re.IGNORECASE)
RECOGNISED_PER_DIR = 16  # files the file recognisers look at per directory (notable ones)
NOTABLE_SIZE = 1 << 20
NOTABLE = re.compile(
    r"(\.(run|whl|deb|rpm|gguf|safetensors|onnx|engine|plan|qcow2|vmdk|vdi|vhdx|img|raw|sif|"
    r"jsonl|parquet|arrow|ya?ml|sh)|requirements.*\.txt|freeze.*|^core(\.\d+)?|\.log)$")
MAX_NODES = 3000        # directories and files looked at per top-level item
ITEM_ENTRIES = 20_000   # directory entries listed per top-level item ...
TOTAL_ENTRIES = 200_000  # ... and for all of them (each still lists at least its own)
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


MIN_ITEM_ENTRIES = 256  # ... and at least this many for each


def entry_budgets(items: Sequence[Item]) -> list[int]:
    """The directory entries each top-level item may list: what it holds, at most
    ``ITEM_ENTRIES``; when those add up to more than ``TOTAL_ENTRIES``, a fair share of it
    (the smaller items get what they hold, the rest share what is left equally), and never
    less than ``MIN_ITEM_ENTRIES``. Fixed before anything is looked at, so the items can be
    looked at in any order, or side by side, with the same result."""
    caps = [min(ITEM_ENTRIES, it.stats.files + it.stats.dirs if it.is_dir else 1)
            for it in items]
    level = ITEM_ENTRIES
    left, n = TOTAL_ENTRIES, len(caps)
    for k, cap in enumerate(sorted(caps)):
        share = left // (n - k)
        if cap > share:
            level = share
            break
        left -= cap
    return [max(MIN_ITEM_ENTRIES, min(cap, level)) for cap in caps]


class Subtree(NamedTuple):
    """A subdirectory of a top-level item looked at on its own (elsewhere, side by side), with
    what looking at it took: it stands in for looking at it in order when the item's budget
    had room for all of that (see :meth:`Explorer.subtree`)."""

    node: Node
    entries: int          # directory entries its listings took
    nodes: int
    problems: tuple


class Explorer:
    def __init__(self, dir_stats: Callable[[str], Stats | None], budget_s: float = 10.0,
                 looked: Callable[[str], Subtree | None] | None = None):
        self.dir_stats = dir_stats      # path -> the walked directory's subtree Stats
        self.budget_s = budget_s
        self.nodes = 0                  # per top-level item
        self.top_stats = Stats()
        self.looked = looked            # path -> that subdirectory of the item, looked at already

    def item(self, it: Item, entries: int = ITEM_ENTRIES,
             ) -> tuple[Classification, list[Item], list]:
        """What ``it`` is, the artifacts recognised below it, and the problems met, listing at
        most ``entries`` directory entries (see :func:`entry_budgets`)."""
        return self._item(it, Reader(self.budget_s, entries))

    def _item(self, it: Item, reader: Reader) -> tuple[Classification, list[Item], list]:
        self.nodes = 0
        self.top_stats = it.stats
        special = None if it.is_dir else special_file(it.path)
        if special is not None:
            return special, [], []
        node = self.node(it.path, it.is_dir, it.stats, 0, it.path, reader)
        subs: list[Item] = []
        self.emit(node, it.path, it.path, subs)
        c = node.classification
        if reader.timed_out:
            reader.warn("recognise-timeout", it.path,
                        f"stopped looking after {self.budget_s:.1f} s; the label may be partial")
        elif reader.expired and it.is_dir:
            # A big tree: only part of it was looked at (by design, not a fault).
            c = Classification(c.kind, c.label, c.recoverable, c.source,
                               dict(c.details, partial=True), c.confidence, c.guess, c.evidence)
        return c, subs, reader.problems

    def node(self, path: str, is_dir: bool, stats: Stats, depth: int, top: str,
             reader: Reader, look: bool = True) -> Node:
        self.nodes += 1
        ctx = Ctx(path, is_dir, stats, reader, depth, top, self.dir_stats)
        if not is_dir:
            c = (base.best(ctx, base.FILES) if look else None) or generic(ctx)
            return Node(path, False, stats, c)
        c = base.best(ctx, base.DIRS)
        if (c is not None and c.confidence >= SURE) or depth >= MAX_DEPTH or reader.expired:
            kids: list[Node] = []
            if (c is not None and c.kind == "source-code" and stats.apparent_bytes >= BIG
                    and depth < MAX_DEPTH and not reader.expired):
                # A checkout holding gigabytes holds more than code (weights, data, outputs):
                # report what is big inside it.
                ctx.children = self.children(ctx, depth, top, reader)
                kids = ctx.children
            return Node(path, True, stats, c or generic(ctx), kids)
        ctx.children = self.children(ctx, depth, top, reader)
        c = base.best(ctx, base.COMPOSITES, c)
        if c is None or c.confidence < 0.5:
            m = mixed(ctx)
            if m is not None and (c is None or m.confidence > c.confidence):
                c = m
        c = c or generic(ctx)
        return Node(path, True, stats, c, ctx.children)

    def subdirs(self, path: str, lst: base.Listing) -> tuple[list[tuple[str, Stats]], Stats]:
        """The subdirectories of ``path`` to look into, in order (largest first, then those
        whose names say what they are), and the Stats of the others together."""
        subdirs = [(p, st) for p in (os.path.join(path, d) for d in lst.dirs)
                   if (st := self.dir_stats(p)) is not None]   # None: not walked
        subdirs.sort(key=lambda ps: ps[1].apparent_bytes, reverse=True)
        named = [ps for ps in subdirs[SUBDIRS_PER_DIR:]
                 if NAMED.search(os.path.basename(ps[0]))][:NAMED_SUBDIRS]
        look = subdirs[:SUBDIRS_PER_DIR] + named
        seen = {p for p, _ in look}
        rest = Stats()
        for p, st in subdirs[SUBDIRS_PER_DIR:]:
            if p not in seen:
                rest = Stats(rest.apparent_bytes + st.apparent_bytes,
                             rest.disk_bytes + st.disk_bytes, rest.files + st.files,
                             rest.dirs + st.dirs)
        return look, rest

    def children(self, ctx: Ctx, depth: int, top: str, reader: Reader) -> list[Node]:
        lst = ctx.listing()
        out: list[Node] = []
        look, rest = self.subdirs(ctx.path, lst)
        for p, st in look:
            if self.nodes >= MAX_NODES or reader.expired:
                break
            out.append(self.subtree(p, st, depth + 1, top, reader))
        files = sorted(lst.files.values(), key=lambda f: f.size, reverse=True)
        looked = 0
        stop = self.nodes >= MAX_NODES or reader.expired
        other: list[base.FileInfo] = []
        for f in files:
            if (stop or looked >= RECOGNISED_PER_DIR or f.is_link or not f.regular
                    or (f.size < NOTABLE_SIZE and not NOTABLE.search(f.name))):
                other.append(f)
                continue
            looked += 1
            stop = self.nodes >= MAX_NODES or reader.expired
            p = ctx.join(f.name)
            out.append(self.node(p, False, file_stats(f), depth + 1, top, reader))
        if other or lst.truncated or rest.dirs:
            out.append(Node(ctx.path + os.sep + "*", False,
                            Stats(rest.apparent_bytes + sum(f.size for f in other),
                                  rest.disk_bytes + sum(f.disk for f in other),
                                  rest.files + len(other), rest.dirs),
                            Classification("file", "other files", confidence=0.0)))
        return out

    def subtree(self, path: str, st: Stats, depth: int, top: str, reader: Reader) -> Node:
        """:meth:`node` of a subdirectory, or, for one of the item's own subdirectories looked
        at already (``self.looked``), that result, when looking at it here would have listed
        and counted the same: the entries and nodes it took are left in this item's budgets
        (a listing's cap depends on the entries left, and a budget spent midway stops the
        looking). Otherwise it is looked at here."""
        done = self.looked(path) if self.looked is not None and depth == 1 else None
        if done is None or done.entries >= reader.entries_left or (
                self.nodes + done.nodes >= MAX_NODES):
            return self.node(path, True, st, depth, top, reader)
        reader.entries_left -= done.entries
        self.nodes += done.nodes
        reader.problems.extend(done.problems)
        return done.node

    def reach(self, it: Item, entries: int) -> list[tuple[str, int]]:
        """The subdirectories of ``it`` its entry budget is expected to reach, in order, each
        with the entries expected to be listed below it."""
        lst = base.list_dir(it.path, Reader(self.budget_s, entries))
        look, _ = self.subdirs(it.path, lst)
        left = entries - len(lst.dirs) - len(lst.files)
        reach: list[tuple[str, int]] = []
        for p, st in look[:MAX_NODES]:
            if left <= 0:
                break
            cost = min(max(st.files + st.dirs - 1, 1), left)   # what is below it, listed
            reach.append((p, cost))
            left -= cost
        return reach

    def look_ahead(self, it: Item, entries: int, parts: int = 2,
                   reach: list[tuple[str, int]] | None = None) -> list[list[str]]:
        """The subdirectories of ``it`` worth looking at elsewhere, side by side with it: of
        those its entry budget is expected to reach (:meth:`reach`, unless given), in order,
        all but the first of ``parts`` runs holding about as many entries each (the first is
        looked at here meanwhile)."""
        if reach is None:
            reach = self.reach(it, entries)
        total, acc = sum(c for _, c in reach), 0
        runs: list[list[str]] = [[] for _ in range(max(parts, 1))]
        for p, c in reach:
            runs[min(int(acc * parts / total), parts - 1)].append(p)
            acc += c
        return [r for r in runs[1:] if r]

    def subtrees(self, it: Item, paths: Sequence[str]) -> dict[str, Subtree]:
        """``paths`` (subdirectories of ``it``) looked at one by one, each as if the item's
        budgets were untouched, for :meth:`subtree` to take in order. Stops when the time
        budget is spent (what was cut short is left out)."""
        reader = Reader(self.budget_s, 1 << 62)
        self.top_stats = it.stats
        out: dict[str, Subtree] = {}
        for p in paths:
            st = self.dir_stats(p)
            if st is None:
                continue
            self.nodes = 0
            before, probs = reader.entries_left, len(reader.problems)
            node = self.node(p, True, st, 1, it.path, reader)
            if reader.timed_out:
                break
            out[p] = Subtree(node, before - reader.entries_left, self.nodes,
                             tuple(reader.problems[probs:]))
        return out

    def emit(self, node: Node, top: str, parent: str, out: list[Item]) -> None:
        for ch in node.children:
            if len(out) >= MAX_ITEMS:
                return
            if ch.path.endswith(os.sep + "*"):
                continue
            c = ch.classification
            if significant(c, ch.stats, self.top_stats):
                rel = os.path.relpath(ch.path, os.path.dirname(top))
                out.append(Item("item:" + rel, ch.path, parent, ch.is_dir, ch.stats, c))
            self.emit(ch, top, parent, out)


# Kinds always worth a row of their own; the rest (caches, logs, requirement files, plain
# directories, ...) only when big: a software tree holds hundreds of __pycache__ dirs.
ARTIFACT_KINDS = frozenset({
    "model", "draft-model", "gguf", "checkpoint", "training-output", "dataset", "installer",
    "venv", "conda-env", "container-image", "vm-image", "core-dump", "filesystem-artifact"})
BIG = 1 << 30


def significant(c: Classification, st: Stats, whole: Stats) -> bool:
    """Worth naming inside ``whole``: an artifact, or a cache/log/file that is big in it."""
    if c.kind in GENERIC or c.label == "empty directory":
        return False
    if (c.kind in ARTIFACT_KINDS or c.details.get("what") == "hidden-states"
            or c.details.get("repo_id")):
        return True
    if c.kind == "source-code" and c.details.get("remote", c.details.get("gitdir")) is not None:
        return True      # a git checkout with a remote or a worktree: where the code came from
    size = st.apparent_bytes
    return size >= BIG or (size >= whole.apparent_bytes / 20 and size >= 1 << 20)


def file_stats(f: base.FileInfo) -> Stats:
    return Stats(f.size, f.disk, 1, 0, f.mtime, f.atime)


def generic(ctx: Ctx) -> Classification:
    if ctx.is_dir:
        return Classification("directory", "directory", confidence=0.0)
    return Classification("file", "file", confidence=0.0)


def summarise(children: list[Node], limit: int = 4) -> tuple[str, list[tuple[str, int]]]:
    """"4.5 TB cache, 2.0 GB checkpoints, ..." from the largest kinds among the children."""
    by: dict[str, list[int]] = {}
    whole = Stats(sum(ch.stats.apparent_bytes for ch in children))
    for ch in _parts(children):
        k = ch.classification.kind
        if not significant(ch.classification, ch.stats, whole):
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


def _parts(children: list[Node]) -> list[Node]:
    """The children, with plain directories replaced by what was recognised inside them."""
    out = []
    for ch in children:
        if ch.classification.kind == "directory" and ch.children:
            out.extend(_parts(ch.children))
        else:
            out.append(ch)
    return out


def mixed(ctx: Ctx) -> Classification | None:
    kids = ctx.children or []
    known = [c for c in _parts(kids) if significant(c.classification, c.stats, ctx.stats)]
    if not known:
        return None
    text, order = summarise(kids)
    kinds = [k for k, _ in order if k != "other"]
    if len(kinds) == 1 and order[0][0] != "other":
        # Recoverable only when everything inside is: unrecognised files may be unique.
        # A guess inside is no ground for the whole either.
        recs = {c.classification.recoverable for c in known} if len(order) == 1 and not any(
            c.classification.guess for c in known) else {None}
        k = kinds[0]
        noun = PLURAL.get(k, k) if len(known) > 1 else k.replace("-", " ")
        names = ", ".join(os.path.relpath(c.path, ctx.path) for c in known[:4]) + (
            f" and {len(known) - 4} more" if len(known) > 4 else "")
        other = dict(order).get("other")
        label = (f"{len(known)} {noun} ({names}), {human_bytes(dict(order)[k])}"
                 + (f", and {human_bytes(other)} of other files" if other else ""))
        return base.cls("directory", label, recoverable=recs.pop() if len(recs) == 1 else None,
                        confidence=0.5, evidence=("contents",), parts=dict(order))
    return base.cls("directory", f"mixed: {text}", confidence=0.4, evidence=("contents",),
                    parts=dict(order))
