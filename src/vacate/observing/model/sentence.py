"""The sentence a person reads for a sequence of :class:`Action` values: commands as a shell
would take them (quoted where needed), joined in the order they must run.

In the model (not in output) because a manual step says it on a far host too: the acting half
that apply ships (``act/manual.py``) imports it, and output renders with it. Standard library
only, CPython 3.8, like the rest of observing/."""

from __future__ import annotations

import shlex

from vacate.observing.model.action import Action
from vacate.observing.model.conditions import Engine, Todo

# what a person is asked to do for an edit or a manual step, by its ``do``
_SAY = {
    "comment-out": "remove or comment out the entry at {at}",
    "change-job": "remove or change the job at {at}",
    "remove-export": "remove the export at {at}",
    "remove-share": "remove the share at {at}",
    "change-entry": "remove or change the entry at {at}",
    "change-config": "change or remove {at}",
    "remove-link": "remove the link ({cmd}) or point it elsewhere",
    "move-or-destroy": "move the container off the volume or destroy it ({cmd})",
    "move-root-disk": "move the root disk off the volume ({cmd}) or destroy the guest",
    "delete-disks": "{cmd} (or move those volumes to other storage)",
    "revert-pending": "{cmd} (a pending change names the volume)",
    "restart-container": "when the container may restart, {cmd}: it applies the pending "
                         "removal (until then it is listed by pct pending {at})",
    "delete-snapshot": "{cmd}",
    "remove-storage": "move its volumes elsewhere, then {cmd} "
                      "(or pvesm set {storage} --disable 1)",
}


def command(a: Action) -> str:
    """The action's full command line, quoted for a shell."""
    return shlex.join(a.command)


def _do(a: Action) -> str | None:
    """What a person is asked to do (an edit's or a manual step's), or None."""
    return a.params.do if isinstance(a.params, Todo) else None


def sentence(a: Action) -> str:
    """One action in words: its command, or what a person must do."""
    p = a.params
    do = _do(a)
    if do is None:
        s = command(a)
        if isinstance(p, Engine) and p.instead:
            s += f" (or {p.instead})"
        return s
    at = a.subject if a.kind != "edit-config" else \
        (f"{p.file}:{p.line}" if p.line is not None else p.file or a.subject)
    s = _SAY.get(do, "{at}: " + str(do)).format(
        at=at, cmd=command(a), storage=p.storage)
    if do == "change-entry" and p.autostart:
        s += "; set lxc.start.auto = 0 meanwhile"
    if do == "comment-out" and p.then:
        s += f" (then: {p.then})"
    elif p.then:
        s += f", then {p.then}"
    if do == "delete-snapshot" and p.last:
        s += " (only snapshots still name the volume)"
    return s


def render(actions: tuple[Action, ...]) -> str:
    """A sequence of actions as one line: commands joined by ``&&`` (each must succeed
    before the next), ``, then`` before a step a person does, ``;`` between snapshots."""
    out = ""
    prev = None
    for a in actions:
        s = sentence(a)
        if prev is None:
            out = s
        elif _do(a) == "delete-snapshot" and _do(prev) == _do(a):
            out += "; " + s
        elif _do(a) is not None or a.kind == "remove-container":
            out += ", then " + s
        else:
            out += " && " + s
        prev = a
    return out
