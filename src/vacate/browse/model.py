"""What the browse screen shows, as values and no terminal: the entries of a directory (from
the walk's per-directory table, never a second walk), what each is and what uses it, the
sort and the filters, and the marks, which are the overrides of the plan.

A directory's entries are its subdirectories (rows of the drill-down table), the files the
observation names there (a top-level file is an item; below the top level, the largest
files the walk kept), and one row for the rest: "N files (size)", what the table counts in
the directory beyond those. With the full file listing (``vacate observe --files``, or a
volume browse observed itself) a directory lists every file it has, each markable."""

from __future__ import annotations

import operator
import os
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple

from vacate.decide import verdict as deciding
from vacate.decide.plan import PlanRefused, make_plan
from vacate.decide.request import PlanRequest
from vacate.flow.carve import carve
from vacate.observing.model.inventory import Stats
from vacate.observing.model.observation import Observation
from vacate.observing.parsers.paths import is_under
from vacate.output.file_columns import Files

STATUSES = ("active", "referenced", "cold", "disposable", "artifact")
ACTIONS = ("keep", "archive", "delete")
SORTS = ("size", "name", "mtime")
KEEP_SORTED = 8     # sorted orders kept (a directory's under each sort, the last visited)
PRESORT = 5000      # a directory of this many subdirectories is sorted when the volume opens
KEEP_ENTRIES = 400_000  # the entries of the directories made, kept (most recently shown)


class Entry(NamedTuple):
    """One row of a directory's listing. ``kind`` is ``dir``, ``file`` or ``rest`` (the
    files of the directory the observation does not name one by one: no path). A tuple:
    a directory of a hundred thousand subdirectories makes as many."""

    path: str
    name: str
    kind: str
    apparent_bytes: int
    disk_bytes: int
    files: int
    newest_mtime: float | None

    @property
    def is_dir(self) -> bool:
        return self.kind == "dir"

    @property
    def markable(self) -> bool:
        return self.kind != "rest"


@dataclass(frozen=True, slots=True)
class About:
    """What is known of one entry: the item it is or lies in, its status, the planned
    action and why, the way back, its consumers (with the evidence that concerns it) and
    the blockers they take part in."""

    item: object | None            # the Item itself, or the innermost one around it
    own: bool                      # the entry is that item
    status: str | None
    action: str | None
    reason: str
    get_back: str
    consumers: tuple = ()
    blockers: tuple = ()


@dataclass(slots=True)
class View:
    """How the listing is shown: the sort, disk or apparent sizes, the filters."""

    sort: str = "size"
    apparent: bool = False
    status: str | None = None
    kind: str | None = None


class Listing(Sequence):
    """A directory's entries in the order shown, made into :class:`Entry` values only when
    read. ``order`` holds the drill-down table's rows themselves (lists) and the indices of
    the directory's files (ints, into ``files``: :class:`vacate.output.file_columns.Files`):
    sorting moves references and indices, and a directory of a hundred thousand files is a
    few arrays. The "N files" row, when there is one, is last."""

    __slots__ = ("big", "cut", "files", "order", "rest", "rows")

    def __init__(self, path: str, order: Sequence, rest: Entry | None, big: dict | None = None,
                 rows: dict | None = None, files: Files | None = None):
        self.cut = len(path.rstrip("/")) + 1
        self.order = order
        self.rest = rest
        self.files = files
        self.big = {} if big is None else big     # column -> the largest (kept by the caller)
        self.rows = rows or {}                    # path -> the table's row (the dirs' records)

    def __len__(self) -> int:
        return len(self.order) + (self.rest is not None)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self.order)
        if i < 0:
            i += len(self)
        if i == n and self.rest is not None:
            return self.rest
        r = self.order[i]
        if type(r) is list:
            return Entry(r[0], r[0][self.cut:], "dir", r[1], r[2], r[3],
                         r[5] / 1e9 if r[5] is not None else None)
        f = self.files
        name = f.name(r)
        return Entry(f.head + name, name, "file", f.apparent[r], f.disk[r], 1, f.time(r))

    def index_of(self, path: str) -> int | None:
        """Where the entry (not the "N files" row) of ``path`` is, or None."""
        order = self.order
        row = self.rows.get(path)
        if row is None:
            f = self.files
            k = f.find(path[len(f.head):]) if f is not None and path.startswith(f.head) \
                else None
            if k is None:
                return None
            if isinstance(order, (FileOrder, Merged)):
                return order.where(k)
            row = k
        if isinstance(order, FileOrder):
            return None
        if isinstance(order, Merged):
            order = order.subs
        try:      # a row by identity, no path compared; a file's index among rows and ints
            at = order.index(row)
        except ValueError:
            return None
        return self.order.at[at] if isinstance(self.order, Merged) else at

    def biggest(self, apparent: bool) -> int:
        """The largest size shown (the bars' full length)."""
        col = 1 if apparent else 2
        big = self.big.get(col)
        if big is None:
            big = self.big[col] = max(map(_getter(self.files, col), self.order), default=0)
        if self.rest is not None:
            big = max(big, self.rest.apparent_bytes if apparent else self.rest.disk_bytes)
        return big


class FileOrder(Sequence):
    """A directory's files in one order: their indices, by name (``by`` None) or largest
    (newest) first by the column ``by``, equal keys in name order."""

    __slots__ = ("by", "files", "idx")

    def __init__(self, files: Files, by: str | None):
        self.files = files
        self.by = by
        self.idx = range(len(files)) if by is None else files.order(by)

    def __len__(self) -> int:
        return len(self.idx)

    def __getitem__(self, i):
        return self.idx[i]

    def key(self, k: int) -> tuple:
        """The key of file ``k`` in this order (ascending)."""
        if self.by is None:
            return (self.files.name(k),)
        return (-self.files.column(self.by)[k], self.files.name(k))

    def where(self, k: int) -> int:
        """Where file ``k`` is in this order (equal keys are in index order)."""
        if self.by is None:
            return k
        col = self.files.column(self.by)
        return bisect_left(self.idx, (-col[k], k), key=lambda j: (-col[j], j))


class Merged(Sequence):
    """A directory's subdirectories (rows, in the order shown) placed among its files
    (:class:`FileOrder`): each row found its place by bisection, no file's key made but
    those it compared with."""

    __slots__ = ("at", "before", "files", "subs")

    def __init__(self, files: FileOrder, subs: list, keys: list):
        self.files = files
        self.subs = subs
        self.before = [bisect_left(files, k, key=files.key) for k in keys]
        self.at = [b + j for j, b in enumerate(self.before)]    # each row's place

    def __len__(self) -> int:
        return len(self.files) + len(self.subs)

    def __getitem__(self, i):
        j = bisect_left(self.at, i)
        if j < len(self.at) and self.at[j] == i:
            return self.subs[j]
        return self.files[i - j]

    def where(self, k: int) -> int:
        f = self.files.where(k)
        return f + bisect_right(self.before, f)


class Volume:
    """One observation made browsable. ``planned`` (path -> PlanItem) when browsing a plan:
    its items' actions are the starting point the marks edit.

    Each directory's subdirectories are the drill-down table's rows, gathered once when the
    volume is opened (the table is sorted by path, so each directory's list is in name
    order); a directory's files and its "N files" row are made the first time it is
    shown."""

    def __init__(self, obs: Observation, *, archive_to: str | None = None, plan=None,
                 files=None):
        self.obs = obs
        # every file of every directory (vacate.output.files_listing), or None: then a
        # directory lists the files the observation names and "N files" for the rest
        self.listed = files
        self.root = obs.target.path
        self.archive_to = archive_to if archive_to is not None else (
            plan.archive_to if plan is not None else None)
        self.loaded_plan = plan
        self.check = deciding.check(obs)
        inv = obs.inventory
        table = getattr(inv.dirs, "rows", None)
        if table is None:
            table = sorted([d.path, d.stats.apparent_bytes, d.stats.disk_bytes, d.stats.files,
                            d.stats.dirs, _ns(d.stats.newest_mtime), None] for d in inv.dirs)
        self._rows = {r[0]: r for r in table} if getattr(inv.dirs, "rows", None) is None \
            else inv.dirs.index
        self._children: dict[str, list[list]] = {}
        root = self.root
        for r in table:
            p = r[0]
            if p != root:
                head = p[:p.rindex("/")] or "/"
                kids = self._children.get(head)
                if kids is None:
                    self._children[head] = [r]
                else:
                    kids.append(r)
        paths = list(map(itemgetter(0), table))
        self._in_order = all(map(operator.lt, paths, paths[1:]))    # each list in name order
        self._files: dict[str, dict[str, tuple]] = {}
        self._made: dict[str, _Dir] = {}          # least recently shown first
        self._held = 0            # the entries of the directories in _made
        self._sorted: dict[tuple, Sequence] = {}  # the last few sorted orders
        for it in inv.items:
            if not it.is_dir:
                self._add_file(it.path, it.stats.apparent_bytes, it.stats.disk_bytes,
                               it.stats.newest_mtime)
        for f in inv.largest_files:
            self._add_file(f.path, f.apparent_bytes, f.disk_bytes, f.mtime)
        # a directory of many subdirectories is made and sorted each way now: its first
        # Enter, and each sort of it, then cost no more than any other key
        self._presorted: dict[tuple, Sequence] = {}
        for head, kids in self._children.items():
            if len(kids) >= PRESORT:
                d = self._raw(head)
                for view in (View(), View(apparent=True), View(sort="mtime")):
                    self._presorted[_sort_key(head, view)] = self._ordered(head, d, view)
        self.items = {it.path: it for it in inv.items}
        self.usage = {u.item.path: u for u in self.check.items}
        self.consumers = {c.id: c for c in self.check.consumers}
        self.marks: dict[str, str] = {}
        self.plan_items: dict[str, object] = {}
        self.plan_error = ""
        self.replan()

    def _add_file(self, path, apparent, disk, mtime) -> None:
        d = os.path.dirname(path)
        self._files.setdefault(d, {})[path] = (path, apparent, disk, 1, 0, _ns(mtime))

    # -- the listing ---------------------------------------------------------------------
    def is_dir(self, path: str) -> bool:
        return path in self._rows

    def _raw(self, path: str) -> _Dir:
        """The directory's subdirectories and files in name order, its "N files" row and its
        largest sizes (made once)."""
        got = self._made.pop(path, None)
        if got is None:
            got = self._make(path)
            self._held += len(got.subs) + len(got.files)
            # the least recently shown made again when asked: a session may visit every
            # directory
            while self._held > KEEP_ENTRIES and self._made:
                old = self._made.pop(next(iter(self._made)))
                self._held -= len(old.subs) + len(old.files)
        self._made[path] = got
        return got

    def _make(self, path: str) -> _Dir:
        subs = self._children.get(path, [])
        if not self._in_order:
            subs = sorted(subs, key=itemgetter(0))
        head = path.rstrip("/") + "/"
        if self.listed is not None:
            files = self.listed.get(path)
        else:
            cut = len(head)
            files = Files.from_rows(head, sorted(
                (p[cut:], a, d, m) for p, a, d, _, _, m in self._files.get(path, {}).values()))
        big = {col: max(max(map(itemgetter(col), subs), default=0), files.largest(name))
               for col, name in ((1, "apparent"), (2, "disk"))}
        row = self._rows.get(path)
        rest = None
        if row is not None:
            n = row[3] - sum(map(itemgetter(3), subs)) - len(files)
            if n > 0:       # (the sizes read only then: the files' columns left unread)
                app = row[1] - sum(map(itemgetter(1), subs)) - sum(files.apparent)
                disk = row[2] - sum(map(itemgetter(2), subs)) - sum(files.disk)
                label = f"{n} file" + ("s" if n != 1 else "") + \
                    (" more" if len(files) else "")
                rest = Entry(path, label, "rest", max(app, 0), max(disk, 0), n, None)
        return _Dir(subs, files, rest, big)

    def _ordered(self, path: str, d: _Dir, view: View) -> Sequence:
        """The directory's subdirectories and files in the order ``view`` sorts them."""
        subs = _sort(d.subs, view)
        if not len(d.files):
            return subs
        by = None if view.sort == "name" else "mtime" if view.sort == "mtime" else \
            "apparent" if view.apparent else "disk"
        files = FileOrder(d.files, by)
        if not subs:
            return files
        cut = len(path.rstrip("/")) + 1
        if by is None:
            keys = [(r[0][cut:],) for r in subs]
        else:
            col = 5 if by == "mtime" else 1 if by == "apparent" else 2
            keys = [(-(r[col] or 0), r[0][cut:]) for r in subs]
        return Merged(files, subs, keys)

    def listing(self, path: str, view: View) -> Listing:
        """The entries of ``path`` as the screen lists them: filtered, then sorted (the
        "N files" row last; equal keys in name order). Only the entries read are made."""
        d = self._raw(path)
        if view.status is not None or view.kind is not None:
            names = self._ordered(path, d, View(sort="name"))
            made = Listing(path, names, None, files=d.files)
            kept = [r for r, e in zip(names, made) if self._passes(e, view)]
            if view.sort != "name":
                col = 5 if view.sort == "mtime" else 1 if view.apparent else 2
                kept.sort(key=_getter(d.files, col), reverse=True)
            return Listing(path, kept, None, rows=self._rows, files=d.files)
        key = _sort_key(path, view)
        got = self._presorted.get(key)
        if got is None:
            got = self._sorted.pop(key, None)
            if got is None:
                got = self._ordered(path, d, view)
                if len(self._sorted) >= KEEP_SORTED:
                    del self._sorted[next(iter(self._sorted))]
            self._sorted[key] = got
        return Listing(path, got, d.rest, d.big, self._rows, d.files)

    def _passes(self, e: Entry, view: View) -> bool:
        if view.status is None and view.kind is None:
            return True
        if e.kind == "rest":
            return False
        if view.status is not None and not self._has(e.path, lambda u: u.status == view.status):
            return False
        return view.kind is None or self._has(e.path, lambda u: _kind(u.item) == view.kind)

    def _has(self, path: str, test) -> bool:
        """Whether the entry's item (or the one around it), or an item inside it, passes."""
        u = self.usage.get(self._owner_path(path) or "")
        if u is not None and test(u):
            return True
        return any(test(u) for p, u in self.usage.items() if is_under(p, path) and p != path)

    def kinds(self) -> list[str]:
        return sorted({_kind(it) for it in self.items.values()})

    # -- what an entry is ----------------------------------------------------------------
    def _owner_path(self, path: str) -> str | None:
        p = path
        while True:
            if p in self.items:
                return p
            if p == self.root or p in ("/", ""):
                return None
            p = os.path.dirname(p)

    def about(self, path: str) -> About:
        owner = self._owner_path(path)
        item = self.items.get(owner) if owner else None
        u = self.usage.get(owner) if owner else None
        planned = self.planned_item(path)
        ids = set(u.users) if u is not None else set()
        for c in self.check.consumers:       # what names something inside the entry too
            if any(is_under(p, path) for p in c.paths):
                ids.add(c.id)
        cons = tuple(c for c in self.check.consumers if c.id in ids)
        blockers = tuple(b for b in self.check.verdict.blockers if b.consumer in ids)
        return About(item=item, own=owner == path, status=u.status if u else None,
                     action=planned.action if planned is not None else None,
                     reason=planned.reason if planned is not None else "",
                     get_back=planned.get_back if planned is not None else "",
                     consumers=cons, blockers=blockers)

    def planned_item(self, path: str):
        """The plan item that decides ``path``: itself, or the innermost around it."""
        p = path
        while True:
            if p in self.plan_items:
                return self.plan_items[p]
            if p == self.root or p in ("/", ""):
                return None
            p = os.path.dirname(p)

    # -- marks ---------------------------------------------------------------------------
    def mark(self, path: str, action: str | None) -> None:
        """Mark ``path`` (``None`` takes the mark away) and plan again."""
        if action is None:
            self.marks.pop(path, None)
        else:
            self.marks[path] = action
        self.replan()

    def overrides(self) -> list[tuple[str, str]]:
        """The marks as ``vacate plan``'s overrides: (action, path relative to the volume),
        in the order the command line gives them."""
        return [(a, os.path.relpath(p, self.root))
                for a in ACTIONS for p in sorted(self.marks) if self.marks[p] == a]

    def replan(self) -> None:
        """The planned action of every item with the marks as they are, decided by the
        planner itself from the observation (nothing is read from the machine)."""
        try:
            if self.loaded_plan is not None:
                ov = [(self.marks.get(it.path, it.action), os.path.relpath(it.path, self.root))
                      for it in self.loaded_plan.items]
                obs = self.loaded_plan.observation
            else:
                ov = self.overrides()
                obs = carve(self.obs, ov, stat_file=self._file_stats)
            plan = make_plan(obs, PlanRequest(archive_to=self.archive_to, overrides=ov))
        except PlanRefused as e:
            self.plan_error = str(e)
            return
        self.plan_error = ""
        self.plan_items = {it.path: it for it in plan.items}
        self.preview = plan

    def _file_stats(self, path: str) -> Stats | None:
        d = os.path.dirname(path)
        r = self._files.get(d, {}).get(path)
        if r is None and self.listed is not None and d in self._rows:
            files = self._raw(d).files
            k = files.find(os.path.basename(path))
            r = files.row(k) if k is not None else None
        if r is None:
            return None
        return Stats(r[1], r[2], 1, 0, r[5] / 1e9 if r[5] is not None else None, None)


def _sort_key(path: str, view: View) -> tuple:
    return (path, view.sort, view.apparent and view.sort == "size")


class _Dir(NamedTuple):
    """A directory as made for the screen: its subdirectories' rows and its files, each in
    name order, its "N files" row, and its largest sizes (column -> size)."""

    subs: list
    files: Files
    rest: Entry | None
    big: dict


def _getter(files: Files | None, col: int):
    """The ``col`` (1 apparent, 2 disk, 5 mtime) of a row or of a file's index."""
    c = files.column({1: "apparent", 2: "disk", 5: "mtime"}[col]) if files is not None \
        else None

    def get(r):
        return (r[col] or 0) if type(r) is list else c[r]
    return get


def _sort(order: list, view: View) -> list:
    """``order`` (in name order) sorted as ``view`` asks; equal keys stay in name order."""
    if view.sort == "name":
        return order
    if view.sort == "mtime":
        return sorted(order, key=_mtime, reverse=True)
    return sorted(order, key=itemgetter(1 if view.apparent else 2), reverse=True)


def _ns(t: float | None) -> int | None:
    return round(t * 1e9) if t is not None else None


def _mtime(r) -> int:
    return r[5] or 0


def _kind(item) -> str:
    c = item.classification
    if c is not None:
        return c.kind
    return "directory" if item.is_dir else "file"


def ages(t: float | None, now: float) -> str:
    """A short age: 5m, 3h, 12d, 2y."""
    if t is None:
        return ""
    s = max(now - t, 0)
    for unit, n in (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{int(s // n)}{unit}"
    return "now"


