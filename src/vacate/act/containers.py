"""Containers that use the volume, stopped by their own manager: ``docker stop NAME`` and
``docker update --restart=no NAME`` (a container with a restart policy comes back when the
daemon starts again, and its bind mount would then be made on the root filesystem),
``lxc-stop [-P PATH] -n NAME``, Proxmox's ``pct shutdown|stop CTID`` and ``qm shutdown VMID``.

Whether it is done is asked of the same manager: ``docker inspect`` (not running; for the
update, also restart policy ``no``), ``lxc-info -s`` (``STOPPED``), ``pct status`` / ``qm
status`` (``status: stopped``). A container that no longer exists is done: it runs nothing
and can start nothing. A docker container of the planned name that is another container now
(its id is not the one observed) is refused.
"""

from __future__ import annotations

from vacate.act.base import CommandFailed, Context, Outcome
from vacate.act.kernel import command_step, consumer_of
from vacate.act.kind import Kind
from vacate.observing.model.plan import Step

KINDS = (Kind("stop-container"),)

PVE_TOOLS = ("pct", "qm")


def _engine(step: Step) -> str:
    tool = step.action.argv[0] if step.action and step.action.argv else ""
    return {"lxc-stop": "lxc"}.get(tool, tool)


def _ask(ctx: Context, argv) -> tuple[int, str]:
    """A manager's answer: exit status and what it printed (both streams); 127 where the
    tool is not there."""
    try:
        r = ctx.run(argv, check=False, timeout=60)
    except CommandFailed as e:
        return e.code, e.output
    return r.returncode, (r.stdout or "") + (r.stderr or "")


# -- docker ------------------------------------------------------------------------------------
def _docker(step: Step, ctx: Context) -> tuple[str, dict]:
    """``("gone", {})``, ``("there", {running, policy, id})`` or ``("unknown", {why})``."""
    name = step.action.argv[-1]
    code, out = _ask(ctx, ["docker", "inspect", "--type", "container", "-f",
                           "{{.State.Running}} {{.HostConfig.RestartPolicy.Name}} {{.Id}}",
                           name])
    if code != 0:
        if "no such" in out.lower():
            return "gone", {}
        return "unknown", {"why": f"docker inspect {name}: {out.strip()[:300]}"}
    fields = out.split()
    if len(fields) == 2:                      # an empty policy name: none set
        fields.insert(1, "")
    if len(fields) != 3 or fields[0] not in ("true", "false"):
        return "unknown", {"why": f"docker inspect {name} said {out.strip()[:200]!r}"}
    return "there", {"running": fields[0] == "true", "policy": fields[1] or "no",
                     "id": fields[2]}


def _updates_policy(step: Step) -> bool:
    return "update" in step.action.argv


def _docker_done(step: Step, ctx: Context) -> bool:
    state, f = _docker(step, ctx)
    if state != "there":
        return state == "gone"
    return not f["running"] and (not _updates_policy(step) or f["policy"] == "no")


def _planned_id(step: Step, ctx: Context) -> str | None:
    """The container's id as observed: a docker-container's own, or the container of a
    process (its cgroup names the id)."""
    c = consumer_of(step, ctx)
    if c is None:
        return None
    if c.type == "docker-container" and c.attrs.container_id:
        return str(c.attrs.container_id)
    ct = c.attrs.container or {}
    return str(ct["name"]) if ct.get("type") == "docker" and ct.get("name") else None


def _docker_ready(step: Step, ctx: Context) -> str | None:
    name = step.action.argv[-1]
    state, f = _docker(step, ctx)
    if state == "unknown":
        return f["why"]
    if state == "gone":
        return f"there is no container {name}"
    planned = _planned_id(step, ctx)
    if planned and not (f["id"].startswith(planned) or planned.startswith(f["id"])):
        return f"{name} is another container now (id {f['id'][:12]}, planned {planned[:12]})"
    return None


# -- LXC and Proxmox: a status command -------------------------------------------------------------
def _lxc_state(step: Step, ctx: Context) -> tuple[str, str]:
    """(``stopped``, ``running``, ... , ""), ("gone", "") where the container does not
    exist, ("unknown", why) where the manager does not answer."""
    where = list(step.action.argv[1:])       # [-P PATH] -n NAME
    code, out = _ask(ctx, ["lxc-info", *where, "-s", "-H"])
    if code == 0 and out.strip():
        return out.split()[0].lower(), ""
    if "doesn't exist" in out or "does not exist" in out:
        return "gone", ""
    return "unknown", f"lxc-info {' '.join(where)}: {out.strip()[:300]}"


def _pve_state(step: Step, ctx: Context) -> tuple[str, str]:
    """As :func:`_lxc_state`, from ``pct status`` / ``qm status`` (``status: stopped``)."""
    tool, vmid = step.action.argv[0], step.action.argv[-1]
    code, out = _ask(ctx, [tool, "status", vmid])
    for line in out.splitlines():
        key, sep, value = line.partition(":")
        if code == 0 and sep and key.strip() == "status":
            return value.strip().lower(), ""
    if "does not exist" in out:
        return "gone", ""
    return "unknown", f"{tool} status {vmid}: {out.strip()[:300]}"


_STATE = {"lxc": _lxc_state, "pct": _pve_state, "qm": _pve_state}


def _status_done(step: Step, ctx: Context) -> bool:
    """The manager's status is ``stopped``, or it has no such guest."""
    return _STATE[_engine(step)](step, ctx)[0] in ("stopped", "gone")


def _status_ready(step: Step, ctx: Context) -> str | None:
    state, why = _STATE[_engine(step)](step, ctx)
    if state == "unknown":
        return why
    return f"there is no container {step.action.argv[-1]}" if state == "gone" else None


# -- the interface -----------------------------------------------------------------------------
_BY_ENGINE = {
    "docker": (_docker_done, _docker_ready),
    **{e: (_status_done, _status_ready) for e in _STATE},
}


def _pair(step: Step):
    got = _BY_ENGINE.get(_engine(step))
    if got is None:
        raise ValueError(f"stop-container: no manager for {step.action.argv!r}")
    return got


def done(step: Step, ctx: Context) -> bool:
    """The manager says it is not running (docker: and its restart policy is ``no``, for
    the update step), or that there is no such container any more."""
    return _pair(step)[0](step, ctx)


def ready(step: Step, ctx: Context) -> str | None:
    """None when the manager answers and has that container (docker: with the observed
    id); else why not."""
    return _pair(step)[1](step, ctx)


def _said(step: Step) -> tuple[str, str]:
    """(what done says, what a command that returned without the effect says)."""
    argv = step.action.command
    name = step.action.argv[-1]
    if _engine(step) == "docker" and _updates_policy(step):
        return (f"{name} will not be started again",
                f"{name}: docker update returned, and it runs or still has a restart policy")
    return f"{name} stopped", f"{' '.join(argv)} returned, and {name} still runs"


def skipped(step: Step, ctx: Context) -> Outcome:
    return Outcome("skipped", f"{_said(step)[0]} already")


def run(step: Step, ctx: Context) -> Outcome:
    """The step's command, confirmed by asking the manager again."""
    is_done, _why_not = _pair(step)
    argv = step.action.command
    name = step.action.argv[-1]
    did, still = _said(step)
    out = command_step(step, ctx, is_done, argv, did=did, still=still)
    if out.status == "failed" and argv[:2] in (("pct", "shutdown"), ("qm", "shutdown")):
        return Outcome("failed", f"{out.detail} ({argv[0]} stop {name} stops it without "
                                 "waiting for its shutdown)", out.data)
    return out
