"""The sentence a person reads for a sequence of :class:`Action` values: commands as a shell
would take them (quoted where needed), joined in the order they must run.

In the model (not in output) because a manual step says it on a far host too: the acting half
that apply ships (``act/manual.py``) imports it, and output renders with it. Standard library
only, CPython 3.8, like the rest of observing/."""

from __future__ import annotations

import shlex

from vacate.observing.model.action import Action

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


def sentence(a: Action) -> str:
    """One action in words: its command, or what a person must do."""
    p = a.params
    do = p.get("do")
    if do is None:
        s = command(a)
        if p.get("or"):
            s += f" (or {p['or']})"
        return s
    s = _SAY.get(do, "{at}: " + str(do)).format(
        at=a.subject if a.kind != "edit-config" else
        (f"{p['file']}:{p['line']}" if "line" in p else p.get("file", a.subject)),
        cmd=command(a), **{k: v for k, v in p.items() if k not in ("at", "cmd")})
    if do == "change-entry" and p.get("autostart"):
        s += "; set lxc.start.auto = 0 meanwhile"
    if do == "comment-out" and p.get("then"):
        s += f" (then: {p['then']})"
    elif p.get("then"):
        s += f", then {p['then']}"
    if do == "delete-snapshot" and p.get("last"):
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
        elif a.params.get("do") == "delete-snapshot" and prev.params.get("do") == a.params["do"]:
            out += "; " + s
        elif a.params.get("do") is not None or a.kind == "remove-container":
            out += ", then " + s
        else:
            out += " && " + s
        prev = a
    return out
