"""Confirming that the ended processes hold no GPU any more, as the NVIDIA driver sees it.

The driver knows host pids only, so this asks NVML from the host (``ctx.nvml``: any object
with pynvml's functions, the ``pynvml`` module when it is installed) which processes have a
context on each GPU. It never signals anything: a process is never ended only because it holds
``/dev/nvidia*`` (persistenced, X, exporters and other tenants do); the processes were ended
by the steps before, and this one waits (up to ``params.wait_s``, 30 s unless given) for
the driver to tear their contexts down.

A pid NVML lists counts when it is the planned process (same start time) or no process at
all (a context the driver has not released yet); a live process that is another one now (the
pid reused) does not. Without NVML (not installed, no driver, no GPU) nothing can be
confirmed: the step is ``skipped`` and says so, unless a planned process still has a
``/dev/nvidia*`` device open, which is ``failed``.
"""

from __future__ import annotations

import os
import time

from vacate.act.base import Context, Outcome
from vacate.act.kind import Kind, params
from vacate.act.processes import same_process, start_time
from vacate.observing.collectors.procs_gpu import load_nvml, nvml_usage
from vacate.observing.host import Host
from vacate.observing.model.codec import Malformed
from vacate.observing.model.plan import Step

KINDS = (Kind("release-gpu", after_earlier=True),)

POLL_S = 0.5


def _planned(step: Step, ctx: Context) -> dict[int, int | None]:
    """The step's pids with the start times the plan observed (None where it has none)."""
    starts = {c.attrs.pid: c.attrs.start_time
              for c in ctx.plan.observation.consumers if c.type == "process"}
    return {int(p): starts.get(int(p)) for p in params(step).pids}


def _nvml(ctx: Context):
    return ctx.nvml if ctx.nvml is not None else load_nvml()


def _held(planned: dict[int, int | None], usage: dict, host: Host) -> dict[int, list]:
    """The planned pids NVML lists that are still theirs: the planned process, or no live
    process (a context left behind)."""
    out = {}
    for pid, start in planned.items():
        if pid not in usage:
            continue
        now = start_time(pid, host)
        if now is None or start is None or now == start:
            out[pid] = usage[pid]
    return out


def _device_fds(pid: int, start: int | None, host: Host) -> list[str]:
    """The ``/dev/nvidia*`` devices the planned process ``pid`` has open (none when it is
    gone or another process now)."""
    if not same_process(pid, start, host):
        return []
    base = host.proc_path(pid, "fd")
    out = []
    try:
        names = os.listdir(base)
    except OSError:
        return []
    for name in names:
        try:
            link = os.readlink(os.path.join(base, name))
        except OSError:
            continue
        if link.startswith("/dev/nvidia"):
            out.append(link)
    return sorted(set(out))


def _describe(held: dict[int, list]) -> str:
    parts = []
    for pid, uses in sorted(held.items()):
        gpus = ", ".join(f"GPU {u.index}" + (f" ({u.uuid})" if u.uuid else "") +
                         (f" {u.memory_bytes // 2**20} MiB" if u.memory_bytes else "")
                         for u in uses)
        parts.append(f"pid {pid}: {gpus}")
    return "; ".join(parts)


def _held_json(held: dict[int, list]) -> list[dict]:
    return [{"pid": pid, "gpu": u.index, "uuid": u.uuid, "memory_bytes": u.memory_bytes}
            for pid, uses in sorted(held.items()) for u in uses]


def done(step: Step, ctx: Context) -> bool:
    """NVML answers and lists none of the planned processes."""
    nvml = _nvml(ctx)
    if nvml is None:
        return False
    usage, err = nvml_usage(nvml)
    return err is None and not _held(_planned(step, ctx), usage, ctx.host)


def ready(step: Step, ctx: Context) -> str | None:
    """Always ready: the step only looks."""
    try:
        params(step)
    except Malformed as e:
        return f"the step names no pids ({e})"
    return None


def run(step: Step, ctx: Context) -> Outcome:
    """Poll NVML until none of the pids holds a GPU (up to ``wait_s``); without NVML, look
    for ``/dev/nvidia*`` fds of the planned processes instead."""
    planned = _planned(step, ctx)
    nvml = _nvml(ctx)
    wait_s = params(step).wait_s
    t0 = time.monotonic()
    err = "nvidia-ml-py (pynvml) is not installed" if nvml is None else None
    first = True
    held: dict[int, list] = {}
    while nvml is not None:
        usage, err = nvml_usage(nvml)
        if err is not None:
            break
        held = _held(planned, usage, ctx.host)
        if not held:
            waited = round(time.monotonic() - t0, 3)
            data = {"pids": sorted(planned), "held": [], "waited_s": waited}
            if first:
                return Outcome("skipped", "NVML lists none of pid "
                               f"{', '.join(map(str, sorted(planned)))}", data=data)
            return Outcome("ok", f"the driver released the GPUs of pid "
                                 f"{', '.join(map(str, sorted(planned)))} after {waited:g} s",
                           data=data)
        first = False
        if time.monotonic() - t0 >= wait_s:
            return Outcome("failed", f"still on a GPU after {wait_s:g} s: {_describe(held)}; "
                                     "nothing was signalled (see nvidia-smi)",
                           data={"pids": sorted(planned), "held": _held_json(held),
                                 "waited_s": round(time.monotonic() - t0, 3)})
        time.sleep(POLL_S)
    fds = {pid: d for pid, start in planned.items()
           if (d := _device_fds(pid, start, ctx.host))}
    data = {"pids": sorted(planned), "nvml": err, "device_fds": {str(p): d for p, d in
                                                                  fds.items()}}
    if fds:
        who = "; ".join(f"pid {p}: {', '.join(d)}" for p, d in sorted(fds.items()))
        return Outcome("failed", f"no NVML ({err}) and the planned processes still have "
                                 f"NVIDIA devices open: {who}", data=data)
    return Outcome("skipped", f"no NVML: {err}; none of the planned processes has "
                              "/dev/nvidia* open", data=data)
