"""systemd units: stop them in the manager that runs them, disable what would start them
again, mask them.

Every command goes to the unit's own manager, entered as :meth:`Where.wrap` says (the host's,
a user's, a container's). A manager reached through a process of a pid namespace
(``pid-namespace``: systemd as PID 1 of private namespaces) is entered through that
namespace's PID 1, found again on each call: the process the plan saw is the one being
stopped, and its pid, once gone, may name any other process. Its namespace is read from the
process while it is still the planned one (same start time), else taken from the observation.

- ``stop-unit``: ``systemctl stop`` of the unit, after stopping the timers, sockets and paths
  that trigger it (a trigger left running starts it again; stopping does not disable them).
  A ``Restart=always`` unit brings a killed process back; a stopped one stays stopped. Done:
  the unit and its triggers are not active in that manager, and each process the plan saw in
  it (``postcondition.pids_gone``) is gone or is another process now.
- ``disable-unit``: the unit's triggers are stopped and disabled, then the unit is disabled
  (``disable`` removes every ``[Install]`` link to it under ``/etc``; ``--runtime`` the ones
  under ``/run``). What still pulls it in afterwards (``WantedBy``, ``RequiredBy``,
  ``BoundBy``, ``UpheldBy``) is written in another unit's file, or linked where ``disable``
  does not reach: unless the plan disables or masks that unit too, the step is ``manual`` and
  names the unit, the file and line, and the commands (edit the line out, or ``systemctl
  mask``). Done: not enabled, each trigger inactive and not enabled, nothing left pulling it
  in that the plan does not disable.
- ``mask-unit``: ``systemctl mask``. A unit whose file lies in ``/etc/systemd/system`` cannot
  be masked there (the link would replace the admin's file): ``manual``, with the commands.
  Done: ``is-enabled`` says masked.

``ready``: the manager answers and the unit exists. In a dry run nothing is run but the
read-only ``systemctl show`` and ``systemctl cat``.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import replace

from vacate.act.base import CommandFailed, Context, Outcome
from vacate.act.kind import Kind
from vacate.act.processes import (
    is_namespace_init,
    namespace_init,
    pid_namespace,
    same_process,
)
from vacate.observing.compat import cut_suffix
from vacate.observing.model.action import Where
from vacate.observing.model.conditions import NOTHING, Process, UnitActive, UnitProcess
from vacate.observing.model.plan import Step

KINDS = (Kind("stop-unit"), Kind("disable-unit"), Kind("mask-unit"))

ENABLED = frozenset({"enabled", "enabled-runtime", "linked", "linked-runtime"})
RUNTIME = frozenset({"enabled-runtime", "linked-runtime"})
MASKED = frozenset({"masked", "masked-runtime"})
ACTIVE_NOT = frozenset({"inactive", "failed"})
PULLED_BY = ("WantedBy", "RequiredBy", "BoundBy", "UpheldBy")
PULL_KEYS = ("Wants", "Requires", "BindsTo", "Upholds")
PROPS = ("Id", "LoadState", "ActiveState", "SubState", "UnitFileState", "FragmentPath",
         "DropInPaths", "TriggeredBy", *PULLED_BY)
STOP_WAIT_S = 10.0
_UNIT = re.compile(r"[A-Za-z0-9:_.\\@-]{1,255}")
_REMOVED = re.compile(r'^Removed "?(/[^"]+?)"?\.?$')


class _NoManager(Exception):
    """The unit's manager cannot be reached; ``gone``: its pid namespace has no PID 1 any
    more (every process of it is gone)."""

    def __init__(self, why: str, gone: bool = False):
        super().__init__(why)
        self.gone = gone


# -- the manager ------------------------------------------------------------------------------
def _consumer_ns(step: Step, ctx: Context, pid: int) -> str | None:
    cid = step.action.consumer if step.action else None
    for c in ctx.plan.observation.consumers:
        if c.type == "process" and (c.id == cid or c.attrs.pid == pid):
            ns = c.attrs.pid_namespace
            if ns:
                return ns
    return None


def _process_seen(step: Step) -> tuple[int | None, int | None]:
    """The pid and start time of the process the plan saw in the unit (the step's
    precondition, else its action's), or Nones."""
    for pre in (step.precondition, step.action.precondition if step.action else NOTHING):
        if isinstance(pre, (UnitProcess, Process)):
            return pre.pid, pre.start_time
    return None, None


def place(step: Step, ctx: Context) -> Where:
    """The Where the unit's manager is entered through now (see the module's docstring);
    :class:`_NoManager` when there is none."""
    if step.action is None:
        raise _NoManager("the step has no unit action")
    w = step.action.where
    if w.kind != "pid-namespace":
        return w
    pid = w.pid
    pid_seen, start_seen = _process_seen(step)
    planned = start_seen if pid_seen == pid else None
    ns = None
    if pid is not None and same_process(pid, planned, ctx.host) and \
            (planned is not None or is_namespace_init(pid, ctx.host)):
        ns = pid_namespace(pid, ctx.host)
    if ns is None and pid is not None:
        ns = _consumer_ns(step, ctx, pid)
    if ns is None:
        raise _NoManager(f"pid {pid}, through which the manager was reached, is gone and the "
                         "plan does not record its pid namespace")
    init = namespace_init(ns, ctx.host)
    if init is None:
        raise _NoManager(f"no process is PID 1 of {ns} any more: its manager is gone",
                         gone=True)
    if ns == pid_namespace("self", ctx.host):
        return replace(w, kind="host", pid=None)
    return replace(w, pid=init)


class _Manager:
    def __init__(self, where: Where, ctx: Context):
        self.where, self.ctx = where, ctx

    def command(self, *args: str) -> tuple[str, ...]:
        return self.where.wrap(("systemctl", *args))

    def typed(self, *args: str) -> str:
        return shlex.join(self.command(*args))

    def run(self, *args: str, check: bool = True):
        return self.ctx.run(self.command(*args), check=check)

    def show(self, unit: str) -> dict[str, str]:
        try:
            r = self.run("show", "-p", ",".join(PROPS), "--", unit)
        except CommandFailed as e:
            raise _NoManager(f"the manager ({self.where.label()}) does not answer: "
                             f"{e.output.strip()[:300] or f'exit {e.code}'}") from e
        props = {}
        for line in r.stdout.splitlines():
            k, sep, v = line.partition("=")
            if sep:
                props[k] = v
        return props

    def cat(self, unit: str) -> list[tuple[str, int, str]]:
        """Each line of the unit's files (fragment and drop-ins): (file, line number,
        text)."""
        text = self.run("cat", "--", unit, check=False).stdout if self.where.user is None \
            else self._files(unit)
        out, path, n = [], None, 0
        for line in text.splitlines():
            if line.startswith("# /") and _is_header(line):
                path, n = line[2:].strip(), 0
                continue
            n += 1
            if path:
                out.append((path, n, line))
        return out

    def _files(self, unit: str) -> str:
        """What ``systemctl cat`` prints, for a user's manager (reached through ``-M``, which
        it refuses: "Cannot remotely cat units"): the files the manager reports, its
        ``FragmentPath`` then its ``DropInPaths`` in the order it reads them, each after a
        ``# PATH`` line, read in the manager's place."""
        props = self.show(unit)
        files = [f for f in (props.get("FragmentPath", ""), *_words(props, "DropInPaths")) if f]
        if not files:
            return ""
        script = 'for f; do printf "# %s\\n" "$f"; cat -- "$f"; echo; done'
        return self.ctx.run(self.where.wrap(("sh", "-c", script, "sh", *files)),
                            check=False).stdout


def _is_header(line: str) -> bool:
    """``systemctl cat`` starts each file with ``# PATH`` (a path with no spaces around)."""
    return " " not in line[2:].strip()


def _words(props: dict, key: str) -> list[str]:
    return props.get(key, "").split()


def _unit(step: Step) -> str | None:
    u = step.action.subject if step.action else None
    return u if isinstance(u, str) and _UNIT.fullmatch(u) and not u.startswith("-") else None


def _argv(step: Step, verb: str, unit: str) -> tuple[str, ...]:
    """The plan's command when it is ``systemctl ... VERB ... UNIT``, else that command
    made here: the kind says what is done, never another verb found in the plan."""
    argv = tuple(step.action.argv) if step.action else ()
    if len(argv) >= 3 and argv[0] == "systemctl" and verb in argv[1:-1] and argv[-1] == unit:
        return argv
    return ("systemctl", verb, unit)


def _manager(step: Step, ctx: Context) -> _Manager:
    return _Manager(place(step, ctx), ctx)


def ready(step: Step, ctx: Context) -> str | None:
    """None when the unit's manager answers and knows the unit."""
    unit = _unit(step)
    if unit is None:
        return f"not a unit name: {step.action.subject if step.action else None!r}"
    try:
        m = _manager(step, ctx)
        props = m.show(unit)
    except _NoManager as e:
        return str(e)
    if props.get("LoadState") == "not-found" and props.get("ActiveState") in ACTIVE_NOT:
        return f"the manager ({m.where.label()}) has no unit {unit}"
    return None


# -- stop-unit --------------------------------------------------------------------------------
def _pids(step: Step, ctx: Context) -> dict[int, int | None]:
    """The processes the plan saw in the unit: pid -> start time (None: not known)."""
    starts = {c.attrs.pid: c.attrs.start_time
              for c in ctx.plan.observation.consumers if c.type == "process"}
    pid, start = _process_seen(step)
    if pid is not None and start is not None:
        starts[pid] = start
    post = step.postcondition
    gone = post.pids_gone if isinstance(post, UnitActive) else None
    return {p: starts.get(p) for p in gone or ()}


def _left(step: Step, ctx: Context) -> list[int]:
    return [p for p, s in _pids(step, ctx).items() if same_process(p, s, ctx.host)]


def _stop_missing(step: Step, ctx: Context, unit: str) -> list[str]:
    """What keeps the stop from being done (empty: done)."""
    out = [f"pid {p} still runs" for p in _left(step, ctx)]
    try:
        m = _manager(step, ctx)
    except _NoManager as e:
        if e.gone:
            return out
        return [*out, str(e)]
    props = m.show(unit)
    if props.get("ActiveState") not in ACTIVE_NOT:
        out.append(f"{unit} is {props.get('ActiveState')} ({props.get('SubState')})")
    for t in _words(props, "TriggeredBy"):
        tp = m.show(t)
        if tp.get("ActiveState") not in ACTIVE_NOT:
            out.append(f"its trigger {t} is {tp.get('ActiveState')}")
    return out


def _safe(fn, *args) -> list[str]:
    try:
        return fn(*args)
    except _NoManager as e:
        return [str(e)]


def _done_stop(step: Step, ctx: Context) -> bool:
    unit = _unit(step)
    return unit is not None and not _safe(_stop_missing, step, ctx, unit)


def _run_stop(step: Step, ctx: Context, unit: str) -> Outcome:
    m = _manager(step, ctx)
    props = m.show(unit)
    triggers = [t for t in _words(props, "TriggeredBy")
                if m.show(t).get("ActiveState") not in ACTIVE_NOT]
    argv = _argv(step, "stop", unit)
    cmds = []
    if triggers:                      # first, so that none starts it again meanwhile
        cmds.append(m.command("stop", *triggers))
        ctx.run(cmds[-1])
    cmds.append(m.where.wrap(argv))
    ctx.run(cmds[-1])
    deadline = time.monotonic() + STOP_WAIT_S
    while _left(step, ctx) and time.monotonic() < deadline:
        time.sleep(0.05)
    data = {"unit": unit, "manager": m.where.label(), "was": props.get("ActiveState"),
            "triggers_stopped": triggers, "pids_gone": sorted(_pids(step, ctx)),
            "commands": [list(c) for c in cmds]}
    missing = _safe(_stop_missing, step, ctx, unit)
    if missing:
        return Outcome("failed", f"after {shlex.join(cmds[-1])}: " + "; ".join(missing) +
                       (" (its KillMode may leave processes behind)"
                        if _left(step, ctx) else ""), data=data)
    also = f" and its trigger{'s' if len(triggers) > 1 else ''} {', '.join(triggers)}" \
        if triggers else ""
    return Outcome("ok", f"stopped {unit}{also} ({m.where.label()})", data=data)


# -- disable-unit -----------------------------------------------------------------------------
def _handled(ctx: Context, where: Where) -> set[str]:
    """The units the plan disables or masks in the same manager."""
    out = set()
    for s in ctx.plan.steps:
        if s.kind in ("disable-unit", "mask-unit") and s.action is not None:
            try:
                if place(s, ctx) == where:
                    out.add(s.action.subject)
            except _NoManager:
                continue
    return out


def _pullers(props: dict) -> list[str]:
    return list(dict.fromkeys(u for k in PULLED_BY for u in _words(props, k)))


def _where_pulled(m: _Manager, puller: str, unit: str) -> list[dict]:
    """The lines of ``puller``'s files that pull ``unit`` in (``Wants=`` ...)."""
    out = []
    for path, n, text in m.cat(puller):
        key, sep, value = text.partition("=")
        if sep and key.strip() in PULL_KEYS and unit in value.split():
            out.append({"file": path, "line": n, "text": text.strip()})
    return out


def _disable_missing(m: _Manager, unit: str, handled: set[str], *,
                     trigger: bool = False) -> tuple[list[str], list[str]]:
    """(what keeps ``unit`` from being disabled, the units still pulling it in that the plan
    does not disable); for a trigger also whether it is active."""
    props = m.show(unit)
    if props.get("LoadState") == "not-found" and props.get("ActiveState") in ACTIVE_NOT:
        return [], []
    out = []
    state = props.get("UnitFileState", "")
    if state in ENABLED:
        out.append(f"{unit} is {state}")
    if trigger and props.get("ActiveState") not in ACTIVE_NOT:
        out.append(f"{unit} is {props.get('ActiveState')}")
    pulling = [p for p in _pullers(props) if p not in handled]
    out += [f"{p} pulls {unit} in" for p in pulling]
    return out, pulling


def _disable_check(m: _Manager, unit: str, handled: set[str]) -> dict:
    props = m.show(unit)
    triggers = _words(props, "TriggeredBy")
    missing, pulling = _disable_missing(m, unit, handled)
    found = {unit: pulling}
    for t in triggers:
        tm, tp = _disable_missing(m, t, handled | {unit}, trigger=True)
        missing += tm
        found[t] = tp
    return {"missing": missing, "pulling": found, "triggers": triggers, "props": props}


def _done_disable(step: Step, ctx: Context) -> bool:
    unit = _unit(step)
    if unit is None:
        return False
    try:
        m = _manager(step, ctx)
        return not _disable_check(m, unit, _handled(ctx, m.where))["missing"]
    except _NoManager:
        return False


def _run_disable(step: Step, ctx: Context, unit: str) -> Outcome:
    m = _manager(step, ctx)
    handled = _handled(ctx, m.where)
    before = _disable_check(m, unit, handled)
    triggers = before["triggers"]
    states = {u: m.show(u) for u in (unit, *triggers)}
    active = [t for t in triggers if states[t].get("ActiveState") not in ACTIVE_NOT]
    argv = _argv(step, "disable", unit)
    plan = ([("stop", *active)] if active else []) + \
        ([("disable", *triggers)] if triggers else []) + [tuple(argv[1:])]
    removed, cmds = [], []
    for args in plan:
        cmds.append(m.command(*args))
        r = ctx.run(cmds[-1])
        removed += _removed(r)
    for u in (unit, *triggers):      # links under /run: only --runtime removes them
        if m.show(u).get("UnitFileState") in RUNTIME:
            cmds.append(m.command("disable", "--runtime", u))
            removed += _removed(ctx.run(cmds[-1]))
    after = _disable_check(m, unit, handled)
    disabled = [u for u in (unit, *triggers)
                if states[u].get("UnitFileState") in ENABLED
                and after_state(m, u) not in ENABLED]
    manual = []
    for pulled, pullers in after["pulling"].items():
        for p in pullers:
            manual.append({"unit": p, "pulls": pulled, "lines": _where_pulled(m, p, pulled)})
    data = {"unit": unit, "manager": m.where.label(), "disabled": disabled,
            "triggers": triggers, "stopped": active, "removed": removed,
            "pulled_by_plan": sorted(set(_pullers(before["props"])) & handled),
            "manual": manual, "commands": [list(c) for c in cmds]}
    if manual:
        return Outcome("manual", "; ".join(_manual_text(m, x) for x in manual), data=data)
    if after["missing"]:
        return Outcome("failed", "; ".join(after["missing"]), data=data)
    what = ", ".join(disabled) or "nothing was enabled"
    return Outcome("ok", f"disabled: {what}" + (f"; stopped {', '.join(active)}"
                                                 if active else ""), data=data)


def after_state(m: _Manager, unit: str) -> str:
    return m.show(unit).get("UnitFileState", "")


def _removed(r) -> list[str]:
    out = []
    for line in (r.stdout + "\n" + r.stderr).splitlines():
        mo = _REMOVED.match(line.strip())
        if mo:
            out.append(mo.group(1))
    return out


def _manual_text(m: _Manager, x: dict) -> str:
    pulled, p = x["pulls"], x["unit"]
    mask = m.typed("mask", pulled)
    if x["lines"]:
        at = ", ".join(f"{ln['file']}:{ln['line']} ({ln['text']})" for ln in x["lines"])
        return (f"{p} pulls {pulled} in at {at}: take {pulled} out of that line and run "
                f"{m.typed('daemon-reload')}, or forbid starting it: {mask}")
    return (f"{p} pulls {pulled} in through a link in a {p}.wants/ or .requires/ directory "
            f"that disable does not remove (a vendor or generated one): {mask}")


# -- mask-unit --------------------------------------------------------------------------------
def _done_mask(step: Step, ctx: Context) -> bool:
    unit = _unit(step)
    if unit is None:
        return False
    try:
        return _manager(step, ctx).show(unit).get("UnitFileState") in MASKED
    except _NoManager:
        return False


def _run_mask(step: Step, ctx: Context, unit: str) -> Outcome:
    m = _manager(step, ctx)
    argv = _argv(step, "mask", unit)
    cmd = m.where.wrap(argv)
    try:
        ctx.run(cmd)
    except CommandFailed as e:
        if "already exists" not in e.output:
            raise
        frag = m.show(unit).get("FragmentPath") or f"/etc/systemd/system/{unit}"
        aside = f"{frag}.vacate-masked"
        return Outcome("manual", f"{unit}'s own file is {frag}, which a mask would replace: "
                                 f"move it aside and mask: {shlex.join(('mv', frag, aside))}"
                                 f" && {m.typed('daemon-reload')} && {m.typed('mask', unit)}",
                       data={"unit": unit, "file": frag, "commands": [list(cmd)]})
    if not _done_mask(step, ctx):
        return Outcome("failed", f"{shlex.join(cmd)} ran, and {unit} is "
                                 f"{after_state(m, unit) or 'unknown'}",
                       data={"unit": unit, "commands": [list(cmd)]})
    return Outcome("ok", f"masked {unit} ({m.where.label()})",
                   data={"unit": unit, "manager": m.where.label(), "commands": [list(cmd)]})


# -- the interface ----------------------------------------------------------------------------
_DONE = {"stop-unit": _done_stop, "disable-unit": _done_disable, "mask-unit": _done_mask}
_RUN = {"stop-unit": _run_stop, "disable-unit": _run_disable, "mask-unit": _run_mask}


def done(step: Step, ctx: Context) -> bool:
    """The step's effect is there now (see the module's docstring, per kind)."""
    return _DONE[step.kind](step, ctx)


def skipped(step: Step, ctx: Context) -> Outcome:
    """Done already: nothing but ``systemctl show`` was run."""
    return Outcome("skipped", f"{cut_suffix(step.kind, '-unit')} {_unit(step)}: done already")


def run(step: Step, ctx: Context) -> Outcome:
    """Act (apply checked ``done`` and ``ready`` just before)."""
    unit = _unit(step)
    try:
        return _RUN[step.kind](step, ctx, unit)
    except _NoManager as e:
        return Outcome("failed", str(e))
    except CommandFailed as e:
        return Outcome("failed", str(e), data={"command": list(e.argv)})

