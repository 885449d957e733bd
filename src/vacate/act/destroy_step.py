"""The plan's ``destroy-dataset`` step (``--free-volume`` on plain ZFS): the volume's
dataset freed, the plan's last step.

Ready only when the gate holds just before it acts (:func:`vacate.act.freeing.why_not`:
every archive of it verified in this apply, no snapshot but the plan's own and those it
lists, none held or cloned, no child, unmounted). Acts with ``zfs destroy -r DATASET``
(never ``-R``, which would take clones elsewhere in the pool). Done when ``zfs list`` says
the dataset does not exist, so a rerun after it is gone is done, and one after a ``kill -9``
mid-destroy finds it gone or checks the gate again and destroys it.
"""

from __future__ import annotations

from vacate.act.base import Context, Outcome
from vacate.act.kind import Kind
from vacate.observing.model.plan import Step

KINDS = (Kind("destroy-dataset", after_earlier=True),)

BUSY_TRIES = 40            # zfs-fuse says busy for a while after an unmount (0.25 s apart)


def done(step: Step, ctx: Context) -> bool:
    from vacate.act.freeing import gone

    return gone(step.params.dataset)


def ready(step: Step, ctx: Context) -> str | None:
    from vacate.act.freeing import why_not

    p = step.params
    return why_not(ctx, p.dataset, tuple(p.snapshots), tuple(step.precondition.verified_by),
                   step.id)


def run(step: Step, ctx: Context) -> Outcome:
    import time

    from vacate.act.freeing import gone

    p = step.params
    argv = ("zfs", "destroy", "-r", p.dataset)
    r = None
    for _ in range(BUSY_TRIES):
        r = ctx.run(argv, check=False)
        if r.returncode == 0 or gone(p.dataset) or "busy" not in (r.stderr or ""):
            break
        time.sleep(0.25)
    if r.returncode != 0 and not gone(p.dataset):
        return Outcome("failed", f"{' '.join(argv)}: {(r.stderr or r.stdout).strip()}")
    data = {"dataset": p.dataset, "snapshots": list(p.snapshots), "restore": p.restore,
            "command": list(argv)}
    return Outcome("ok", f"{p.dataset} destroyed; restored from {p.restore}", data)
