"""The treemap of a volume, laid out with squarify: area is bytes, nested by directory.

The tree is the report's top-level items, then below each directory the scan's drill-down
table (one row per directory: its subtree's bytes and files); the files of a directory are
not in that table, so what a directory holds beside its subdirectories is one tile,
"N files (size)". A recognised item below the top level (a model inside ``models/``) is a
directory of that table and takes its kind and label.

The size is bounded by design, not by the volume: tiles are laid out breadth first, a tile
below ``min_area`` (a share of the canvas) is folded with its small siblings into one
"N smaller items (size)" tile, nothing is drawn below ``max_depth``, and no more than
``max_tiles`` are drawn in all — a million files give the same few thousand tiles as a
thousand do. :class:`Layout` says how much was folded.

Coordinates are percentages of the canvas, so the page lays out without scripts and at any
width; sibling tiles' areas are proportional to their bytes (a nested tile's header strip
is taken from its parent before its children are laid out).
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass

import squarify

from vacate.observing.human import human_bytes

W, H = 1600.0, 900.0       # the canvas, in layout units (percentages are taken of it)
HEADER = 18.0              # a directory's label strip, above its children
PAD = 2.0


@dataclass(frozen=True)
class Tile:
    """One rectangle: ``parent`` the index of the tile it sits in (-1: the canvas),
    ``x, y, w, h`` percentages of the canvas; ``kind`` the item's kind, ``fold`` for
    "N smaller items", ``files`` for a directory's own files; ``top`` the top-level item it
    is part of (its status and action colour it)."""

    index: int
    parent: int
    depth: int
    path: str
    name: str
    bytes: int
    files: int
    kind: str
    label: str
    top: str
    x: float
    y: float
    w: float
    h: float
    nested: bool = False


@dataclass(frozen=True)
class Layout:
    """The tiles, and what was left out: ``folded`` entries drawn as "N smaller items",
    ``empty`` items of no bytes (not drawable), ``cut`` whether the depth or tile bound
    stopped the descent anywhere."""

    tiles: tuple[Tile, ...]
    folded: int
    empty: int
    cut: bool
    key: str


@dataclass
class _Node:
    """One place of the volume while the map is laid out: a directory from the scan's
    per-directory table, a directory's own files as one place, or a recognised item."""

    path: str
    name: str
    bytes: int
    files: int
    kind: str
    label: str
    top: str
    is_dir: bool
    fold: int = 0


def _children_index(rows) -> dict[str, list]:
    """Directory path -> the drill-down rows of its subdirectories."""
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(os.path.dirname(r[0]), []).append(r)
    return out


class _Tree:
    def __init__(self, items, rows, inside, key: str, hide):
        self.items = items
        self.sub = _children_index(rows)
        self.byte_col = 1 if key == "apparent_bytes" else 2
        self.inside = {i["path"]: i for i in inside}
        self.key = key
        self.hide = hide

    def top(self) -> list[_Node]:
        return [_Node(i["path"], os.path.basename(i["path"]), i[self.key], i["files"],
                      i["kind"] or ("directory" if i.get("is_dir") else "file"),
                      i["label"], i["path"], bool(i.get("is_dir", True)))
                for i in self.items]

    def children(self, n: _Node) -> list[_Node]:
        rows = self.sub.get(n.path, [])
        out = []
        for r in rows:
            rec = self.inside.get(r[0])
            kind = rec["kind"] if rec else "directory"
            label = rec["label"] if rec else ""
            name = os.path.basename(r[0])
            if self.hide:
                name = f"{kind} ({human_bytes(r[self.byte_col])})"
                label = kind
            out.append(_Node(r[0], name, r[self.byte_col], r[3], kind, label, n.top, True))
        rest = n.bytes - sum(c.bytes for c in out)
        files = n.files - sum(c.files for c in out)
        if out and rest > 0 and files > 0:
            out.append(_Node(n.path + "/", f"{files} files ({human_bytes(rest)})", rest, files,
                             "files", "", n.top, False))
        return out


def layout(items, rows, inside, *, key: str = "disk_bytes", hide: bool = False,
           max_depth: int = 4, min_area: float = 0.00025, max_tiles: int = 3000) -> Layout:
    """The treemap of the top-level ``items`` (the report's rows, with ``is_dir``), the
    drill-down ``rows`` and the recognised items ``inside``, by ``key`` (disk_bytes or
    apparent_bytes); ``hide``: names below the top level shown as kind and size."""
    tree = _Tree(items, rows, inside, key, hide)
    tiles: list[Tile] = []
    folded = 0
    empty = sum(1 for i in items if i[key] <= 0)
    cut = False
    queue = deque([(-1, 0, tree.top(), (0.0, 0.0, W, H))])
    min_units = min_area * W * H
    while queue:
        parent, depth, nodes, (x, y, w, h) = queue.popleft()
        nodes = sorted((n for n in nodes if n.bytes > 0), key=lambda n: -n.bytes)
        total = sum(n.bytes for n in nodes)
        if not nodes or w <= 0 or h <= 0:
            continue
        scale = w * h / total
        keep = [n for n in nodes if n.bytes * scale >= min_units]
        room = max(max_tiles - len(tiles) - 1, 0)
        if len(keep) > room:
            keep, cut = keep[:room], True
        small = nodes[len(keep):]
        if small:
            size = sum(n.bytes for n in small)
            folded += sum(max(n.files, 1) for n in small) if parent >= 0 else len(small)
            keep.append(_Node("", f"{len(small)} smaller items ({human_bytes(size)})", size,
                              sum(n.files for n in small), "fold", "", nodes[-1].top,
                              False, len(small)))
        if not keep or len(tiles) >= max_tiles:
            cut = True
            continue
        sizes = [n.bytes for n in keep]
        order = sorted(range(len(keep)), key=lambda i: -sizes[i])
        rects = squarify.squarify(squarify.normalize_sizes([sizes[i] for i in order], w, h),
                                  x, y, w, h)
        for i, r in zip(order, rects):
            n = keep[i]
            idx = len(tiles)
            inner = (r["x"] + PAD, r["y"] + HEADER, r["dx"] - 2 * PAD, r["dy"] - HEADER - PAD)
            kids = tree.children(n) if n.is_dir and n.kind != "fold" else []
            room_inside = inner[2] > 40 and inner[3] > 30
            nested = bool(kids) and room_inside and depth + 1 < max_depth
            if kids and not nested:
                cut = True
            tiles.append(Tile(idx, parent, depth, n.path, n.name, n.bytes, n.files, n.kind,
                              n.label, n.top, 100 * r["x"] / W, 100 * r["y"] / H,
                              100 * r["dx"] / W, 100 * r["dy"] / H, nested))
            if nested:
                queue.append((idx, depth + 1, kids, inner))
    return Layout(tuple(tiles), folded, empty, cut, key)
