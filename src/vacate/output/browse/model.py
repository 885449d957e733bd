"""What the browse screen shows, as values and no terminal: the entries of a directory (from
the walk's per-directory table, never a second walk), what each is and what uses it, the
sort and the filters, and the marks, which are the overrides of the plan.

A directory's entries are its subdirectories (rows of the drill-down table), the files the
observation names there (a top-level file is an item; below the top level, the largest
files the walk kept), and one row for the rest: "N files (size)", what the table counts in
the directory beyond those."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

from vacate.decide import verdict as deciding
from vacate.decide.plan import PlanRefused, make_plan
from vacate.flow.carve import carve
from vacate.observing.model.inventory import Stats
from vacate.observing.model.observation import Observation
from vacate.observing.parsers.paths import is_under

STATUSES = ("active", "referenced", "cold", "disposable", "artifact")
ACTIONS = ("keep", "archive", "delete")
SORTS = ("size", "name", "mtime")


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


class Volume:
    """One observation made browsable. ``planned`` (path -> PlanItem) when browsing a plan:
    its items' actions are the starting point the marks edit."""

    def __init__(self, obs: Observation, *, archive_to: str | None = None, plan=None):
        self.obs = obs
        self.root = obs.target.path
        self.archive_to = archive_to if archive_to is not None else (
            plan.archive_to if plan is not None else None)
        self.loaded_plan = plan
        self.check = deciding.check(obs)
        inv = obs.inventory
        self._rows = getattr(inv.dirs, "index", None)
        if self._rows is None:
            self._rows = {d.path: [d.path, d.stats.apparent_bytes, d.stats.disk_bytes,
                                   d.stats.files, d.stats.dirs, None, None] for d in inv.dirs}
        self._children: dict[str, list[str]] = {}
        for p in self._rows:
            if p != self.root:
                self._children.setdefault(os.path.dirname(p), []).append(p)
        self._files: dict[str, dict[str, Entry]] = {}
        self._entries: dict[str, list[Entry]] = {}
        for it in inv.items:
            if not it.is_dir:
                self._add_file(it.path, it.stats.apparent_bytes, it.stats.disk_bytes,
                               it.stats.newest_mtime)
        for f in inv.largest_files:
            self._add_file(f.path, f.apparent_bytes, f.disk_bytes, f.mtime)
        self.items = {it.path: it for it in inv.items}
        self.usage = {u.item.path: u for u in self.check.items}
        self.consumers = {c.id: c for c in self.check.consumers}
        self.marks: dict[str, str] = {}
        self.plan_items: dict[str, object] = {}
        self.plan_error = ""
        self.replan()

    def _add_file(self, path, apparent, disk, mtime) -> None:
        d = os.path.dirname(path)
        self._files.setdefault(d, {})[path] = Entry(path, os.path.basename(path), "file",
                                                    apparent, disk, 1, mtime)

    # -- the listing ---------------------------------------------------------------------
    def is_dir(self, path: str) -> bool:
        return path in self._rows

    def entries(self, path: str) -> list[Entry]:
        """Every entry of the directory ``path`` (unsorted, unfiltered; made once)."""
        got = self._entries.get(path)
        if got is None:
            got = self._entries[path] = self._make_entries(path)
        return got

    def _make_entries(self, path: str) -> list[Entry]:
        out = []
        rows, cut = self._rows, len(path.rstrip("/")) + 1
        out = [Entry(p, p[cut:], "dir", r[1], r[2], r[3],
                     r[5] / 1e9 if r[5] is not None else None)
               for p in self._children.get(path, ()) for r in (rows[p],)]
        files = list(self._files.get(path, {}).values())
        out += files
        row = self._rows.get(path)
        if row is not None:
            subs = [e for e in out if e.kind == "dir"]
            n = row[3] - sum(e.files for e in subs) - len(files)
            app = row[1] - sum(e.apparent_bytes for e in out)
            disk = row[2] - sum(e.disk_bytes for e in out)
            if n > 0:
                label = f"{n} file" + ("s" if n != 1 else "") + \
                    (" more" if files else "")
                out.append(Entry(path, label, "rest", max(app, 0), max(disk, 0), n, None))
        return out

    def listing(self, path: str, view: View) -> list[Entry]:
        """The entries of ``path`` as the screen lists them: filtered, then sorted (the
        "N files" row last)."""
        rows = list(self.entries(path))
        if view.status is not None or view.kind is not None:
            rows = [e for e in rows if self._passes(e, view)]
        size = (lambda e: e.apparent_bytes) if view.apparent else (lambda e: e.disk_bytes)
        if view.sort == "name":
            key, rev = (lambda e: e.name), False
        elif view.sort == "mtime":
            key, rev = (lambda e: (e.newest_mtime or 0.0, e.name)), True
        else:
            key, rev = (lambda e: (size(e), e.name)), True
        rows.sort(key=key, reverse=rev)
        rows.sort(key=lambda e: e.kind == "rest")
        return rows

    def _passes(self, e: Entry, view: View) -> bool:
        if view.status is None and view.kind is None:
            return True
        if e.kind == "rest":
            return False
        if view.status is not None and not self._has(e.path, lambda u: u.status == view.status):
            return False
        if view.kind is not None and not self._has(e.path, lambda u: _kind(u.item) == view.kind):
            return False
        return True

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
            plan = make_plan(obs, archive_to=self.archive_to, overrides=ov)
        except PlanRefused as e:
            self.plan_error = str(e)
            return
        self.plan_error = ""
        self.plan_items = {it.path: it for it in plan.items}
        self.preview = plan

    def _file_stats(self, path: str) -> Stats | None:
        e = self._files.get(os.path.dirname(path), {}).get(path)
        if e is None:
            return None
        return Stats(e.apparent_bytes, e.disk_bytes, 1, 0, e.newest_mtime, None)


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


