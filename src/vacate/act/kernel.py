"""Kernel users of the volume, released: swap files turned off, loop devices backed by files on
it detached, mounts of it unmounted (nested ones, bind mounts elsewhere, mounts in other mount
namespaces, and the volume's own), NFS exports withdrawn.

Each kind tells done from not done by the kernel's own table, read as it is now:
``/proc/swaps``, ``/sys/block/loopN/loop/backing_file``, the mount namespace's ``mountinfo``,
``/var/lib/nfs/etab``. A table that cannot be read is never "done". Unmounting is never lazy:
``umount`` without ``-l``, so a busy mount fails, named, instead of leaving the view while it
still pins the volume.

:func:`command_step` is the shape every command step has (done already, precondition, the
command, the postcondition confirmed); ``containers`` uses it too.
"""

from __future__ import annotations

import errno
import glob
import os
from collections.abc import Callable

from vacate.act.base import CommandFailed, Context, Outcome
from vacate.act.kind import Kind
from vacate.observing.collectors.kernel import _loop_status
from vacate.observing.collectors.mounts import read_mounts
from vacate.observing.compat import cut_prefix, cut_suffix
from vacate.observing.fsio import read_bounded
from vacate.observing.model.conditions import MountPin
from vacate.observing.model.mount import Mount
from vacate.observing.model.plan import Step
from vacate.observing.model.usage import Consumer
from vacate.observing.parsers import mountinfo

KINDS = (Kind("swapoff"), Kind("detach-loop", after_earlier=True),
         Kind("unmount", after_earlier=True), Kind("unexport"))

MAX_TABLE = 64 << 20          # the kernel's tables, mountinfo of thousands of mounts included
ETAB = "/var/lib/nfs/etab"
LAZY = ("-l", "--lazy")


# -- shared ------------------------------------------------------------------------------------
def _table(path: str) -> str | None:
    """A kernel table, whole; None when it is not there. Other errors raise."""
    try:
        data, more = read_bounded(path, MAX_TABLE)
    except FileNotFoundError:
        return None
    if more:
        raise OSError(errno.EFBIG, f"larger than {MAX_TABLE} bytes, not read whole", path)
    return data.decode("utf-8", "surrogateescape")


def consumer_of(step: Step, ctx: Context) -> Consumer | None:
    """The observed consumer the step's action answers, from the plan's observation."""
    cid = step.action.consumer if step.action else None
    if cid is None or ctx.plan is None:
        return None
    return next((c for c in ctx.plan.observation.consumers if c.id == cid), None)


def command_step(step: Step, ctx: Context, is_done: Callable[[Step, Context], bool], argv, *,
                 did: str, still: str) -> Outcome:
    """Run ``argv`` for ``step`` the one way every command step runs (apply checked
    ``done`` and ``ready`` just before): ``ok`` only once the postcondition is seen to hold
    (a command that failed while the effect is there anyway, a race with someone else, is
    ``ok`` too). ``did``: what ``ok`` says; ``still``: what a command that returned without
    the effect says."""
    try:
        ctx.run(argv)
    except CommandFailed as e:
        if is_done(step, ctx):
            return Outcome("ok", did, {"argv": list(e.argv), "exit": e.code})
        return Outcome("failed", str(e), {"argv": list(e.argv), "exit": e.code})
    if is_done(step, ctx):
        return Outcome("ok", did, {"argv": [str(a) for a in argv]})
    return Outcome("failed", still, {"argv": [str(a) for a in argv]})


def listed(present: Callable[[Step, Context], bool], table: Callable[[Context], str],
           absent: Callable[[Step], str]):
    """``done`` and ``ready`` of a step whose effect is that its entry leaves a table:
    ``present(step, ctx)`` says whether it is there (raising the ``OSError`` of a table that
    cannot be read: then it is neither done nor ready); ``absent(step)`` the reason not to
    act when it is not there."""
    def is_done(step: Step, ctx: Context) -> bool:
        try:
            return not present(step, ctx)
        except OSError:
            return False

    def why_not(step: Step, ctx: Context) -> str | None:
        try:
            return None if present(step, ctx) else absent(step)
        except OSError as e:
            return f"cannot read {table(ctx)}: {e.strerror or e}"

    return is_done, why_not


# -- swapoff -----------------------------------------------------------------------------------
def _swap_path(step: Step) -> str:
    return step.action.argv[-1]


def _swap_active(step: Step, ctx: Context) -> bool:
    """Whether the step's file is an active swap (``/proc/swaps``: names octal-escaped, a
    deleted file with `` (deleted)``). Raises the ``OSError`` of an unreadable table."""
    path = cut_suffix(_swap_path(step), " (deleted)")
    text = _table(ctx.host.proc_path("swaps"))
    for line in (text or "").splitlines()[1:]:
        parts = line.rsplit(None, 4)
        if len(parts) == 5 and cut_suffix(mountinfo.unescape(parts[0]), " (deleted)") == path:
            return True
    return False


_swap_done, _swap_ready = listed(_swap_active, lambda ctx: ctx.host.proc_path("swaps"),
                                 lambda step: f"{_swap_path(step)} is not an active swap")


# -- detach-loop -------------------------------------------------------------------------------
def _loop_dev(step: Step) -> str:
    return step.action.argv[-1]


def _loop_state(step: Step, ctx: Context) -> tuple[str, str]:
    """``("gone", "")`` when the device has no backing file, ``("same", text)`` when it is
    backed by the planned file, ``("other", text)`` by another one, ``("unknown", why)``."""
    dev = _loop_dev(step)
    planned = step.action.precondition.backing_file or step.precondition.backing_file
    bf = ctx.host.sys_path("block", os.path.basename(dev), "loop", "backing_file")
    try:
        text = _table(bf)
    except OSError as e:
        return "unknown", f"cannot read {bf}: {e.strerror or e}"
    if text is None:
        return "gone", ""
    text = text.rstrip("\n")
    if not planned:
        return "unknown", f"the plan does not say which file {dev} was backed by"
    if cut_suffix(text, " (deleted)") == planned:
        return "same", text
    if not ctx.host.live:
        return "other", text
    # set up in another mount namespace, the path is spelled as there: ask the file itself
    ident = _loop_status(ctx.host.path(dev))
    if ident is None:
        return "unknown", (f"{dev} is backed by {text}; whether that is {planned} could "
                           "not be asked (LOOP_GET_STATUS64)")
    try:
        st = os.stat(ctx.host.path(planned))
    except OSError:
        return "other", text
    return ("same" if (st.st_dev, st.st_ino) == ident else "other"), text


def _loop_numbers(ctx: Context, dev: str) -> set[str]:
    """``major:minor`` of the loop device and of its partitions."""
    name = os.path.basename(dev)
    out = set()
    for p in [ctx.host.sys_path("block", name, "dev"),
              *glob.glob(ctx.host.sys_path("block", name, name + "p*", "dev"))]:
        try:
            out.add((_table(p) or "").strip())
        except OSError:
            pass
    return out - {""}


def _loop_done(step: Step, ctx: Context) -> bool:
    return _loop_state(step, ctx)[0] in ("gone", "other")


def _loop_ready(step: Step, ctx: Context) -> str | None:
    dev = _loop_dev(step)
    state, text = _loop_state(step, ctx)
    if state == "unknown":
        return text
    if state != "same":
        return f"{dev} is not backed by the planned file"
    numbers = _loop_numbers(ctx, dev)
    try:
        at = [m.mountpoint for m in read_mounts(ctx.host)[0] if m.dev in numbers]
    except OSError as e:
        return f"cannot tell whether {dev} is mounted: {e.strerror or e}"
    if at:
        return f"{dev} is still mounted at {', '.join(at)} (unmount it first)"
    name = os.path.basename(dev)
    try:
        holders = sorted(os.listdir(ctx.host.sys_path("block", name, "holders")))
    except FileNotFoundError:
        holders = []
    except OSError as e:
        return f"cannot tell what holds {dev}: {e.strerror or e}"
    if holders:
        return f"{dev} is held by {', '.join(holders)} (a device-mapper or md device on it)"
    return None



# -- unmount -----------------------------------------------------------------------------------
def _mount_point(step: Step) -> str:
    return step.action.argv[-1]


def _pin(step: Step) -> tuple[int | None, str | None]:
    """The planned mount's id and device (the step's precondition, else its action's)."""
    for pre in (step.precondition, step.action.precondition):
        if isinstance(pre, MountPin):
            return pre.mount_id, pre.dev
    return None, None


def _recorded_ns(step: Step, ctx: Context) -> str | None:
    c = consumer_of(step, ctx)
    ns = c.attrs.namespace if c is not None and c.type == "mount" else None
    return ns if ns and ns != "host" else None


def _ns_of(ctx: Context, pid: int | str) -> str | None:
    try:
        return os.readlink(ctx.host.proc_path(pid, "ns", "mnt"))
    except OSError:
        return None


def _pids_in(ctx: Context, ns: str) -> list[int]:
    """The processes in mount namespace ``ns`` (one readlink each)."""
    out = []
    for name in os.listdir(ctx.host.proc):
        if name.isdigit() and _ns_of(ctx, name) == ns:
            out.append(int(name))
    return out


def _view(step: Step, ctx: Context, acting: bool) -> tuple[tuple[Mount, ...] | None, str]:
    """The mounts of the namespace the step acts in, or (None, why not). A mount namespace
    is entered through the planned pid, which must still be in it (``acting``); to tell
    whether it is done, any process left in it will do, and none left means the namespace
    ended with its last process, its mounts with it (``()``)."""
    w = step.action.where
    pid: int | str = "self"
    if w.kind == "mount-namespace" and w.pid is not None:
        ns = _recorded_ns(step, ctx)
        now = _ns_of(ctx, w.pid)
        pid = w.pid
        if ns is not None and now != ns:
            if acting:
                was = "has ended" if now is None else "is in another mount namespace now"
                return None, f"pid {w.pid} {was}: {ns} cannot be entered through it"
            others = _pids_in(ctx, ns)
            if not others:
                return (), ""
            pid = others[0]
    elif w.kind != "host":
        return None, f"unmounting inside {w.label()} is not done by vacate"
    try:
        return read_mounts(ctx.host, pid)[0], ""
    except OSError as e:
        return None, f"cannot read {ctx.host.proc_path(pid, 'mountinfo')}: {e.strerror or e}"


def _volume_dev(step: Step, ctx: Context) -> str | None:
    """The volume's device, for a step unmounting the volume itself elsewhere (not a mount
    on it): a mount's id alone is reused, in a namespace whose inode number is reused too
    (a container restarted)."""
    c = consumer_of(step, ctx)
    if c is None or c.type != "mount" or c.attrs.nested:
        return None
    return ctx.plan.observation.target.mount.dev


def _planned(step: Step, ctx: Context, mounts: tuple[Mount, ...]) -> list[Mount]:
    """The planned mount: by its recorded id (and device: the kernel gives an unmounted
    mount's id to the next mount, which is not the planned one); without one (a loop
    device's mounts), what is mounted at the mount point from that device."""
    mid, dev = _pin(step)
    if mid is not None:
        dev = dev or _volume_dev(step, ctx)
        return [m for m in mounts if m.mount_id == mid and (not dev or m.dev == dev)]
    mp = _mount_point(step)
    cid = step.action.consumer or ""
    numbers = _loop_numbers(ctx, cut_prefix(cid, "loop-device:")) \
        if cid.startswith("loop-device:") else set()
    return [m for m in mounts if m.mountpoint == mp and (not numbers or m.dev in numbers)]


def _unmount_done(step: Step, ctx: Context) -> bool:
    mounts, _why = _view(step, ctx, acting=False)
    return mounts is not None and not _planned(step, ctx, mounts)


def _unmount_ready(step: Step, ctx: Context) -> str | None:
    mp = _mount_point(step)
    if any(a in LAZY for a in step.action.argv):
        return "a lazy unmount (-l) is never done: it hides a busy mount that still pins " \
               "the volume"
    mounts, why = _view(step, ctx, acting=True)
    if mounts is None:
        return why
    found = _planned(step, ctx, mounts)
    if not found:
        return f"the planned mount is not at {mp}"
    dev = _pin(step)[1]
    for m in found:
        if m.mountpoint != mp:
            return f"mount {m.mount_id} is at {m.mountpoint} now, not at {mp}"
        if dev and m.dev != dev:
            return f"the mount at {mp} is of device {m.dev}, not {dev} as planned"
        on = [x.mountpoint for x in mounts if x.parent_id == m.mount_id]
        if on:
            return f"mounted on {mp} still: {', '.join(on)} (unmount those first)"
    return None



# -- unexport ----------------------------------------------------------------------------------
def _export(step: Step) -> tuple[str, str]:
    """(client, path) of ``exportfs -u CLIENT:PATH``."""
    spec = step.action.argv[-1]
    i = spec.find(":/")
    return (spec[:i], spec[i + 1:]) if i >= 0 else ("*", spec)


def _exported(step: Step, ctx: Context) -> bool:
    """Whether the kernel's export table (etab) has the step's client and path. Raises the
    ``OSError`` of an unreadable table."""
    client, path = _export(step)
    for line in (_table(ctx.host.path(ETAB)) or "").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        raw, _, rest = line.partition("\t")
        if not rest:
            raw, _, rest = line.partition(" ")
        if mountinfo.unescape(raw) == path and (rest.split("(", 1)[0].strip() or "*") == client:
            return True
    return False


_unexport_done, _unexport_ready = listed(_exported, lambda ctx: ctx.host.path(ETAB),
                                         lambda step: f"{step.action.argv[-1]} is not exported")



# -- the interface -----------------------------------------------------------------------------
# kind: (done, ready, what ok says, what a command that returned without the effect says)
_BY_KIND = {
    "swapoff": (_swap_done, _swap_ready, lambda s: f"{s.action.argv[-1]} is no swap any more",
                lambda s: f"swapoff returned, and {s.action.argv[-1]} is still an active swap"),
    "detach-loop": (_loop_done, _loop_ready, lambda s: f"{s.action.argv[-1]} detached",
                    lambda s: f"losetup -d returned, and {s.action.argv[-1]} is still backed "
                              "by the file: something still has it open (the kernel detaches "
                              "it at the last close)"),
    "unmount": (_unmount_done, _unmount_ready, lambda s: f"{s.action.argv[-1]} unmounted",
                lambda s: "umount returned, and the planned mount is still at "
                          f"{s.action.argv[-1]}"),
    "unexport": (_unexport_done, _unexport_ready,
                 lambda s: f"{s.action.argv[-1]} is not exported any more",
                 lambda s: f"exportfs -u returned, and {s.action.argv[-1]} is still in {ETAB}"),
}


def done(step: Step, ctx: Context) -> bool:
    """The kernel no longer has it: not an active swap, the loop device detached (or backed
    by another file), no mount with the planned id in that namespace, not in etab."""
    return _BY_KIND[step.kind][0](step, ctx)


def ready(step: Step, ctx: Context) -> str | None:
    """None when the kernel still has exactly what was planned and nothing stands in the
    way (a loop device still mounted or held, a mount with mounts on it), else why not."""
    return _BY_KIND[step.kind][1](step, ctx)


def skipped(step: Step, ctx: Context) -> Outcome:
    return Outcome("skipped", f"{_BY_KIND[step.kind][2](step)} already")


def run(step: Step, ctx: Context) -> Outcome:
    """Run the step's command (``swapoff``, ``losetup -d``, ``umount``, ``exportfs -u``)
    and confirm its effect in the kernel's table."""
    is_done, _why_not, did, still = _BY_KIND[step.kind]
    return command_step(step, ctx, is_done, step.action.command, did=did(step),
                        still=still(step))
