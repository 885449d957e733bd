"""The plan's ``check`` steps: after the deletes, the space freed against what the plan
expected; at the end, the volume retired, looked for by its recorded identity (the device
``major:minor`` and its filesystem type, not the path, which now shows the root filesystem) in
every mount namespace. Both only look."""

from __future__ import annotations

import os

from vacate.act.base import Context, Outcome
from vacate.act.kind import Kind
from vacate.observing.model.mount import ZFS_FSTYPES
from vacate.observing.model.plan import Step

KINDS = (Kind("check", proves_itself=True, after_earlier=True, every_time=True),)


def _mounts_of(dev: str, host, fstype: str | None = None) -> list[tuple[str, str]]:
    """(namespace, mountpoint) of every mount of the device ``dev`` seen from here; with
    ``fstype``, of that type only: a device number a retired filesystem held can be handed to
    another one (a loop device attached to another image, an anonymous device number of
    btrfs, tmpfs or FUSE), and a filesystem of another type there is not the volume."""
    from vacate.observing.parsers import mountinfo

    seen_ns: set[str] = set()
    out = []
    try:
        pids = sorted(int(p) for p in os.listdir(host.proc) if p.isdigit())
    except OSError:
        pids = []
    for pid in ["self", *pids]:
        try:
            ns = os.readlink(host.proc_path(pid, "ns", "mnt"))
            if ns in seen_ns:
                continue
            with open(host.proc_path(pid, "mountinfo"), "rb") as f:
                text = f.read().decode("utf-8", "surrogateescape")
        except OSError:
            continue
        seen_ns.add(ns)
        ms, _bad = mountinfo.parse(text)
        out.extend((ns, m.mountpoint) for m in ms
                   if m.dev == dev and (fstype is None or m.fstype == fstype))
    return out


def remounters(ctx: Context) -> tuple[list[str], str]:
    """What is configured on this host to mount the volume again, read now against the
    target as the plan recorded it (its path now shows the root filesystem): fstab lines not
    commented out, and ``.mount``/``.automount`` units for it that are enabled or active;
    and a reason when the configuration could not be read (unknown is not "nothing")."""
    from vacate.observing.collectors.configured import collect

    try:
        consumers, problems = collect(ctx.host, ctx.plan.observation.target)
    except OSError as e:
        return [], str(e)
    unread = [p.message for p in problems if p.blocks_verdict]
    if unread:
        return [], "; ".join(unread[:3])
    out = []
    for c in consumers:
        a = c.attrs
        where = c.evidence[0].source if c.evidence else c.name
        if c.type == "fstab" and a.mountpoint == ctx.plan.target_path:
            out.append(f"the fstab line at {where}")
        elif c.type == "systemd-unit" and a.mounts_target and (
                a.enabled or a.active):
            out.append(f"the unit {c.name} ({where})")
    return out, ""


def done(step: Step, ctx: Context) -> bool:
    return False            # looking again is the check


def ready(step: Step, ctx: Context) -> str | None:
    return None


def run(step: Step, ctx: Context) -> Outcome:
    what = step.params.what
    plan = ctx.plan
    if what == "freed":
        t = plan.observation.target
        try:
            there = os.stat(t.mountpoint).st_dev == t.st_dev
            st = os.statvfs(t.mountpoint)
        except FileNotFoundError as e:
            from vacate.act.freeing import freed_by_plan

            if freed_by_plan(ctx) is None:       # else its mount point went with it
                return Outcome("failed", f"cannot look at {t.mountpoint}: {e.strerror}")
            there = False
        except OSError as e:
            return Outcome("failed", f"cannot look at {t.mountpoint}: {e.strerror}")
        if not there:
            # unmounted since (a rerun): the path shows another filesystem now
            earlier = ctx.finished_earlier(step)
            if earlier and earlier.get("freed_bytes") is not None:
                return Outcome("ok", f"{earlier['freed_bytes']} bytes freed, "
                                     f"{plan.expected_freed_bytes} expected (measured before "
                                     "the volume was unmounted)", earlier)
            return Outcome("ok", f"{t.mountpoint} is unmounted already: the space freed can "
                                 "no longer be measured",
                           {"freed_bytes": None, "expected_bytes": plan.expected_freed_bytes})
        avail = st.f_bavail * st.f_frsize
        freed = avail - (t.avail_bytes or 0)
        data = {"freed_bytes": freed, "expected_bytes": plan.expected_freed_bytes}
        if plan.fstype in ZFS_FSTYPES:
            return Outcome("ok", f"{freed} bytes free so far of {plan.expected_freed_bytes} "
                                 "expected: ZFS frees in the background (zpool wait -t free)",
                           data)
        return Outcome("ok", f"{freed} bytes freed, {plan.expected_freed_bytes} expected", data)
    if what == "retired":
        left = _mounts_of(step.params.mount_dev, ctx.host, ctx.plan.fstype)
        if left:
            return Outcome("failed", "still mounted: " + ", ".join(
                f"{mp} ({ns})" for ns, mp in left[:10]), {"mounted": [mp for _, mp in left]})
        again, why = remounters(ctx)
        if why:
            return Outcome("failed", f"device {step.params.mount_dev} is mounted nowhere, "
                                     f"but whether anything would mount it again could not be "
                                     f"told: {why}")
        if again:
            return Outcome("failed", "unmounted, but it would be mounted again by: " +
                           "; ".join(again[:10]), {"remounters": again})
        return Outcome("ok", f"device {step.params.mount_dev} is mounted nowhere, and "
                             "nothing configured here would mount it again", {})
    return Outcome("failed", f"unknown check {what!r}")
