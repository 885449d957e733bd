"""What a kind of step is, said once by the module that acts it, and the one way a step is
carried out.

Each module of ``vacate.act`` declares ``KINDS``: one :class:`Kind` per step kind it handles,
with its policy. What a step of the kind says (its parameters) is a typed value of the model,
:mod:`vacate.observing.model.steps`, which decide builds and the codec checks when a plan is
read; :func:`params` hands it over. ``vacate.act.registry`` lists the modules: adding a kind
is its value there, its module here and one line of the registry.

The policy:

- ``proves_itself``: the step's own run is the proof (an archive read back, a check, a
  manual step): no postcondition is read before or after it.
- ``after_earlier``: its precondition holds only once the steps before it have acted (an
  unmount needs its holders gone): a dry run lists it rather than checks it.
- ``every_time``: never taken as done from an earlier run (a check looks again, a manual step
  is asked again).

:func:`carry_out` is the one place that asks ``done`` and ``ready``: already done is
``skipped``; a precondition that does not hold is ``failed``; else the module's ``run``
acts, and (unless the kind proves itself) its postcondition must hold afterwards. A
module's ``run`` only acts.
"""

from __future__ import annotations

from dataclasses import dataclass

from vacate.act.base import Context, Outcome
from vacate.observing.compat import SLOTS
from vacate.observing.model import codec
from vacate.observing.model.plan import Step


@dataclass(frozen=True, **SLOTS)
class Kind:
    """One step kind: its name and its policy (see the module); what a step of it says is
    its value in :mod:`vacate.observing.model.steps`."""

    name: str
    proves_itself: bool = False
    after_earlier: bool = False
    every_time: bool = False


def kind_of(step: Step) -> Kind:
    from vacate.act.registry import KINDS

    return KINDS[step.kind][0]


def module_of(step: Step):
    from vacate.act.registry import KINDS

    return KINDS[step.kind][1]


def relies_on(step: Step) -> tuple[str, ...]:
    """The steps whose journaled outcomes the step's precondition reads (``verified_by``
    of a step that frees the volume): apply hands them over as ``Context.witnesses``."""
    return tuple(getattr(step.precondition, "verified_by", ()) or ())


def params(step: Step):
    """The step's parameters: its kind's typed value (checked when the plan was read);
    :class:`codec.Malformed` when it has none."""
    if step.params is None:
        raise codec.Malformed(f"steps[{step.id}].params", f"missing for a {step.kind} step")
    return step.params


def carry_out(step: Step, ctx: Context) -> Outcome:
    """Carry out one step: done already is ``skipped`` (the module's ``skipped`` may say
    more, or finish what a crash interrupted: telling cron again); a precondition that does
    not hold is ``failed``, with why; in a dry run (``ctx.dry_run``) a step ready to act is
    ``would`` and nothing acts; else the module acts, and an ``ok`` that leaves its
    postcondition unmet is ``failed``."""
    k, mod = kind_of(step), module_of(step)
    if not k.proves_itself and mod.done(step, ctx):
        said = getattr(mod, "skipped", None)
        return said(step, ctx) if said is not None else Outcome("skipped", "already done")
    why = mod.ready(step, ctx)
    if why:
        failed = getattr(mod, "not_ready", None)
        return failed(step, ctx, why) if failed is not None else \
            Outcome("failed", f"not done: {why}")
    if ctx.dry_run:              # the one place a dry run stops: no kind's run is reached
        return Outcome("would", f"would {step.summary}")
    out = mod.run(step, ctx)
    if out.status == "ok" and not k.proves_itself and not mod.done(step, ctx):
        return Outcome("failed", f"{out.detail}; but afterwards it does not hold "
                                 f"({codec.encode(step.postcondition)})", out.data)
    return out


def attempt(step: Step, ctx: Context) -> Outcome:
    """:func:`carry_out`, with what can go wrong as the step's failed outcome (parameters
    that do not fit its kind, a command that failed, an error of the machine)."""
    from vacate.act.base import CommandFailed
    from vacate.observing.errors import VacateError

    try:
        return carry_out(step, ctx)
    except codec.Malformed as e:
        return Outcome("failed", f"its parameters do not fit its kind: {e}")
    except CommandFailed as e:
        return Outcome("failed", str(e))
    except (OSError, VacateError) as e:
        return Outcome("failed", getattr(e, "message", None) or f"{type(e).__name__}: {e}")


def still_done(step: Step, ctx: Context) -> bool:
    """Whether the step's postcondition holds now (False where it cannot be read): a step an
    earlier run finished is taken as done only while this holds."""
    from vacate.act.base import CommandFailed
    from vacate.observing.errors import VacateError

    if kind_of(step).every_time:
        return False
    try:
        return bool(module_of(step).done(step, ctx))
    except (OSError, VacateError, CommandFailed):
        return False


def precondition(step: Step, ctx: Context) -> str | None:
    """What a dry run says of a step: None when its precondition holds now, else why not."""
    from vacate.act.base import CommandFailed
    from vacate.observing.errors import VacateError

    try:
        return module_of(step).ready(step, ctx)
    except (OSError, VacateError, CommandFailed) as e:
        return str(e)

