"""The gate before a volume is freed: one place, read by every step that frees one (the
plain ZFS ``destroy-dataset``; Proxmox's freeing through ``pct`` reuses it).

:func:`why_not` is the precondition, checked just before the step acts: every archive of
the volume in the plan was verified in this apply (the journal's latest outcome of each
verify step the precondition names, handed over as ``ctx.witnesses``: a native archive
received and compared, ``allows_freeing``, of the snapshot whose guid is the one ZFS gives
now; a tar archive or a copy read back), the dataset has no snapshot but the plan's own and
those the plan lists, none held or cloned, no child dataset, and it is not mounted (the
unmount done). :func:`gone` is the postcondition: ``zfs list`` says it does not exist.
"""

from __future__ import annotations

from vacate.act.base import Context


def own_snapshots(ctx: Context) -> tuple[str, ...]:
    """The snapshots the plan takes of its dataset: the native archive's, and the one before
    the deletes (named for the plan: :func:`vacate.act.snapshot.plan_snapshot_name`)."""
    from vacate.act.snapshot import plan_snapshot_name, zfs_name

    out = [s.params.snapshot for s in ctx.plan.steps if s.kind == "archive-dataset"]
    if any(s.kind == "snapshot" for s in ctx.plan.steps):
        out.append(zfs_name(plan_snapshot_name(ctx.plan)))
    return tuple(out)


def archives_verified(ctx: Context, verified_by: tuple[str, ...],
                      resumed: bool = False) -> str | None:
    """None when each step of ``verified_by`` ended verified in this apply, else why not.
    ``resumed``: the freeing began in an earlier run and never said how it ended (a ``kill
    -9`` or a power cut inside ``zfs destroy -r``, which may have taken the snapshots
    already): a native archive's snapshot gone is then taken as gone with it, its archive
    received and compared in this apply all the same."""
    from vacate.archive import zfs_tool

    kinds = {s.id: s.kind for s in ctx.plan.steps}
    for sid in verified_by:
        st = ctx.witnesses.get(sid)
        if st is None or st.event != "outcome" or st.status not in ("ok", "skipped"):
            return f"{sid} has not verified its archive in this apply"
        if kinds.get(sid) != "verify-dataset":
            continue
        d = st.data or {}
        if d.get("allows_freeing") is not True:
            return (f"{sid}: the dataset's archive was not proved receivable "
                    f"({d.get('strength') or 'not said'}); only an archive received and "
                    "compared allows freeing")
        origin = str(d.get("origin") or "")
        if origin and resumed and not zfs_tool.exists(origin):
            continue
        if not origin or not zfs_tool.exists(origin):
            return f"{sid}: the snapshot archived ({origin or 'not said'}) is not there now"
        now = int(zfs_tool.props(origin, "guid")["guid"])
        if now != d.get("guid"):
            return (f"{sid}: {origin} is not the snapshot verified (its guid is {now}, the "
                    f"archive's {d.get('guid')})")
    return None


def dataset_blockers(dataset: str, listed: tuple[str, ...], own: tuple[str, ...]) -> list[str]:
    """What keeps ``dataset`` from being freed now: a snapshot neither the plan's own nor
    listed, one held or cloned, a child dataset, the dataset mounted, what could not be
    read."""
    from vacate.observing.collectors.zfs import dataset_facts

    facts = dataset_facts(dataset)
    if facts.error or not facts.exists:
        return [facts.error or f"no dataset {dataset}"]
    out = []
    new = [s.name for s in facts.snapshots if s.name not in own and s.name not in listed]
    if new:
        out.append(f"{dataset} has snapshots the plan did not list: "
                   + ", ".join("@" + n for n in new))
    for s in facts.snapshots:
        if s.holds is None or s.holds:
            out.append(f"the snapshot {dataset}@{s.name} is held (zfs hold: "
                       f"{'not known' if s.holds is None else s.holds})")
        if s.clones:
            out.append(f"the snapshot {dataset}@{s.name} has clones: {', '.join(s.clones)}")
    if facts.children:
        out.append(f"{dataset} has child datasets: {', '.join(facts.children)}")
    if facts.mounted is not False:
        out.append(f"{dataset} is mounted (or could not tell): the unmount is not done")
    return out


def why_not(ctx: Context, dataset: str, listed: tuple[str, ...],
            verified_by: tuple[str, ...], step_id: str = "") -> str | None:
    """The precondition of freeing ``dataset`` (see the module) by the step ``step_id``:
    None when it holds, else every reason it does not."""
    st = ctx.earlier.get(step_id)
    why = archives_verified(ctx, verified_by, resumed=st is not None and st.event == "intent")
    if why:
        return why
    said = dataset_blockers(dataset, listed, own_snapshots(ctx))
    return "; ".join(said) if said else None


def gone(dataset: str) -> bool:
    """Whether ``zfs list`` says ``dataset`` does not exist (any other failure: not known,
    so not gone)."""
    from vacate.archive import zfs_tool

    r = zfs_tool.zfs("list", "-H", "-o", "name", dataset, check=False)
    return r.returncode != 0 and "does not exist" in r.stderr


def freed_by_plan(ctx: Context) -> str | None:
    """The dataset the plan's ``destroy-dataset`` step freed, when it is gone now (a rerun
    after it: what went with it, its mount point and its snapshots, is not looked for)."""
    for s in ctx.plan.steps:
        if s.kind in ("destroy-dataset", "free-guest-volume") and gone(s.params.dataset):
            return s.params.dataset
    return None
