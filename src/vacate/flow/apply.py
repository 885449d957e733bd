"""``apply``: carry out an approved plan, step by step, journaled and resumable. The only
orchestration that changes the system, and only through the action modules of ``vacate.act``.

Before anything changes: the journal is locked (one apply per plan) and the plan file read
once, under the lock: the bytes a person approved (:class:`Loaded`, their sha256 in the
journal) are the ones applied. The plan is checked (its steps must be the ones its items
make: only the items' actions are a person's to edit), the machine must be the one it was
made for (over ssh: reached again as it was, :mod:`vacate.remote.acting`), the volume is
resolved once and observed again: a stale plan is refused with the differences named.
Then each step: its intent journaled (fsync); if its postcondition already holds it is
skipped; else its precondition is checked just before it acts, it acts, and its
postcondition must hold; its outcome journaled (fsync). A failed step stops the apply there;
a rerun resumes (a started step is checked again, never taken as finished). The steps run
here, or on the plan's far host one at a time, the journal staying here. Prints nothing:
progress goes to the ``progress`` callback.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, replace

from vacate.act.base import Context
from vacate.act.journal import Journal, PlanLock
from vacate.act.kind import kind_of, relies_on
from vacate.act.registry import KINDS
from vacate.decide import stale
from vacate.decide.plan import edited_steps
from vacate.observing.compat import SLOTS
from vacate.observing.errors import EXIT_UNKNOWN, UsageError, VacateError
from vacate.observing.host import Host
from vacate.observing.model.codec import Malformed
from vacate.observing.model.journal import check_belongs, path_for, states_of
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


@dataclass(frozen=True, **SLOTS)
class Loaded:
    """A plan file as read once: its path, its value, its bytes and their sha256 (what
    approval is pinned to)."""

    path: str
    plan: Plan
    raw: bytes
    sha256: str


def read(plan_path: str) -> Loaded:
    """The plan in ``plan_path``; refused when it is not one."""
    try:
        with open(plan_path, "rb") as f:
            raw = f.read(1 << 32)
    except OSError as e:
        raise UsageError(f"cannot read {plan_path}: {e.strerror}") from None
    try:
        plan = Plan.loads(raw.decode("ascii", "surrogateescape"))
    except Malformed as e:
        raise Refused(f"{plan_path}: {e}") from None
    return Loaded(plan_path, plan, raw, hashlib.sha256(raw).hexdigest())


def load(plan_path: str) -> tuple[Plan, str]:
    """The plan in ``plan_path`` and the sha256 of the file; refused when it is not one."""
    got = read(plan_path)
    return got.plan, got.sha256


def reach_for(plan: Plan, host: Host, asked: str | None = None, stall_s: float | None = None):
    """Where the plan is applied: over ssh on the host it was made on (its recorded
    ``ssh``, ``python``, ``become``: ``asked``, a ``--host`` given again, must name the same
    host; ``stall_s``: the silence that fails the step under way), else here (inside
    container ``ct`` where it was made with ``--ct``)."""
    from vacate.remote import Local, Remote

    facts = plan.observation.host
    ct = plan.observation.ct.ctid if plan.observation.ct is not None else None
    if facts.ssh:
        from vacate.remote.ssh import SshTarget

        target = SshTarget.parse(facts.ssh, python=facts.python or "python3",
                                 become=facts.become,
                                 **({} if stall_s is None else {"stall_s": stall_s}))
        if asked is not None and SshTarget.parse(asked).label != target.label:
            raise Refused(f"the plan was made for {target.label}, not {asked}: nothing was "
                          "changed", hint=f"vacate apply PLAN (it reaches {target.label} "
                                          "itself)")
        return Remote(target, ct=ct, act=True)
    if asked is not None:
        raise Refused(f"the plan was made on this machine, not over ssh on {asked}: nothing "
                      "was changed", hint="vacate plan --host HOST makes a plan for HOST")
    if facts.via and ct is None:
        raise Refused(f"the plan was made for {facts.via} by a vacate that did not record "
                      "how to reach it: nothing was changed",
                      hint="make the plan again with vacate plan --host")
    return Local(host, ct=ct)


def check_machine(plan: Plan, reach, started: set[str] = frozenset()) -> None:
    """Refuse a plan made for another machine (its recorded ``/etc/machine-id`` is not the
    one found where it is applied) or, before any step started, for a container whose
    config is not the one it was made from."""
    facts = plan.observation.host
    here = reach.call("hello").get("machine_id") or ""
    where = getattr(reach, "label", None) or "this machine"
    if facts.machine_id and here and facts.machine_id != here:
        raise Refused(f"the plan was made on machine {facts.machine_id} "
                      f"({facts.hostname or 'unnamed'}); {where} is {here}: nothing was "
                      "changed")
    view = plan.observation.ct
    if view is not None and not started:
        now = reach.call("ct_view", ctid=view.ctid, path=view.path)
        if now.config_sha256 != view.config_sha256:
            raise Refused(f"CT {view.ctid}'s config ({now.config}) is not the one the plan "
                          "was made from: nothing was changed",
                          hint=f"make a new plan: vacate plan --ct {view.ctid} {view.path}")


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


def _identities(plan: Plan, reach):
    from vacate.flow.plan import identity_of

    out = {}
    for it in plan.items:
        if it.action in ("archive", "delete"):
            try:      # totals and digest only: memory in proportion to its directories
                out[it.path] = identity_of(reach.call("record_item", path=it.path,
                                                      dev=plan.observation.target.st_dev))
            except (OSError, VacateError):
                out[it.path] = None
    return out


def target_now(plan: Plan, reach):
    """The volume as found now (resolved once per apply), or a string saying why not."""
    try:
        return reach.call("target", path=plan.target_path)
    except VacateError as e:
        return str(e.message)


def staleness(plan: Plan, reach, started: set[str], now_target=None) -> list[str]:
    """What changed since the plan was made (empty: it holds)."""
    if stale.unmounted_by_us(plan, started):
        return []                      # the volume is down already: this apply did it
    now_target = now_target if now_target is not None else target_now(plan, reach)
    if isinstance(now_target, str):
        return [now_target]
    if now_target.mountpoint != plan.target_path:
        return [f"nothing is mounted at {plan.target_path} any more"]
    view = plan.observation.ct
    # the top level is all staleness asks of the inventory (what is new there); what changed
    # inside an item is its identity's business: no walk of the whole volume here
    now = reach.observe(view.path if view is not None else plan.target_path, scan_tree=False)
    return stale.differences(plan, now, _identities(plan, reach), started)


def apply(plan_path: str, *, host: Host | None = None, loaded: Loaded | None = None,
          remote: str | None = None, dry_run: bool = False, progress=None, on_step=None,
          nvml=None, stall_s: float | None = None, reach=None) -> ApplyResult:
    """Apply the plan in ``plan_path`` (approval is the caller's: ``loaded``, the plan it
    showed, whose bytes must still be the file's). ``remote``: a ``--host`` the caller was
    given, which must be the plan's (``stall_s``: its ``--stall-timeout``). ``on_step(StepResult)``
    is called as each step ends;
    ``progress(step, done, total, what)`` during long ones. ``reach``: where the plan's
    host is reached, when the caller reaches it itself (Ansible's module transport:
    :class:`vacate.remote.modules.ModuleReach`, sending the acting half); the plan's
    recorded ssh address is then not used."""
    host = host or Host.local()
    journal_path = path_for(plan_path)
    with PlanLock(plan_path):
        got = read(plan_path)
        if loaded is not None and got.sha256 != loaded.sha256:
            raise Refused(f"{plan_path} changed after it was shown for approval: nothing was "
                          "changed")
        plan, sha = got.plan, got.sha256
        states = states_of(check_belongs(journal_path, sha))
        started = set(states)
        with reach or reach_for(plan, host, remote, stall_s) as where:
            check_machine(plan, where, started)
            now_target = None if stale.unmounted_by_us(plan, started) else \
                target_now(plan, where)
            _check_places(plan, plan_path, where, now_target)
            check_plan(plan, plan_path)
            stale_lines = staleness(plan, where, started, now_target)
            if stale_lines:
                raise Refused("the plan is stale, nothing was changed: " +
                              "; ".join(stale_lines),
                              hint="make a new plan: vacate plan " + plan.target_path)
            ctx = Context(plan=plan, host=host, progress=progress, earlier=states, nvml=nvml,
                          plan_path=plan_path, dry_run=dry_run)
            from vacate.remote import Local

            if not isinstance(where, Local):
                from vacate.remote.acting import There

                actor = There(plan, where, raw=got.raw, sha256=sha, plan_path=plan_path,
                              progress=progress)
            else:
                from vacate.remote.acting import Here

                actor = Here(plan, ctx)
            actor.begin()
            if dry_run:
                result = _dry(plan_path, plan, states, actor)
                actor.end(False)
                return result
            with Journal(journal_path, sha) as j:
                result = _steps(plan_path, plan, actor, j, states, on_step)
            actor.end(result.complete)
            return result


def _check_places(plan: Plan, plan_path: str, reach, target) -> None:
    """The archive's destination (where the steps run) and the journal (here) must not be
    on the volume being retired."""
    from vacate.flow.plan import on_target
    from vacate.remote import Local

    if target is None or isinstance(target, str):
        return                     # unmounted already by this apply, or said by staleness
    dest = plan.archive_to if plan.archive_to and "://" not in plan.archive_to else None
    if dest and on_target(reach, dest, target):
        raise Refused(f"the archive destination {dest} is on the volume being retired")
    if isinstance(reach, Local) and reach.ct is None and on_target(reach, plan_path, target):
        raise Refused(f"the plan and its journal {plan_path} is on the volume being retired")


def _steps(plan_path, plan, actor, j, states, on_step) -> ApplyResult:
    """Every step in order, until one fails."""
    results = []
    stopped = False
    for i, step in enumerate(plan.steps):
        if stopped:
            results.append(StepResult(step.id, step.kind, step.summary, "pending"))
            continue
        r = _one(step, actor, j, states.get(step.id))
        if r.status == "failed":
            said = actor.bring_back(i)
            if said:     # journaled again with what was brought back
                r = replace(r, detail=f"{r.detail}; " + "; ".join(said),
                            data={**(r.data or {}), "brought_back": said})
                j.outcome(r.id, r.status, r.detail, r.data)
        results.append(r)
        if on_step is not None:
            on_step(r)
        stopped = r.status == "failed"
    return ApplyResult(plan_path, plan, tuple(results))


def _one(step, actor, j: Journal, before) -> StepResult:
    t0 = time.time()
    if before is not None and before.event == "outcome" and before.status in ("ok", "skipped") \
            and actor.still_done(step, before):
        return StepResult(step.id, step.kind, step.summary, before.status, before.detail,
                          before.started, before.ended, True, before.data)
    j.intent(step.id, step.kind)
    relied = relies_on(step)
    seen = {}
    if relied:                     # what the journal says now of the steps it relies on
        now = j.states()
        seen = {sid: now[sid] for sid in relied if sid in now}
    out = actor.carry_out(step, before, seen)
    j.outcome(step.id, out.status, out.detail, out.data)
    return StepResult(step.id, step.kind, step.summary, out.status, out.detail, t0,
                      time.time(), False, out.data)


def _dry(plan_path: str, plan: Plan, states, actor) -> ApplyResult:
    """What applying would do: each step not done yet, with what can be told now, and
    nothing changed. Every precondition that does not wait on an earlier step is checked
    against the machine as it is (a holder's identity, a unit's manager, a line's sha256,
    an item's recorded entries, the destination's permissions); the volume's own unmount
    is checked against the state the steps before it would leave: every user that holds
    it now must be ended by one of them."""
    live = {c.id: c for c in plan.observation.consumers if c.live}
    ended: set[str] = set()
    out = []
    for step in plan.steps:
        kind = kind_of(step)
        before = states.get(step.id)
        if step.kind != "manual":
            ended |= _ends(step, plan)
        if before is not None and before.event == "outcome" and before.status in ("ok",
                                                                                   "skipped"):
            out.append(StepResult(step.id, step.kind, step.summary, before.status,
                                  before.detail, earlier=True))
            continue
        why, note = None, "checked"
        if stale.own_unmount(step, plan):
            left = [c for cid, c in live.items() if cid not in ended]
            if left:
                why = "would fail: still used by " + ", ".join(
                    f"{c.type} {c.name}" for c in left[:5]) + " (no step before it ends them)"
            note = "after the steps before it: nothing would hold it"
        elif kind.after_earlier:
            note = "after the steps before it"
        else:
            why = actor.ready(step)
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
                if c.type == "process" and c.attrs.unit == unit}
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
