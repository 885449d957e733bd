"""``apply``: carry out an approved plan, step by step, journaled and resumable. The only
orchestration that changes the system, and only through the action modules of ``vacate.act``.

Before anything changes: the plan file is checked (its steps must be the ones its items make:
only the items' actions are a person's to edit), the journal is locked (one apply per plan),
and the volume is observed again: a stale plan is refused with the differences named.
Then each step: its intent journaled (fsync); if its postcondition already holds it is
skipped; else its precondition is checked just before it acts, it acts, and its
postcondition must hold; its outcome journaled (fsync). A failed step stops the apply there;
a rerun resumes (a started step is checked again, never taken as finished). Prints nothing:
progress goes to the ``progress`` callback.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass

from vacate.act.base import CommandFailed, Context, Outcome
from vacate.act.journal import Journal, PlanLock, check_belongs, path_for, states_of
from vacate.act.kind import carry_out, kind_of, module_of
from vacate.act.registry import KINDS
from vacate.decide import stale
from vacate.decide.plan import edited_steps
from vacate.observing.compat import SLOTS
from vacate.observing.errors import EXIT_UNKNOWN, UsageError, VacateError
from vacate.observing.host import Host
from vacate.observing.model.codec import Malformed
from vacate.observing.model.plan import Plan


class Refused(UsageError):
    """The plan is not applied (stale, edited, not approved): exit 2, nothing changed."""


@dataclass(frozen=True, **SLOTS)
class StepResult:
    """One step as this apply left it: ``status`` ok / skipped / failed / manual, or
    ``pending`` (not reached: an earlier step failed)."""

    id: str
    kind: str
    summary: str
    status: str
    detail: str = ""
    started: float | None = None
    ended: float | None = None
    earlier: bool = False            # done by an earlier run of this apply
    data: dict | None = None


@dataclass(frozen=True, **SLOTS)
class ApplyResult:
    """What an apply came to: each step's result, in the plan's order."""

    plan_path: str
    plan: Plan
    steps: tuple[StepResult, ...]
    dry_run: bool = False

    @property
    def failed(self) -> StepResult | None:
        return next((s for s in self.steps if s.status == "failed"), None)

    @property
    def manual(self) -> tuple[StepResult, ...]:
        return tuple(s for s in self.steps if s.status == "manual")

    @property
    def complete(self) -> bool:
        return all(s.status in ("ok", "skipped") for s in self.steps)


def load(plan_path: str) -> tuple[Plan, str]:
    """The plan in ``plan_path`` and the sha256 of the file; refused when it is not one."""
    try:
        with open(plan_path, "rb") as f:
            raw = f.read(1 << 32)
    except OSError as e:
        raise UsageError(f"cannot read {plan_path}: {e.strerror}") from None
    try:
        plan = Plan.loads(raw.decode("ascii", "surrogateescape"))
    except Malformed as e:
        raise Refused(f"{plan_path}: {e}") from None
    return plan, hashlib.sha256(raw).hexdigest()


def check_machine(plan: Plan, host: Host) -> None:
    """Refuse a plan made for another machine: one looked at over ssh or inside a container
    (``via``) is applied where it was made, and one whose recorded machine id is not this
    machine's is for another machine."""
    facts = plan.observation.host
    if facts.via:
        raise Refused(f"the plan was made for {facts.via}: vacate apply acts on the machine "
                      "it runs on, and nothing was changed",
                      hint=f"copy the plan to {facts.via} and apply it there")
    from vacate.observing.ops import machine_id

    here = machine_id(host)
    if facts.machine_id and here and facts.machine_id != here:
        raise Refused(f"the plan was made on machine {facts.machine_id} "
                      f"({facts.hostname or 'unnamed'}); this is {here}: nothing was changed")


def check_plan(plan: Plan, plan_path: str = "PLAN") -> None:
    """Refuse a plan that cannot be applied as it stands, or whose steps are not the ones
    its items make (an item's action edited by hand: ``plan --from`` makes them again)."""
    if plan.blocked:
        raise Refused("the plan cannot be applied: " + "; ".join(plan.blocked))
    unknown = [f"{s.id} ({s.kind})" for s in plan.steps if s.kind not in KINDS]
    if unknown:
        raise Refused("the plan has steps of kinds this vacate does not know: " +
                      ", ".join(unknown))
    edits = edited_steps(plan)
    if edits:
        new = _edited_name(plan_path)
        raise Refused("the plan's steps are not the ones its items make (only items' actions "
                      "may be edited, and then the steps made again): " + "; ".join(edits)
                      + f". To apply the items' actions as edited: vacate plan --from "
                      f"{plan_path} -o {new}, review it, then vacate apply {new}")


def _edited_name(plan_path: str) -> str:
    root, ext = os.path.splitext(plan_path)
    return f"{root}.new{ext}"


def _identities(plan: Plan):
    from vacate.flow.plan import identity_of
    from vacate.observing.entries import record_item

    out = {}
    for it in plan.items:
        if it.action in ("archive", "delete"):
            try:      # totals and digest only: memory in proportion to its directories
                out[it.path] = identity_of(record_item(it.path,
                                                       dev=plan.observation.target.st_dev))
            except (OSError, VacateError):
                out[it.path] = None
    return out


def staleness(plan: Plan, host: Host, started: set[str]) -> list[str]:
    """What changed since the plan was made (empty: it holds)."""
    from vacate.observing.collectors import mounts
    from vacate.observing.observe import observe

    if stale.unmounted_by_us(plan, started):
        return []                      # the volume is down already: this apply did it
    try:
        now_target = mounts.resolve_target(plan.target_path, host)
    except VacateError as e:
        return [str(e.message)]
    if now_target.mountpoint != plan.target_path:
        return [f"nothing is mounted at {plan.target_path} any more"]
    now = observe(plan.target_path, host=host)
    return stale.differences(plan, now, _identities(plan), started)


def apply(plan_path: str, *, host: Host | None = None, dry_run: bool = False, progress=None,
          on_step=None, nvml=None) -> ApplyResult:
    """Apply the plan in ``plan_path`` (approval is the caller's). ``on_step(StepResult)`` is
    called as each step ends; ``progress(step, done, total, what)`` during long ones."""
    host = host or Host.local()
    plan, sha = load(plan_path)
    journal_path = path_for(plan_path)
    with PlanLock(plan_path):
        states = states_of(check_belongs(journal_path, sha))
        check_machine(plan, host)
        _check_places(plan, plan_path, host, set(states))
        check_plan(plan, plan_path)
        stale_lines = staleness(plan, host, set(states))
        if stale_lines:
            raise Refused("the plan is stale, nothing was changed: " + "; ".join(stale_lines),
                          hint="make a new plan: vacate plan " + plan.target_path)
        if dry_run:
            return _dry(plan_path, plan, states, host)
        with Journal(journal_path, sha) as j:
            return _steps(plan_path, plan, host, j, states, progress, on_step, nvml)


def _check_places(plan: Plan, plan_path: str, host: Host, started: set[str]) -> None:
    """The archive's destination and the journal must not be on the volume being retired."""
    from vacate.flow.plan import on_target
    from vacate.remote import Local

    if stale.unmounted_by_us(plan, started):
        return                     # unmounted already by this apply
    from vacate.observing.collectors import mounts

    target = mounts.resolve_target(plan.target_path, host)
    dest = plan.archive_to if plan.archive_to and "://" not in plan.archive_to else None
    for what, p in (("the archive destination", dest), ("the plan and its journal", plan_path)):
        if p and on_target(Local(host), p, target):
            raise Refused(f"{what} {p} is on the volume being retired")


def _steps(plan_path, plan, host, j, states, progress, on_step, nvml) -> ApplyResult:
    """Every step in order, until one fails."""
    ctx = Context(plan=plan, host=host, progress=progress, earlier=states, nvml=nvml,
                  plan_path=plan_path)
    results = []
    stopped = False
    for i, step in enumerate(plan.steps):
        if stopped:
            results.append(StepResult(step.id, step.kind, step.summary, "pending"))
            continue
        r = _one(step, ctx, j, states.get(step.id))
        if r.status == "failed":
            r = _bring_back(plan, i, r, ctx, j)
        results.append(r)
        if on_step is not None:
            on_step(r)
        stopped = r.status == "failed"
    return ApplyResult(plan_path, plan, tuple(results))


def _bring_back(plan, index: int, r: StepResult, ctx: Context, j: Journal) -> StepResult:
    """A step failed between a migrated unit's stop and its start: the unit is brought back
    from the old path (the volume is still there) and the apply stops there; the failed
    step's outcome is journaled again with what was brought back."""
    from dataclasses import replace

    from vacate.act import migrate

    said = []
    for s in migrate.window_of(plan, index):
        try:
            said.append(migrate.bring_back(s, ctx))
        except (OSError, VacateError, CommandFailed) as e:
            said.append(f"{s.params.get('unit')} could NOT be brought back: {e}")
    if not said:
        return r
    r = replace(r, detail=f"{r.detail}; " + "; ".join(said),
                data={**(r.data or {}), "brought_back": said})
    j.outcome(r.id, r.status, r.detail, r.data)
    return r


def _one(step, ctx: Context, j: Journal, before) -> StepResult:
    kind, mod = kind_of(step), module_of(step)
    t0 = time.time()
    if before is not None and before.event == "outcome" and before.status in ("ok", "skipped") \
            and not kind.every_time and _safe(mod.done, step, ctx):
        return StepResult(step.id, step.kind, step.summary, before.status, before.detail,
                          before.started, before.ended, True, before.data)
    j.intent(step.id, step.kind)
    try:
        out = carry_out(step, ctx)
    except Malformed as e:
        out = Outcome("failed", f"its parameters do not fit its kind: {e}")
    except CommandFailed as e:
        out = Outcome("failed", str(e))
    except (OSError, VacateError) as e:
        out = Outcome("failed", getattr(e, "message", None) or f"{type(e).__name__}: {e}")
    j.outcome(step.id, out.status, out.detail, out.data)
    return StepResult(step.id, step.kind, step.summary, out.status, out.detail, t0,
                      time.time(), False, out.data)


def _safe(fn, *args) -> bool:
    try:
        return bool(fn(*args))
    except (OSError, VacateError, CommandFailed):
        return False


def _dry(plan_path: str, plan: Plan, states, host: Host) -> ApplyResult:
    """What applying would do: each step not done yet, with what can be told now, and
    nothing changed. Every precondition that does not wait on an earlier step is checked
    against the machine as it is (a holder's identity, a unit's manager, a line's sha256,
    an item's recorded entries, the destination's permissions); the volume's own unmount
    is checked against the state the steps before it would leave: every user that holds
    it now must be ended by one of them."""
    ctx = Context(plan=plan, host=host, dry_run=True, earlier=states, plan_path=plan_path)
    live = {c.id: c for c in plan.observation.consumers if c.live}
    ended: set[str] = set()
    out = []
    for step in plan.steps:
        kind, mod = kind_of(step), module_of(step)
        before = states.get(step.id)
        if step.kind != "manual":
            ended |= _ends(step, plan)
        if before is not None and before.event == "outcome" and before.status in ("ok",
                                                                                   "skipped"):
            out.append(StepResult(step.id, step.kind, step.summary, before.status,
                                  before.detail, earlier=True))
            continue
        why, note = None, "checked"
        if step.kind == "unmount" and step.precondition.get("mount_id") == plan.mount_id:
            left = [c for cid, c in live.items() if cid not in ended]
            if left:
                why = "would fail: still used by " + ", ".join(
                    f"{c.type} {c.name}" for c in left[:5]) + " (no step before it ends them)"
            note = "after the steps before it: nothing would hold it"
        elif kind.after_earlier:
            note = "after the steps before it"
        else:
            try:
                why = mod.ready(step, ctx)
            except (OSError, VacateError, CommandFailed) as e:
                why = str(e)
        out.append(StepResult(step.id, step.kind, step.summary, "failed" if why else "would",
                              why or note))
    return ApplyResult(plan_path, plan, tuple(out), dry_run=True)


def _ends(step, plan: Plan) -> set[str]:
    """The consumers of the volume a step ends: the one its action answers; for a unit
    stopped, every process of that unit."""
    out = set()
    if step.action is not None and step.action.consumer:
        out.add(step.action.consumer)
    if step.kind == "stop-unit" and step.action is not None:
        unit = step.action.subject
        out |= {c.id for c in plan.observation.consumers
                if c.type == "process" and c.attrs.get("unit") == unit}
    return out


def exit_code(r: ApplyResult) -> int:
    """0 retired (every step done); 4 done all vacate can, manual steps remain; 1 a step
    failed (a rerun resumes); 2 refused (raised as :class:`Refused`)."""
    if r.failed is not None:
        return 1
    if r.dry_run:
        return 0
    if r.manual:
        return 4
    return 0 if r.complete else EXIT_UNKNOWN
