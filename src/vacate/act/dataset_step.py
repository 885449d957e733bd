"""The plan's ``archive-dataset`` and ``verify-dataset`` steps (``--archive-format zfs`` or
``both``): the volume's ZFS dataset archived natively, then proved receivable.

``archive-dataset`` takes the snapshot named for the plan (:func:`zfs_tool.snapshot`: taken
unless it is there) and sends it into parts at the destination
(:func:`vacate.archive.zfs_write.write_native`). Idempotent through the archive's own
rules: a rerun onto a finished archive of that snapshot writes nothing; one after an
interruption removes what the unfinished run left and sends again. Done when the manifest
at the destination holds the snapshot's guid, or, the snapshot gone since (the plan's
``destroy-dataset`` took it), when a finished archive of it is there.

``verify-dataset`` reads the archive back (:func:`vacate.archive.zfs_verify.verify_native`):
received into a scratch dataset of ``--verify-pool`` and compared with the snapshot, or,
with no pool, its stream parsed end to end, the weaker check, named so in its outcome. It
proves itself: a rerun reads the archive again.
"""

from __future__ import annotations

import os

from vacate.act.base import Context, Outcome
from vacate.act.kind import Kind
from vacate.observing.fsio import existing_parent
from vacate.observing.model.plan import Step

KINDS = (Kind("archive-dataset"),
         Kind("verify-dataset", proves_itself=True, after_earlier=True))


def _target(location: str):
    from vacate.archive.target import LocalTarget

    return LocalTarget(location)


def finished_guid(location: str, origin: str) -> int | None:
    """The guid of ``origin`` when the native archive at ``location`` is a finished one of
    it holding that guid, else None."""
    from vacate.archive import zfs_tool, zfs_verify

    if not os.path.isdir(location):
        return None
    try:
        m = zfs_verify.load(_target(location))
    except Exception:  # noqa: BLE001 - none, unfinished or damaged: not done
        return None
    if m.origin != origin or not zfs_tool.exists(origin):
        return None
    guid = int(zfs_tool.props(origin, "guid")["guid"])
    return guid if m.guid == guid else None


def done(step: Step, ctx: Context) -> bool:
    if step.kind != "archive-dataset":
        return False
    post = step.postcondition
    return finished_guid(post.native_archive, post.origin) is not None or \
        _finished_and_gone(post.native_archive, post.origin)


def _finished_and_gone(location: str, origin: str) -> bool:
    """Whether the snapshot ``origin`` is gone (``--free-volume`` freed the dataset, or
    began to, after its archive was verified) and the archive at ``location`` is a finished
    one of it: nothing is left to send (a new snapshot would not be the one archived), and a
    rerun goes on to verify the archive again."""
    from vacate.act.freeing import gone

    if not os.path.isdir(location) or not gone(origin):
        return False
    from vacate.archive import zfs_verify

    try:
        return zfs_verify.load(_target(location)).origin == origin
    except Exception:  # noqa: BLE001 - none, unfinished or damaged: not done
        return False


def ready(step: Step, ctx: Context) -> str | None:
    from vacate.archive import zfs_tool

    p = step.params
    if step.kind == "verify-dataset":
        return None if os.path.isdir(p.archive) else f"{p.archive}: no archive there"
    import shutil

    if shutil.which("zstd") is None:
        return "zstd is not installed here (apt install zstd)"
    if not os.access(existing_parent(p.to), os.W_OK):
        return f"{p.to}: not writable"
    if not zfs_tool.exists(p.dataset):
        return f"no dataset {p.dataset}"
    return None


def run(step: Step, ctx: Context) -> Outcome:
    from vacate.observing.errors import VacateError

    try:
        if step.kind == "archive-dataset":
            return _archive(step, ctx)
        return _verify(step, ctx)
    except VacateError as e:
        return Outcome("failed", e.message)


def _archive(step: Step, ctx: Context) -> Outcome:
    from vacate.archive import zfs_tool
    from vacate.archive.zfs_write import write_native

    p = step.params
    taken = zfs_tool.snapshot(p.dataset, p.snapshot)
    total = int(zfs_tool.props(p.dataset, "referenced")["referenced"])

    def progress(phase: str, n: int) -> None:
        if phase == "part-writing":
            ctx.tell(step, n, max(total, n), "sending")

    location = os.path.join(p.to, p.name)
    r = write_native(p.dataset, p.snapshot, _target(location), p.name,
                     send_flags=tuple(p.send_flags), progress=progress)
    m = r.manifest
    data = {"location": location, "origin": m.origin, "guid": m.guid,
            "snapshot_taken": taken, "up_to_date": r.up_to_date,
            "stream_bytes": m.stream_bytes, "archive_bytes": m.archive_bytes,
            "parts": len(m.parts), "receive": m.receive_command()}
    said = "up to date" if r.up_to_date else \
        f"{len(m.parts)} parts, {m.archive_bytes} bytes of a {m.stream_bytes}-byte stream"
    return Outcome("ok", f"{m.origin} (guid {m.guid}): {said}", data)


def _interrupted(step: Step, ctx: Context) -> bool:
    """Whether an earlier run of this apply began the step and never said how it ended (a
    kill -9 inside it)."""
    st = ctx.earlier.get(step.id)
    return st is not None and st.event == "intent"


def leftovers(pool: str, origin: str, guid: int) -> list[str]:
    """The scratch datasets an interrupted verify of the snapshot ``origin`` (``guid``) left
    in ``pool``: a clone of it (``vacate-verify-src-*``, its origin is the snapshot), or a
    receive of it (``vacate-verify-*`` holding a snapshot of that guid). Only those: a
    scratch dataset of another archive's verify is not this step's."""
    from vacate.archive import zfs_tool

    # zfs get, not list: zfs-fuse 0.7's list has no -p (a guid would read "1.26E") nor -d
    r = zfs_tool.zfs("get", "-Hp", "-r", "-o", "name,property,value", "origin,guid", pool,
                     check=False)
    props: dict[str, dict[str, str]] = {}
    for line in r.stdout.splitlines():
        name, prop, value = (line.split("\t") + ["", "", ""])[:3]
        props.setdefault(name, {})[prop] = value
    mine = set()
    for name, got in props.items():
        top = name.split("@", 1)[0]
        if not top.startswith(f"{pool}/vacate-verify-") or top.count("/") != pool.count("/") + 1:
            continue
        if got.get("origin") == origin or "@" in name and got.get("guid") == str(guid):
            mine.add(top)
    return sorted(mine)


_LIST = {"recorded": "the file list recorded from the source", "source": "the source's",
         "": "nothing (listed only)"}
_DATA = {"source": "the source snapshot's", "archived": "the archive's stream",
         "": "nothing (digested only)"}


def _verify(step: Step, ctx: Context) -> Outcome:
    from vacate.archive import zfs_tool
    from vacate.archive.zfs_verify import RECEIVED, load, verify_native

    p = step.params
    cleared = []
    if p.verify_pool is not None and _interrupted(step, ctx):
        m = load(_target(p.archive))
        for name in leftovers(p.verify_pool, m.origin, m.guid):
            zfs_tool.destroy_r(name)
            cleared.append(name)
    r = verify_native(_target(p.archive), verify_pool=p.verify_pool,
                      progress=lambda n, total: ctx.tell(step, n, total, "verifying"))
    guid = load(_target(p.archive)).guid
    strength = r.strength if r.strength == RECEIVED else f"{r.strength} (the weaker check)"
    data = {"location": p.archive, "origin": r.origin, "guid": guid, "strength": r.strength,
            "allows_freeing": r.allows_freeing, "parts_checked": r.parts_checked,
            "bytes_checked": r.bytes_checked, "notes": list(r.notes),
            "findings": [f.message for f in r.findings[:10]],
            "cleared": cleared,      # what an interrupted run of this step left, destroyed
            # the received tree's file list, and its data (a full send digested), and what
            # each was compared with
            "compared": None if r.compared is None else {
                "entries": r.compared.entries, "against": r.against or None},
            "content": None if r.content is None else {
                "digest": r.content.digest, "objects": r.content.objects,
                "against": r.content.against or None}}
    if r.ok:
        how = f"received into {p.verify_pool} and compared" if r.strength == RECEIVED else \
            "its stream parsed end to end; not received (no --verify-pool)"
        if r.compared is not None and r.content is not None:
            how += (f" ({r.compared.entries:,} entries with {_LIST[r.against]}, its data "
                    f"with {_DATA[r.content.against]})")
        return Outcome("ok", f"{strength}: {r.origin} (guid {guid}), {how}", data)
    return Outcome("failed", f"{strength}: " + "; ".join(f.message for f in r.findings[:10]),
                   data)
