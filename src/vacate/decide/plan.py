"""Deciding a retirement: per item keep / archive / delete, then the ordered teardown, as a
pure function of an observation (and of what the person asked).

Defaults, in this order: filesystem artifacts are kept; what can be downloaded again from a
named source (not a guess) is deleted; everything else (unique, unknown, regenerable,
guessed) is archived. ``--keep/--archive/--delete P`` override them: the deepest match wins,
a literal path beats a glob at the same depth, a tie or a pattern that matches nothing is
refused (:class:`PlanRefused`).

The teardown (each step with the evidence that led to it): archive and verify what nothing
uses while the services still run; stop the units whose processes use the volume and disable
what would start them; end the remaining holders (TERM, wait, KILL); confirm the GPUs are
released; kernel users (swap, loop devices, nested and other mounts, exports, containers);
archive and verify the rest; snapshot; delete; configuration that would mount or use the
volume again; unmount, lock the empty mount point, and look again.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import replace

from vacate.decide import freeing, pve_free, verdict
from vacate.decide.request import PlanRequest, request_of
from vacate.decide.teardown import (
    SNAPSHOT_FS,
    Teardown,
    archive_location,
    dataset_archive,
    deleted,
    teardown,
)
from vacate.observing.model.observation import Destination, Observation
from vacate.observing.model.plan import ARCHIVE_FORMATS, Identity, Plan, PlanItem
from vacate.observing.model.usage import ItemUsage
from vacate.observing.parsers.paths import is_under

HASH_BYTES_PER_S = 1.2e9      # SHA-256 of holes and data, one core (the archive's floor)


class PlanRefused(ValueError):
    """What the person asked cannot be planned (exit 2): the reason names it."""


# -- per item ----------------------------------------------------------------------------------
def _rel(target: str, path: str) -> str:
    return os.path.relpath(path, target)


def _pattern(target: str, p: str) -> str:
    """A ``--keep/--archive/--delete`` argument as a path relative to the target."""
    if p.startswith("/"):
        if not is_under(p, target) or p == target:
            raise PlanRefused(f"{p} is not below the volume {target}")
        p = _rel(target, p)
    p = os.path.normpath(p)
    if p == "." or p.startswith("../"):
        raise PlanRefused(f"{p!r} does not name something on the volume")
    return p


def _is_glob(p: str) -> bool:
    return any(ch in p for ch in "*?[")


def _ancestors(rel: str) -> list[str]:
    """``a/b/c`` -> ``[a/b/c, a/b, a]``."""
    out = [rel]
    while "/" in rel:
        rel = rel.rsplit("/", 1)[0]
        out.append(rel)
    return out


def override_for(rel: str, overrides: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The (action, pattern) that decides the item at ``rel``: of the patterns naming it or
    a directory above it, the deepest; at the same depth a literal one beats a glob; two
    that still tie with different actions are refused."""
    best: list[tuple[int, int, str, str]] = []
    for action, pat in overrides:
        for anc in _ancestors(rel):
            if anc == pat or (_is_glob(pat) and fnmatch.fnmatchcase(anc, pat)):
                best.append((anc.count("/"), 0 if _is_glob(pat) else 1, action, pat))
                break
    if not best:
        return None
    best.sort(reverse=True)
    top = best[0]
    rivals = {b[2] for b in best if b[:2] == top[:2]}
    if len(rivals) > 1:
        pats = ", ".join(sorted({b[3] for b in best if b[:2] == top[:2]}))
        raise PlanRefused(f"{rel}: {pats} ask for different actions at the same depth")
    return top[2], top[3]


def default_action(u: ItemUsage) -> tuple[str, str]:
    """(action, why) for an item nobody asked about: the why says why this action."""
    c = u.item.classification
    if c is not None and c.kind == "filesystem-artifact":
        return "keep", "filesystem artifact"
    if c is not None and c.recoverable == "re-downloadable" and c.source and not c.guess:
        return "delete", f"re-downloadable from {c.source}"
    if c is None or c.recoverable is None:
        return "archive", "not known to be obtainable again"
    if c.guess:
        return "archive", (f"only its name says it is {c.recoverable} (a guess): kept safe "
                           "in the archive")
    if c.recoverable == "regenerable":
        return "archive", ("regenerable, but regenerating may need what is deleted here and "
                           "GPU-days")
    if c.recoverable == "re-downloadable":
        return "archive", ("no one source to download it again is known for it as a whole "
                           "(only for some items inside it)")
    return "archive", "unique: nothing else holds it"


def known_source(c) -> str | None:
    """Where the item can be had again, when that is known rather than guessed."""
    return c.source if c is not None and c.source and not c.guess else None


def get_back(action: str, it: PlanItem, archive_to: str | None, target: str,
             source: str | None = None, snapshot: bool = False,
             known: str | None = None) -> str:
    """What it would take to have the item again. ``known``: where the item itself comes
    from, when not a guess; ``source``: where something inside it comes from, when the item
    itself names none; ``snapshot``: one is taken before the deletes. A guessed source is
    never offered as the way back."""
    if action == "keep":
        return "stays on the volume (it goes cold with it)"
    if action == "migrate":
        return f"it is at {it.migrate_to}, copied there and read back from the disk" + (
            "; its source on the volume is deleted once what used it runs from there"
            if it.delete_source else "")
    if action == "delete":
        if known:
            return f"download again: {known}"
        if source:
            return f"download again (what was recognised inside it): {source}"
        if it.recoverable == "regenerable":
            return "regenerate it from what made it (which may need a model and GPU time)"
        return "only the snapshot taken before the deletes has it" if snapshot else \
            "gone for good: nothing else holds it"
    dest = archive_location(archive_to, it) if archive_to else "DEST"
    return f"vacate restore {dest} --to DIR (or zstd -dc | tar -x, see its README)"


def held_way_back(held, snapshot: bool = False) -> str:
    """The way back of a directory deleted that is only what it holds (``verdict.holds``):
    each thing's own, by name (a source its label names as a guess is said to be one, never
    offered as the way back)."""
    parts = []
    for i in held:
        c = i.classification
        known = known_source(c)
        if known:
            way = f"download again: {known}"
        elif c is not None and c.recoverable == "regenerable":
            way = "regenerate it from what made it (which may need a model and GPU time" + (
                f"; its label names {c.source}, a guess, not checked" if c.source else "") + ")"
        elif snapshot:
            way = "only the snapshot taken before the deletes has it"
        else:
            way = "gone for good: nothing else holds it"
        parts.append(f"{os.path.basename(i.path)}: {way}")
    return "what it holds: " + "; ".join(parts)


def plan_items(obs: Observation, usages: tuple[ItemUsage, ...], overrides: list[tuple[str, str]],
               archive_to: str | None, identities: dict[str, Identity],
               entries: dict[str, dict], snapshot: bool = False,
               migrations: dict[str, str] | None = None,
               migrate_free: dict[str, int] | None = None,
               migrate_inside: dict[str, str] | None = None) -> tuple[PlanItem, ...]:
    target = obs.target.path
    moves = {_pattern(target, p): d for p, d in (migrations or {}).items()}
    pats = [(a, _pattern(target, p)) for a, p in overrides]
    # --migrate P=DEST with --delete P: migrated, then its source deleted
    delete_after = {p for a, p in pats if a == "delete" and p in moves}
    pats = [(a, p) for a, p in pats if not (a == "delete" and p in delete_after)]
    dest_of: dict[str, str] = {}
    delete_source: set[str] = set()
    used_pats = set()
    decided: dict[str, tuple[str, str]] = {}
    for u in usages:
        rel = _rel(target, u.item.path)
        got = override_for(rel, pats)
        if got is not None:
            used_pats.add(got[1])
            decided[u.item.path] = (got[0], f"asked: --{got[0]} {got[1]}")
            if got[0] == "migrate":
                if got[1] not in moves:
                    raise PlanRefused(f"--migrate {got[1]}: no destination (P=DEST)")
                dest_of[u.item.path] = moves[got[1]]
                if got[1] in delete_after:
                    delete_source.add(u.item.path)
                decided[u.item.path] = ("migrate", f"asked: --migrate {got[1]}={moves[got[1]]}"
                                        + (f" and --delete {got[1]}" if got[1] in delete_after
                                           else ""))
        elif u.item.parent is None:
            decided[u.item.path] = default_action(u)
    for a, p in pats:
        if p not in used_pats and not any(
                _rel(target, u.item.path) == p or fnmatch.fnmatchcase(_rel(target, u.item.path), p)
                for u in usages):
            raise PlanRefused(f"--{a} {p}: matches no item of the volume")
    # a sub-item becomes an item of the plan only where its action differs from that of the
    # nearest plan item around it; that one then leaves it out
    included: dict[str, str] = {}                  # path -> action, ancestors first
    around: dict[str, str | None] = {}
    for u in sorted(usages, key=lambda u: u.item.path):
        it = u.item
        outer = next((p for p in reversed(included) if is_under(it.path, p)), None)
        if it.parent is not None:
            own = decided.get(it.path)
            if own is None or own[0] == included[outer]:
                continue      # goes with the plan item around it
        included[it.path] = decided[it.path][0]
        around[it.path] = outer
    _nothing_to_archive(usages, decided, included, around)
    out = []
    for u in usages:
        it, c = u.item, u.item.classification
        if it.path not in included:
            continue
        action, why = decided[it.path]
        pi = PlanItem(
            id=it.id, path=it.path, action=action, reason=why,
            kind=c.kind if c else ("directory" if it.is_dir else "file"),
            label=c.label if c else ("directory" if it.is_dir else "file"),
            recoverable=c.recoverable if c else None, source=c.source if c else None,
            apparent_bytes=it.stats.apparent_bytes, disk_bytes=it.stats.disk_bytes,
            files=it.stats.files, status=u.status, users=u.users,
            identity=identities.get(it.path),
            entries=entries.get(it.path) if action == "delete" else None)
        if action == "migrate":
            dest = dest_of[it.path]
            gone = it.path in delete_source
            inside = (migrate_inside or {}).get(dest)
            pi = _with(pi, migrate_to=os.path.join(dest, os.path.basename(it.path)),
                       dest_free_bytes=(migrate_free or {}).get(dest), delete_source=gone,
                       entries=entries.get(it.path) if gone else None,
                       migrate_inside=os.path.join(inside, os.path.basename(it.path))
                       if inside else None)
        excl = tuple(p for p, o in around.items() if o == it.path)
        inner = next((known_source(u.item.classification) for u in usages
                      if known_source(u.item.classification)
                      and is_under(u.item.path, it.path)), None)
        snap = snapshot and obs.target.mount.fstype in SNAPSHOT_FS
        way = get_back(action, pi, archive_to, target, inner, snap, known_source(c))
        held = verdict.holds(it, [u.item for u in usages if u.item.path not in excl])
        if action == "delete" and held and not inner and not known_source(c):
            way = held_way_back(held, snap)
        out.append(_with(pi, exclude=excl, get_back=way))
    return tuple(out)


def _nothing_to_archive(usages, decided: dict, included: dict, around: dict) -> None:
    """An item to archive that holds no file once the items inside it with another action
    are left out (``models/`` when its only model is deleted) is kept instead: an archive of
    nothing is a step spent for nothing, and its empty ``SHA256SUMS`` fails the stock
    ``sha256sum -c``."""
    files = {u.item.path: u.item.stats.files for u in usages}
    for path, action in included.items():
        if action != "archive":
            continue
        inner = [p for p, o in around.items() if o == path]
        if files[path] - sum(files[p] for p in inner) > 0:
            continue
        why = ("nothing is left in it to archive: " +
               ", ".join(f"{os.path.basename(p)} is to {included[p]}" for p in inner)
               if inner else "it holds no files: nothing to archive")
        decided[path] = ("keep", why)
        included[path] = "keep"


def _with(p: PlanItem, **kw) -> PlanItem:
    return replace(p, **kw)


def make_plan(obs: Observation, request: PlanRequest | None = None) -> Plan:
    """The plan for the observed volume, as ``request`` asks it; :class:`PlanRefused` when
    what was asked cannot be planned. What the machine says of the places the plan writes
    to (free space, the ``--ct`` container's spelling, a far host's ``zstd``) is the
    observation's ``destinations``."""
    request = request or PlanRequest()
    archive_to, grace_s, snapshot = request.archive_to, request.grace_s, request.snapshot
    _check_format(obs, request)
    mask_references = request.mask_references
    dests = {d.path: d for d in obs.destinations}
    here = dests.get(archive_to) if archive_to else None
    dest_free = here.free_bytes if here else None
    archive_tools = {"zstd": here.zstd} if here and here.zstd is not None else None
    migrations = dict(request.migrations)
    migrate_free = {p: d.free_bytes for p, d in dests.items() if d.free_bytes is not None}
    migrate_inside = {p: d.inside for p, d in dests.items() if d.inside}
    identities = dict(request.identities)
    result = verdict.check(obs)
    items = plan_items(obs, result.items, list(request.overrides), archive_to, identities,
                       dict(request.entries), snapshot, migrations, migrate_free,
                       migrate_inside)
    if request.archive_format != "tar":      # the dataset's archive holds every item
        way = ("restore the dataset's archive " +
               dataset_archive(archive_to, obs.target.zfs_dataset) +
               " (zfs receive, see its README), then copy it out")
        items = tuple(replace(i, get_back=way) if _held_by_dataset(i, request) else i
                      for i in items)
    blocked = _check_migrations(obs, items)
    to_archive = [i for i in items if i.action == "archive"]
    subs = {i.path: i for i in items}
    need = sum(i.disk_bytes - sum(subs[e].disk_bytes for e in i.exclude if e in subs)
               for i in to_archive)
    if to_archive and not archive_to:
        blocked.append("these items are to be archived and no destination was given "
                       "(--archive-to): " + ", ".join(i.path for i in to_archive))
    if archive_to and dest_free is not None and need > dest_free:
        blocked.append(f"{archive_to} has {dest_free} bytes free; archiving needs up to "
                       f"{need} (before compression)")
    if to_archive and archive_tools is not None and not archive_tools.get("zstd"):
        blocked.append("the archive is written on the far host with its zstd command, and it "
                       "has none: install the package zstd there (apt install zstd, dnf "
                       "install zstd)")
    if result.verdict.safe_to_unmount is None:
        blocked.append("could not tell what uses the volume: " +
                       "; ".join(p.message for p in result.verdict.unknowns))
    if request.free_volume and pve_free.guest_volumes(obs):   # a container's: pct frees it
        blocked += pve_free.blockers(obs, items, True, request.archive_format, archive_to,
                                     request.verify_pool)
    elif request.free_volume and obs.ct is None:
        blocked += freeing.blockers(obs.dataset, items, request.archive_format,
                                    request.verify_pool)
    elif request.free_volume:
        blocked.append(f"--free-volume: {obs.target.mountpoint} is no mount point volume of "
                       f"CT {obs.ct}'s Proxmox config (mpN): nothing here frees it")
    steps = teardown(Teardown(obs, items, archive_to, grace_s, snapshot, mask_references,
                              result.verdict, request.archive_format, request.verify_pool,
                              request.created_at, request.free_volume))
    deletes = [i for i in items if deleted(i)]
    snap = (snapshot and obs.target.mount.fstype in SNAPSHOT_FS or
            request.archive_format != "tar") and bool(deletes)   # a snapshot holds them
    by_path = {i.path: i for i in items}
    hashed = sum(i.apparent_bytes - sum(by_path[e].apparent_bytes for e in i.exclude
                                        if e in by_path) for i in to_archive)
    return Plan(target_path=obs.target.path, mount_id=obs.target.mount.mount_id,
                mount_dev=obs.target.mount.dev, fstype=obs.target.mount.fstype,
                archive_to=archive_to, grace_s=grace_s, snapshot=snapshot,
                mask_references=mask_references, items=items,
                steps=steps, observation=obs, blocked=tuple(blocked),
                problems=tuple(p for p in result.warnings if p.blocks_verdict),
                expected_freed_bytes=0 if snap else sum(i.disk_bytes for i in deletes),
                archive_bytes=need, archive_estimate_s=hashed / HASH_BYTES_PER_S,
                created_at=request.created_at, archive_format=request.archive_format,
                verify_pool=request.verify_pool, free_volume=request.free_volume)


def _held_by_dataset(it: PlanItem, request: PlanRequest) -> bool:
    """Whether the dataset's archive is the item's way back: an item archived with no tar
    archive of its own, or one deleted that nothing else gives back."""
    if it.action == "archive":
        return request.archive_format == "zfs"
    return it.action == "delete" and it.get_back.startswith(("gone for good", "only the"))


def _check_format(obs: Observation, request: PlanRequest) -> None:
    """``--archive-format zfs`` or ``both`` needs the volume to be a ZFS dataset and a local
    directory to write to; ``--verify-pool`` goes with them."""
    fmt = request.archive_format
    if request.free_volume and obs.ct is None and not obs.target.zfs_dataset:
        raise PlanRefused(f"--free-volume: {obs.target.mountpoint} is not a ZFS dataset "
                          f"({obs.target.mount.fstype}); vacate frees a ZFS dataset (zfs "
                          "destroy) or, with --ct, a Proxmox volume")
    if fmt not in ARCHIVE_FORMATS:
        raise PlanRefused(f"--archive-format {fmt}: one of {', '.join(ARCHIVE_FORMATS)}")
    if fmt == "tar":
        if request.verify_pool is not None:
            raise PlanRefused("--verify-pool proves a native archive receivable: it goes "
                              "with --archive-format zfs or both")
        return
    if not obs.target.zfs_dataset:
        raise PlanRefused(f"--archive-format {fmt}: {obs.target.mountpoint} is not a ZFS "
                          f"dataset ({obs.target.mount.fstype}); only tar archives it")
    if not request.archive_to:
        raise PlanRefused(f"--archive-format {fmt}: the dataset's archive needs a "
                          "destination (--archive-to DIR)")
    if "://" in request.archive_to:
        raise PlanRefused(f"--archive-format {fmt}: a native archive is written to a local "
                          f"directory, not {request.archive_to}")


def _check_migrations(obs: Observation, items) -> list[str]:
    """A destination on the volume, or inside the item, is refused; one without the space
    blocks the plan, saying the free space seen."""
    out = []
    target = obs.target.path
    by_dest: dict[str, list[PlanItem]] = {}
    for it in items:
        if it.action != "migrate":
            continue
        dest = os.path.dirname(it.migrate_to)
        if is_under(dest, target):
            raise PlanRefused(f"--migrate: {dest} is on the volume being retired")
        if is_under(dest, it.path):
            raise PlanRefused(f"--migrate: {dest} is inside {it.path}")
        by_dest.setdefault(dest, []).append(it)
    for dest, its in by_dest.items():
        need = sum(i.disk_bytes for i in its)
        free = its[0].dest_free_bytes
        if free is None:
            out.append(f"the free space at {dest} is not known: migrating needs {need} bytes")
        elif need > free:
            out.append(f"{dest} has {free} bytes free; migrating "
                       f"{', '.join(i.path for i in its)} needs {need}")
    return out


def rebuild(plan: Plan) -> Plan:
    """The plan made again from what it records (its observation, its items' actions as a
    person left them, the identities it took): what apply compares a plan file with, so
    that only the items' actions are a person's to edit."""
    return make_plan(observation_of(plan), request_of(plan))


def destinations_of(plan: Plan) -> tuple[Destination, ...]:
    """The migrations' destinations as the plan's items recorded them (free bytes, the
    container's spelling): a plan made before its observation held them."""
    out: dict[str, Destination] = {}
    for it in plan.items:
        if it.action == "migrate" and it.migrate_to:
            d = os.path.dirname(it.migrate_to)
            out[d] = Destination(d, it.dest_free_bytes,
                                 os.path.dirname(it.migrate_inside) if it.migrate_inside
                                 else "")
    return tuple(out.values())


def observation_of(plan: Plan) -> Observation:
    """The observation the plan was decided on, its destinations taken from its items where
    it has none (a plan file made before the observation held them)."""
    obs = plan.observation
    return obs if obs.destinations else replace(obs, destinations=destinations_of(plan))


def edited_steps(plan: Plan) -> list[str]:
    """Where the plan's steps are not the ones its items make (a step edited by hand, an
    item's action changed without its steps): one line each; empty when they match."""
    from vacate.observing.model import codec

    try:
        again = rebuild(plan)
    except PlanRefused as e:
        return [str(e)]
    out = []
    have = [codec.encode(s) for s in plan.steps]
    want = [codec.encode(s) for s in again.steps]
    for i in range(max(len(have), len(want))):
        a = have[i] if i < len(have) else None
        b = want[i] if i < len(want) else None
        if a != b:
            sid = (a or b)["id"]
            if a is None or b is None:
                out.append(f"step {sid}: {'missing' if a is None else 'not one the items make'}")
            else:
                keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
                out.append(f"step {sid}: {', '.join(keys)} not as its items make it")
        if len(out) >= 10:
            break
    return out
