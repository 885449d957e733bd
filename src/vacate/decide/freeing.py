"""Whether the volume may be freed (``--free-volume``), and what freeing takes with it: the
plan's blockers, each named, and the snapshots destroyed with the dataset. Pure functions of
the observation (its ``dataset``: :class:`~vacate.observing.model.dataset.DatasetFacts`).

The rules: every kept item must be inside an archive this apply verifies (a
native archive of the dataset holds everything; with tar alone, an item kept on the volume
is lost with it); the dataset's archive must be provable receivable (``--verify-pool``: a
stream only parsed never allows freeing); no snapshot but the plan's own may be held (``zfs
hold``) or cloned; no child dataset (``zfs destroy -r`` would take it). Snapshots neither held
nor cloned are listed, so a person sees what goes with the dataset. The step that frees it
checks the same again just before it acts (:mod:`vacate.act.freeing`).
"""

from __future__ import annotations

from vacate.observing.model.dataset import DatasetFacts
from vacate.observing.model.plan import PlanItem

PARSED_ONLY = ("the dataset's archive is only parsed, not received (no --verify-pool): the "
               "weaker check never allows freeing the dataset; give --verify-pool POOL to "
               "prove it receivable")


def kept_outside(items, archive_format: str) -> list[PlanItem]:
    """The items freeing would lose: kept on the volume (filesystem artifacts aside) and so
    in no archive the plan verifies; the dataset's own archive (``--archive-format zfs`` or
    ``both``) holds every item. (Migrated items are copied, read back, elsewhere; a kept
    directory whose files are all in sub-items with other actions keeps nothing.)"""
    if archive_format != "tar":
        return []
    subs = {i.path: i for i in items}
    return [i for i in items if i.action == "keep" and i.status != "artifact" and
            i.files - sum(subs[e].files for e in i.exclude if e in subs) > 0]


def snapshot_blockers(facts: DatasetFacts) -> list[str]:
    """A snapshot held or cloned (or whose holds could not be read), each named, the plan's
    own included (nothing but the plan may take them); a child dataset; what could not be
    read. (Proxmox's freeing reuses these: its ``zfs destroy -r`` takes the same.)"""
    ds = facts.dataset
    if facts.error:
        return [f"could not read the snapshots of {ds}: {facts.error}"]
    if not facts.exists:
        return [f"the dataset {ds} was not found (zfs list)"]
    out = []
    for s in facts.snapshots:
        if s.holds is None:
            out.append(f"could not tell whether the snapshot {ds}@{s.name} is held (zfs hold)")
        elif s.holds:
            out.append(f"the snapshot {ds}@{s.name} is held ({s.holds} zfs hold tag"
                       f"{'s' if s.holds != 1 else ''}): release it (zfs holds, zfs release) "
                       "or keep the dataset")
        if s.clones:
            out.append(f"the snapshot {ds}@{s.name} has clones that depend on it: "
                       f"{', '.join(s.clones)} (zfs destroy -r never takes them: promote or "
                       "destroy them first)")
    if facts.children:
        out.append(f"{ds} has child datasets ({', '.join(facts.children)}): retire them "
                   "first (zfs destroy -r would take them)")
    return out


def listed(facts: DatasetFacts | None, own: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The snapshots destroyed with the dataset besides the plan's own: those it has, neither
    held nor cloned."""
    if facts is None or facts.error:
        return ()
    return tuple(s.name for s in facts.snapshots
                 if s.name not in own and s.holds == 0 and not s.clones)


def blockers(facts: DatasetFacts | None, items, archive_format: str,
             verify_pool: str | None) -> list[str]:
    """Why the volume's dataset may not be freed as planned (empty: it may)."""
    if facts is None:
        return ["--free-volume: the dataset's snapshots were not looked at (plan again)"]
    out = [f"{i.path} is kept on the volume and freeing the volume destroys it: archive, "
           "migrate or delete it, or archive the whole dataset (--archive-format zfs)"
           for i in kept_outside(items, archive_format)]
    if archive_format != "tar" and verify_pool is None:
        out.append(PARSED_ONLY)
    return out + snapshot_blockers(facts)
