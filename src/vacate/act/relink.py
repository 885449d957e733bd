"""A symbolic link elsewhere that points into a migrated item, pointed at the new place
(``repoint-link``): a new link made beside it, with its owner, and renamed over it (never a
moment without the link), the directory synced.

Ready: the link still reads the target the plan saw. Done: it reads the new one. The
journal keeps the old target: :func:`undo` points it back (refused, named, when the link
was changed since). No backup is left beside it: a link back into the retired volume is
what the next look would report.
"""

from __future__ import annotations

import os
import shlex
import time

from vacate.act.base import CommandFailed, Context, Outcome
from vacate.act.kind import Kind, params
from vacate.observing.model.plan import Step

KINDS = (Kind("repoint-link"),)


def _reads(link: str, ctx: Context) -> str | None:
    try:
        return os.readlink(ctx.host.path(link))
    except OSError:
        return None


def done(step: Step, ctx: Context) -> bool:
    p = params(step)
    return _reads(p.link, ctx) == p.to


def ready(step: Step, ctx: Context) -> str | None:
    p = params(step)
    now = _reads(p.link, ctx)
    if now is None:
        return f"{p.link} is not a symbolic link now"
    if now != p.target:
        return f"{p.link} points to {now} now, not to {p.target} as planned: left as it is"
    return None


def _point(link_local: str, to: str) -> None:
    """``link_local`` made to point to ``to``: a new link beside it, renamed over it."""
    st = os.lstat(link_local)
    d, name = os.path.split(link_local)
    tmp = os.path.join(d, f".{name}.vacate-{os.getpid()}-{time.monotonic_ns()}")
    os.symlink(to, tmp)
    try:
        os.lchown(tmp, st.st_uid, st.st_gid)
        os.rename(tmp, link_local)
    except OSError:
        os.unlink(tmp)
        raise
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def run(step: Step, ctx: Context) -> Outcome:
    p = params(step)
    _point(ctx.host.path(p.link), p.to)
    return Outcome("ok", f"{p.link} -> {p.to} (was -> {p.target})",
                   {"link": p.link, "before": p.target, "after": p.to,
                    "undo": shlex.join(("ln", "-sfn", p.target, p.link))})


def undo(step: Step, ctx: Context) -> str:
    """The link pointed back at its old target; refused when it reads neither."""
    p = params(step)
    now = _reads(p.link, ctx)
    if now == p.target:
        return f"{p.link} points to {p.target} already (put back already)"
    if now != p.to:
        raise CommandFailed(("readlink", p.link), 1, f"{p.link} was changed since vacate "
                                                     f"repointed it (it points to {now}): "
                                                     "left as it is")
    _point(ctx.host.path(p.link), p.target)
    return f"{p.link} points to {p.target} again"
