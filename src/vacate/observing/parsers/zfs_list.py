"""``zfs list -H -t all -r -o name,type,userrefs,origin,mounted POOL``: what a dataset's
freeing depends on (:class:`~vacate.observing.model.dataset.DatasetFacts`). Pure.

The columns are the ones zfs-fuse 0.7 knows as well as OpenZFS: it has neither ``zfs holds``
nor the ``clones`` property, so a snapshot's holds are its ``userrefs`` and its clones are
the datasets of the pool whose ``origin`` it is. Standard library only."""

from __future__ import annotations

from vacate.observing.model.dataset import DatasetFacts, ZfsSnapshot

COLUMNS = ("name", "type", "userrefs", "origin", "mounted")


def _count(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def parse(text: str, dataset: str) -> DatasetFacts:
    """The facts of ``dataset`` from the pool's listing (``exists`` False when the listing
    does not hold it)."""
    rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    rows = [r + [""] * (len(COLUMNS) - len(r)) for r in rows]
    clones: dict[str, list[str]] = {}
    for name, _type, _refs, origin, _m in (r[:5] for r in rows):
        if origin not in ("", "-"):
            clones.setdefault(origin, []).append(name)
    snaps, children, mounted, found = [], [], None, False
    for name, kind, refs, _origin, mnt in (r[:5] for r in rows):
        if name == dataset:
            found = True
            mounted = {"yes": True, "no": False}.get(mnt)
        elif name.startswith(dataset + "@") and kind == "snapshot":
            snaps.append(ZfsSnapshot(name.split("@", 1)[1], _count(refs),
                                     tuple(sorted(clones.get(name, ())))))
        elif name.startswith(dataset + "/") and "@" not in name:
            children.append(name)
    return DatasetFacts(dataset, tuple(snaps), tuple(children), mounted, exists=found)
