"""Steps only a person can do (a container's init, a config vacate does not edit, what lies
inside another machine): apply changes nothing and says what to do, rendered from the
step's action (``observing/model/sentence.py``), or the step's summary where it has none."""

from __future__ import annotations

from vacate.act.base import Context, Outcome
from vacate.act.kind import Kind
from vacate.observing.model.plan import Step
from vacate.observing.model.sentence import sentence

KINDS = (Kind("manual", proves_itself=True, every_time=True),)


def say(step: Step) -> str:
    """What the person is to do."""
    if step.action is not None:
        return sentence(step.action)
    return step.summary


def done(step: Step, ctx: Context) -> bool:
    """Never known to be done: vacate does not do it, and a fresh look tells."""
    return False


def ready(step: Step, ctx: Context) -> str | None:
    return None


def run(step: Step, ctx: Context) -> Outcome:
    return Outcome("manual", say(step))
