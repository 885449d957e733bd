"""Where an apply's steps run: :class:`Here` (this process, on this machine) or
:class:`There` (the worker on the host the plan was made on, over ssh, with the acting half
sent to it: :mod:`vacate.act.far`). Both answer the same four questions of a step, so
``apply`` orchestrates, journals and reports the same way whichever it is; the journal is
always written here, where the operator runs vacate.

A connection that drops during a step is that step's failure (the session's
:class:`~vacate.remote.ssh.Unreachable`, said with the host's name), journaled like any
other; the far worker dies with its connection, killing what it started. A rerun connects again, asks the far side whether the step's postcondition
holds, and goes on, as after a ``kill -9`` here.
"""

from __future__ import annotations

import base64

from vacate.act.base import Context, Outcome
from vacate.observing.errors import VacateError
from vacate.observing.model.plan import Plan, Step

PIECE = 4 << 20             # an entries file is sent in pieces of this many bytes


def _said(before) -> dict | None:
    """What the journal says of a step's earlier run, as the far side takes it (begun and
    never said how it ended: ``{"event": "intent"}``)."""
    if before is not None and before.event == "outcome":
        return {"status": before.status, "data": before.data}
    if before is not None and before.event == "intent":
        return {"event": "intent"}
    return None


class Here:
    """The steps run in this process."""

    def __init__(self, plan: Plan, ctx: Context):
        self.plan = plan
        self.ctx = ctx

    def begin(self) -> None:
        pass

    def still_done(self, step: Step, before) -> bool:
        from vacate.act.kind import still_done

        return still_done(step, self.ctx)

    def carry_out(self, step: Step, before, witnesses: dict | None = None) -> Outcome:
        from vacate.act.kind import attempt

        self.ctx.witnesses = dict(witnesses or {})
        return attempt(step, self.ctx)

    def ready(self, step: Step) -> str | None:
        from vacate.act.kind import precondition

        return precondition(step, self.ctx)

    def bring_back(self, index: int) -> list[str]:
        from vacate.act.migrate import bring_back_after

        return bring_back_after(self.plan, index, self.ctx)

    def end(self, complete: bool) -> None:
        pass


class There:
    """The steps run by the worker on the plan's host (``reach``: a
    :class:`vacate.remote.Remote` sending the acting half)."""

    def __init__(self, plan: Plan, reach, *, raw: bytes, sha256: str, plan_path: str,
                 progress=None):
        self.plan = plan
        self.reach = reach
        self.raw = raw
        self.sha256 = sha256
        self.plan_path = plan_path
        self.progress = progress
        self.commands: list = []
        self.pid = None

    def _files(self) -> dict[str, str]:
        out = {}
        for it in self.plan.items:
            ref = it.entries
            if ref and ref.get("file") and ref.get("sha256"):
                out[ref["file"]] = ref["sha256"]
        return out

    def begin(self) -> None:
        """Send the plan (its approved bytes) and the entries files the far side lacks."""
        from vacate.observing.store import find_entries_file

        files = self._files()
        got = self.reach.call("apply_begin", plan=self.raw.decode("ascii", "surrogateescape"),
                              sha256=self.sha256, files=files)
        self.pid = got.get("pid")
        for name in got.get("need", ()):
            path = find_entries_file(name, self.plan_path)
            if path is None:
                continue        # the delete step says it is missing, there, in its words
            with open(path, "rb") as f:
                offset = 0
                while True:
                    data = f.read(PIECE)
                    last = len(data) < PIECE
                    self.reach.call("apply_put", name=name, offset=offset,
                                    data=base64.b64encode(data).decode("ascii"), last=last)
                    offset += len(data)
                    if last:
                        break

    def _note(self, value) -> None:
        if self.progress is None or not isinstance(value, dict):
            return
        step = next((s for s in self.plan.steps if s.id == value.get("step")), None)
        if step is not None:
            self.progress(step, int(value.get("done") or 0), int(value.get("total") or 0),
                          str(value.get("what") or ""))

    def still_done(self, step: Step, before) -> bool:
        try:
            return bool(self.reach.call("apply_done", step=step.id, earlier=_said(before)))
        except VacateError:
            return False

    def carry_out(self, step: Step, before, witnesses: dict | None = None) -> Outcome:
        seen = {sid: _said(st) for sid, st in (witnesses or {}).items()}
        try:
            got = self.reach.call("apply_step", on_note=self._note, step=step.id,
                                  earlier=_said(before),
                                  **({"witnesses": seen} if seen else {}))
        except VacateError as e:
            return Outcome("failed", f"{e.message}: the step's outcome there is not known; a "
                                     "rerun asks whether it is done")
        self.commands.extend(tuple(c) for c in got.get("commands") or ())
        return Outcome(got["status"], got.get("detail") or "", got.get("data") or {})

    def ready(self, step: Step) -> str | None:
        return self.reach.call("apply_ready", step=step.id)

    def bring_back(self, index: int) -> list[str]:
        from vacate.observing.model.window import window_of

        units = [s.params.unit for s in window_of(self.plan, index)]
        if not units:
            return []
        try:
            return list(self.reach.call("apply_bring_back", index=index))
        except VacateError as e:
            return [f"{', '.join(map(str, units))} could NOT be brought back: {e.message}"]

    def end(self, complete: bool) -> None:
        try:
            self.reach.call("apply_end", complete=complete)
        except VacateError:
            pass
