"""What every kind of action module gives ``apply``, and what ``apply`` gives it.

A module of ``vacate.act`` declares its step kinds (``KINDS``: :class:`vacate.act.kind.Kind`,
with their policy and parameters) and three functions, each taking the plan's
:class:`~vacate.observing.model.plan.Step` and a :class:`Context`:

- ``done(step, ctx) -> bool``: the postcondition holds now (the step's effect is there,
  whether this apply made it or not). Read-only. A rerun after a crash asks this first: a
  step that is done is not done again.
- ``ready(step, ctx) -> str | None``: the precondition, checked just before acting: None when
  the step may act, else why not (a process's start time changed, a line of a file is not
  the line planned). Read-only.
- ``run(step, ctx) -> Outcome``: act. It is called only once ``done`` said no and ``ready``
  said yes (:func:`vacate.act.kind.carry_out` asks them, once); it does not ask again.

Optional: ``skipped(step, ctx)``, the outcome of a step found done (what it says, or what a
crash left to finish), and ``not_ready(step, ctx, why)``, the outcome of one that may not act.

Only these ``run`` functions change the system, and only through the step's fields: nothing
here parses a sentence. Commands run through :meth:`Context.run`, which records each one.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

from vacate.observing.compat import SLOTS
from vacate.observing.host import Host
from vacate.observing.model.plan import Plan, Step

OUTCOMES = ("ok", "skipped", "failed", "manual", "would")   # would: a dry run, ready to act


@dataclass(frozen=True, **SLOTS)
class Outcome:
    """What a step came to: ``status`` one of ok, skipped (it was done already), failed,
    manual (only a person can do it: ``detail`` says what); ``data`` the kind's own facts
    (bytes archived, signals sent, the snapshot's name)."""

    status: str
    detail: str = ""
    data: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.status!r}")


class CommandFailed(Exception):
    """A command of a step exited non-zero: ``argv``, its status and what it printed."""

    def __init__(self, argv, code: int, output: str):
        super().__init__(f"{' '.join(argv)}: exit {code}: {output.strip()[:500]}")
        self.argv = tuple(argv)
        self.code = code
        self.output = output


@dataclass(**SLOTS)
class Context:
    """An apply's surroundings for the action modules: the plan, the host, whether this is a
    dry run, where progress goes, the commands run so far, and NVML."""

    plan: Plan
    host: Host = field(default_factory=Host.local)
    dry_run: bool = False
    progress: object = None          # callable(step, done, total, what) or None
    commands: list = field(default_factory=list)
    timeout_s: float = 600.0
    earlier: dict = field(default_factory=dict)   # step id -> journal.StepState of earlier runs
    nvml: object = None              # pynvml's interface (None: load it where installed)
    plan_path: str = ""              # the plan's file (its entries files lie beside it)
    # step id -> journal.StepState: what the journal says now of the steps the step about
    # to act relies on (its precondition's ``verified_by``: :func:`vacate.act.kind.relies_on`)
    witnesses: dict = field(default_factory=dict)

    def finished_earlier(self, step: Step) -> dict | None:
        """The data of this step's ok outcome in an earlier run of this apply, or None."""
        st = self.earlier.get(step.id)
        if st is not None and st.event == "outcome" and st.status in ("ok", "skipped"):
            return st.data
        return None

    def run(self, argv, *, check: bool = True, timeout: float | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` (never through a shell), recorded; :class:`CommandFailed` when it
        exits non-zero and ``check``."""
        argv = [str(a) for a in argv]
        self.commands.append(tuple(argv))
        try:
            r = subprocess.run(argv, capture_output=True, text=True, check=False,
                               timeout=timeout or self.timeout_s, input=input,
                               env=dict(os.environ, LC_ALL="C"))
        except FileNotFoundError as e:
            raise CommandFailed(argv, 127, f"{argv[0]}: not found") from e
        except subprocess.TimeoutExpired as e:
            raise CommandFailed(argv, 124, f"did not finish in {e.timeout} s") from e
        if check and r.returncode != 0:
            raise CommandFailed(argv, r.returncode, r.stderr or r.stdout)
        return r

    def tell(self, step: Step, done: int, total: int, what: str = "") -> None:
        if self.progress is not None:
            self.progress(step, done, total, what)
