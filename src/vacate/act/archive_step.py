"""The plan's ``archive`` and ``verify`` steps: an item copied to its destination as a cold
backup, then read back from the destination itself and checked against the item.

Both are idempotent through the archive's own rules: archiving onto a complete archive of an
unchanged item writes nothing ("up to date"); onto one of a changed item it fails, naming the
change. A step finished in an earlier run of this apply counts as done while the archive's
manifest is the one it finished with (its sha256 is in the journal). Verify reads the parts
back past the page cache (each file's cached pages are dropped first; an S3 GET reads the
object store).
"""

from __future__ import annotations

import os

from vacate.act.base import Context, Outcome
from vacate.act.kind import Kind
from vacate.observing.fsio import existing_parent
from vacate.observing.model.plan import Step

KINDS = (Kind("archive", proves_itself=True),
         Kind("verify", proves_itself=True, after_earlier=True))


def _target(location: str):
    from vacate.archive.target import open_target

    return open_target(location)


def _location(step: Step) -> str:
    """Where the item's archive is: the plan wrote it into the step."""
    return step.params.archive if step.kind == "verify" else step.postcondition.archive


def manifest_sha256(location: str) -> str | None:
    """The sha256 of the archive's manifest at ``location`` (streamed), or None."""
    from vacate.archive import manifest as mf
    from vacate.archive.verify import manifest_sha256 as streamed

    try:
        t = _target(location)
        if mf.MANIFEST not in t.list():
            return None
        return streamed(t)
    except (OSError, KeyError, ValueError):
        return None
    except Exception:  # noqa: BLE001 - a target that cannot be opened has no manifest
        return None


def done(step: Step, ctx: Context) -> bool:
    data = ctx.finished_earlier(step)
    return data is not None and data.get("manifest_sha256") is not None and \
        data.get("manifest_sha256") == manifest_sha256(_location(step))


def ready(step: Step, ctx: Context) -> str | None:
    item = step.params.item
    if not os.path.lexists(item):
        return f"{item} is not there to archive"
    if step.kind == "archive":
        from vacate.archive.compress import missing

        to = step.params.to
        if "://" not in to and not os.access(existing_parent(to), os.W_OK):
            return f"{to}: not writable"
        why = missing()
        if why:
            return why
    return None


def _drop_cached(location: str) -> None:
    """Drop the page cache of every file of a local archive (so verify reads the disk)."""
    if "://" in location or not hasattr(os, "posix_fadvise"):
        return
    for root, _dirs, files in os.walk(location):
        for name in files:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
            finally:
                os.close(fd)


def run(step: Step, ctx: Context) -> Outcome:
    from vacate.observing.errors import VacateError

    loc = _location(step)
    try:
        target = _target(loc)
        if step.kind == "archive":
            return _archive(step, ctx, target, loc)
        return _verify(step, ctx, target, loc)
    except VacateError as e:
        return Outcome("failed", e.message)


def _archive(step: Step, ctx: Context, target, loc: str) -> Outcome:
    from vacate.archive.writer import archive, exit_code

    p = step.params
    r = archive([p.item], target, p.name, exclude=list(p.exclude),
                progress=lambda n, total: ctx.tell(step, n, total, "archiving"))
    data = {"location": loc, "bytes_read": r.bytes_read, "bytes_written": r.bytes_written,
            "files": r.files, "up_to_date": r.up_to_date,
            "manifest_sha256": manifest_sha256(loc)}
    code = exit_code(r)
    if code == 0:
        return Outcome("ok", "up to date" if r.up_to_date else f"{r.files} files", data)
    why = [*(f"changed while read: {c}" for c in r.changed[:5]),
           *(f"changed since the archive there was made: {c}" for c in r.changed_since[:5]),
           *(f"not in the archive: {m}" for m in r.missing[:5]),
           *(w.message for w in r.warnings if w.blocks_verdict)][:10]
    return Outcome("failed", "; ".join(why) or f"archive exit {code}", data)


def _verify(step: Step, ctx: Context, target, loc: str) -> Outcome:
    from vacate.archive.verify import verify

    _drop_cached(loc)
    r = verify(target, against=[step.params.against],
               progress=lambda n, total: ctx.tell(step, n, total, "verifying"))
    data = {"location": loc, "files_checked": r.files_checked, "bytes_checked": r.bytes_checked,
            "manifest_sha256": manifest_sha256(loc)}
    unread = [w.message for w in r.warnings if w.blocks_verdict]
    if r.ok and not unread:
        return Outcome("ok", f"{r.files_checked} files read back and checked", data)
    why = [f.message for f in r.findings[:10]] + unread[:5]
    return Outcome("failed", "; ".join(why), data)
