"""Proxmox container mount points taken out of the guest's config: ``pct set CTID --delete
mp0,mp1`` (the edit-config steps whose ``do`` is ``delete-disks``); or, for a migrated item,
a bind mount point repointed: ``pct set CTID --mp0 NEW`` (``repoint-mount-point``), the
container started again when the plan stopped it (a running one would keep the change
pending until it restarts). Proxmox owns the file
(``/etc/pve`` is its cluster filesystem), so vacate never writes it: ``pct`` does, and vacate
reads the file before and after.

Done: none of the keys is in the config's current section, or each of them is to be deleted
by a pending change (``[pve:pending]`` with ``delete: mp0``). A running container cannot lose a
mount point at once: ``pct`` records the deletion as pending, and it takes effect when the
container stops or restarts; the outcome says so, once ``pct pending CTID`` lists each
deletion (``del mp0``) as the config file does. Only ``mpN`` keys are planned this way
(deleting an ``unusedN`` key destroys the volume it names).
"""

from __future__ import annotations

import shlex

from vacate.act.base import CommandFailed, Context, Outcome
from vacate.act.kind import Kind, params
from vacate.observing.fsio import read_bounded
from vacate.observing.model.plan import Step
from vacate.observing.model.steps import RepointMountPoint
from vacate.observing.parsers import pve_config

MAX_BYTES = 1 << 20
PENDING = ("pve:pending", "PENDING")


KINDS = (Kind("repoint-mount-point"),)


def _keys(step: Step) -> list[str]:
    return [str(k) for k in step.params.keys or []]


def _state(step: Step, ctx: Context) -> tuple[dict[str, str] | None, str]:
    """Each key's state now: ``present``, ``pending`` (its deletion is pending) or ``gone``;
    or (None, why the config cannot be read)."""
    name = step.params.config
    if not name or not _keys(step):
        return None, "the step names no guest config and keys"
    try:
        data, more = read_bounded(ctx.host.path(name), MAX_BYTES, follow=False)
    except OSError as e:
        return None, f"{name}: {e.strerror or e}"
    if more:
        return None, f"{name} is larger than {MAX_BYTES} bytes"
    cfg, _problems = pve_config.parse(data.decode("utf-8", "surrogateescape"), name)
    current = {ln.key for ln in cfg.current.lines}
    deleting: set[str] = set()
    for sec in cfg.sections[1:]:
        if sec.name in PENDING:
            for value in (ln.value for ln in sec.lines if ln.key == "delete"):
                deleting.update(k.strip().lstrip("!") for k in value.split(",") if k.strip())
    return {k: "gone" if k not in current else "pending" if k in deleting else "present"
            for k in _keys(step)}, ""


def _argv(step: Step) -> list[str]:
    return [step.params.tool or "pct", "set", str(step.params.vmid), "--delete",
            ",".join(_keys(step))]


def done(step: Step, ctx: Context) -> bool:
    """No key is in the current config, or its deletion is pending."""
    if step.kind == "repoint-mount-point":
        return mp_done(step, ctx)
    state, _why = _state(step, ctx)
    return state is not None and "present" not in state.values()


def ready(step: Step, ctx: Context) -> str | None:
    if step.kind == "repoint-mount-point":
        return mp_ready(step, ctx)
    state, why = _state(step, ctx)
    if state is None:
        return why
    if not step.params.vmid:
        return "the step names no guest"
    return None


def _said(step: Step, state: dict[str, str]) -> str:
    keys = ",".join(_keys(step))
    vmid = step.params.vmid
    pending = [k for k, v in state.items() if v == "pending"]
    if pending:
        return (f"{','.join(pending)} of CT {vmid}: deletion pending until the container "
                f"restarts ([pve:pending] in {step.params.config}); it keeps the "
                "mount until then")
    return f"{keys} deleted from CT {vmid}"


def skipped(step: Step, ctx: Context) -> Outcome:
    if step.kind == "repoint-mount-point":
        p = params(step)
        return Outcome("skipped", f"{p.key} of CT {p.vmid} is {p.new} already")
    state, _why = _state(step, ctx)
    return Outcome("skipped", _said(step, state or {}) + " already", {"keys": state})


def run(step: Step, ctx: Context) -> Outcome:
    """``pct set CTID --delete KEYS``; ok once the file says the keys are gone or pending."""
    if step.kind == "repoint-mount-point":
        return mp_run(step, ctx)
    argv = _argv(step)
    try:
        ctx.run(argv)
    except CommandFailed as e:
        return Outcome("failed", str(e), {"argv": argv, "exit": e.code})
    state, why = _state(step, ctx)
    if state is None:
        return Outcome("failed", f"{' '.join(argv)} ran, but: {why}", {"argv": argv})
    if "present" in state.values():
        left = ",".join(k for k, v in state.items() if v == "present")
        return Outcome("failed", f"{' '.join(argv)} ran and {left} is still in "
                                 f"{step.params.config}", {"argv": argv, "keys": state})
    unlisted = _not_pending(step, ctx, [k for k, v in state.items() if v == "pending"])
    if unlisted:
        return Outcome("failed", f"{' '.join(argv)} ran, but {unlisted}",
                       {"argv": argv, "keys": state})
    return Outcome("ok", _said(step, state), {"argv": argv, "keys": state})


def _not_pending(step: Step, ctx: Context, keys: list[str]) -> str:
    """What ``pct pending CTID`` does not list of the deletions the config file holds as
    pending ("" when it lists them all, or there are none)."""
    if not keys:
        return ""
    argv = [step.params.tool or "pct", "pending", str(step.params.vmid)]
    r = ctx.run(argv, check=False)
    if r.returncode != 0:
        return f"{' '.join(argv)} failed: {(r.stderr or r.stdout).strip()[:300]}"
    listed = {ln.split()[1] for ln in r.stdout.splitlines()
              if len(ln.split()) >= 2 and ln.split()[0] == "del"}
    left = [k for k in keys if k not in listed]
    return f"{' '.join(argv)} does not list the deletion of {','.join(left)}" if left else ""


# -- repoint-mount-point ------------------------------------------------------------------------
def _values(p: RepointMountPoint, ctx: Context) -> tuple[str | None, str | None, str]:
    """The key's value in the current config and in the pending changes (None: not there),
    or why the config cannot be read."""
    try:
        data, more = read_bounded(ctx.host.path(p.config), MAX_BYTES, follow=False)
    except OSError as e:
        return None, None, f"{p.config}: {e.strerror or e}"
    if more:
        return None, None, f"{p.config} is larger than {MAX_BYTES} bytes"
    cfg, _problems = pve_config.parse(data.decode("utf-8", "surrogateescape"), p.config)
    current = next((ln.value for ln in cfg.current.lines if ln.key == p.key), None)
    pending = next((ln.value for sec in cfg.sections[1:] if sec.name in PENDING
                    for ln in sec.lines if ln.key == p.key), None)
    return current, pending, ""


def _running(p: RepointMountPoint, ctx: Context) -> bool:
    r = ctx.run(["pct", "status", p.vmid], check=False, timeout=60)
    return "status: running" in r.stdout


def mp_done(step: Step, ctx: Context) -> bool:
    """The config (or its pending change) has the new value; started again if it ran."""
    p = params(step)
    current, pending, _why = _values(p, ctx)
    return p.new in (current, pending) and (not p.start or _running(p, ctx))


def mp_ready(step: Step, ctx: Context) -> str | None:
    p = params(step)
    current, pending, why = _values(p, ctx)
    if why:
        return why
    if p.new in (current, pending):
        return None                     # repointed already, not started again yet
    if current != p.value or pending not in (None, p.value):
        return (f"{p.key} of CT {p.vmid} is {pending or current!r} now, not {p.value!r} as "
                "planned: left as it is")
    return None


def mp_run(step: Step, ctx: Context) -> Outcome:
    p = params(step)
    current, pending, _why = _values(p, ctx)
    ran = []
    if p.new not in (current, pending):
        ran.append(["pct", "set", p.vmid, f"--{p.key}", p.new])
        ctx.run(ran[-1])
    if p.start and not _running(p, ctx):
        ran.append(["pct", "start", p.vmid])
        ctx.run(ran[-1])
    current, pending, _why = _values(p, ctx)
    when = " (pending until the container restarts)" if pending == p.new else ""
    return Outcome("ok", f"{p.key} of CT {p.vmid} repointed to {p.new}{when}" +
                   (", started again" if p.start else ""),
                   {"vmid": p.vmid, "key": p.key, "config": p.config, "before": p.value,
                    "after": p.new, "commands": ran,
                    "undo": shlex.join(("pct", "set", p.vmid, f"--{p.key}", p.value))})


def undo_mount_point(step: Step, ctx: Context) -> str:
    """``pct set CTID --KEY VALUE`` back to the planned value, when the key still has the
    new one; refused, named, otherwise. The container is not restarted."""
    p = params(step)
    current, pending, why = _values(p, ctx)
    if why:
        raise CommandFailed(("pct", "config", p.vmid), 1, why)
    if p.value in (pending, current) and p.new not in (pending, current):
        return f"{p.key} of CT {p.vmid} is {p.value} already"
    if (pending or current) != p.new:
        raise CommandFailed(("pct", "config", p.vmid), 1, f"{p.key} of CT {p.vmid} was "
                                                          "changed since vacate repointed it: "
                                                          "left as it is")
    ctx.run(["pct", "set", p.vmid, f"--{p.key}", p.value])
    return f"{p.key} of CT {p.vmid} is {p.value} again (a running container takes it at its " \
           "next restart)"
