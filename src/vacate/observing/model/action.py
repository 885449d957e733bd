"""Actions as values: what to do about a consumer, the command, where it runs, and what it
relies on.

An :class:`Action` is data, never a sentence: ``kind`` says what it does, ``argv`` the command
as it runs *inside* ``where`` (``["systemctl", "stop", "x.service"]``), ``where`` the place
(:class:`Where`: the host, a container's manager, a mount namespace), ``precondition`` the
facts the action relies on (a process's pid and start time, a unit's state, a mount's id), and
``params`` its kind's own fields: each a typed value of :mod:`conditions`, one of those its
kind may hold (:data:`ACTION_PRE`, :data:`ACTION_PARAMS`). :meth:`Where.wrap` is the one place that decides how a
container's manager is reached; ``model/sentence.py`` renders the sentence a person reads.

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model import codec
from vacate.observing.model import conditions as cd

# What an action does. ``manual``: only a person can do it (``params.do`` says what).
ACTION_KINDS = (
    "stop-unit", "disable-unit", "mask-unit", "end-process", "stop-container", "remove-container",
    "swapoff", "detach-loop", "unmount", "unexport", "edit-config", "manual",
)

# What each kind may rely on, and its own fields (the rest: nothing).
ACTION_PRE = {
    "stop-unit": (cd.UnitProcess, cd.Unit), "disable-unit": (cd.Unit, cd.UnitState), "mask-unit": (cd.Unit,),
    "end-process": (cd.Process,), "stop-container": (cd.Running, cd.Process, cd.Nothing),
    "detach-loop": (cd.Backing,), "unmount": (cd.MountPin, cd.Nothing),
}
ACTION_PARAMS = {
    "stop-container": (cd.Engine,), "remove-container": (cd.Engine,),
    "disable-unit": (cd.DisableNow, cd.Nothing), "edit-config": (cd.Todo,), "manual": (cd.Todo,),
}
_NONE = (cd.Nothing,)

# How each kind of place is entered, for a command run inside it.
WHERE_KINDS = ("host", "pid-namespace", "mount-namespace", "machine", "pct", "lxc", "docker")


@dataclass(frozen=True, **SLOTS)
class Where:
    """Where an action runs: ``host``; ``pid-namespace`` / ``mount-namespace`` (entered with
    ``nsenter -t PID``: all namespaces, or the mount namespace only); ``machine`` (a
    systemd-nspawn machine, ``systemctl -M NAME``); ``pct`` (a Proxmox container by CTID);
    ``lxc`` (``lxc-attach -n NAME``, ``lxcpath`` when not the default); ``docker``
    (``docker exec NAME``). ``user``: a user's own systemd manager there (``systemctl --user
    -M USER@``)."""

    kind: str = "host"
    name: str | None = None
    pid: int | None = None
    lxcpath: str | None = None
    user: str | None = None

    def wrap(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        """The command a person (or apply) runs here to run ``argv`` in this place."""
        argv = tuple(argv)
        if argv and argv[0] == "systemctl":
            rest = argv[1:]
            if self.user is not None:
                machine = self.name if self.kind == "machine" else ""
                inner = ("systemctl", "--user", "-M", f"{self.user}@{machine}", *rest)
                return inner if self.kind in ("host", "machine") else self._enter(inner)
            if self.kind == "machine":
                return ("systemctl", "-M", str(self.name), *rest)
        return self._enter(argv)

    def _enter(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        if self.kind == "host":
            return argv
        if self.kind == "pid-namespace":
            return ("nsenter", "-t", str(self.pid), "-a", *argv)
        if self.kind == "mount-namespace":
            return ("nsenter", "-t", str(self.pid), "-m", *argv)
        if self.kind == "pct":
            return ("pct", "exec", str(self.name), "--keep-env", "0", "--", *argv)
        if self.kind == "lxc":
            p = ("-P", self.lxcpath) if self.lxcpath else ()
            return ("lxc-attach", *p, "-n", str(self.name), "--", *argv)
        if self.kind == "docker":
            return ("docker", "exec", str(self.name), *argv)
        if self.kind == "machine":
            return ("systemd-run", "-M", str(self.name), "--wait", "--pipe", "-q", *argv)
        raise ValueError(f"unknown place kind {self.kind!r}")

    def label(self) -> str:
        """The place in a few words (``host``, ``lxc 129``)."""
        if self.kind == "host":
            return "host"
        if self.kind in ("pid-namespace", "mount-namespace"):
            return f"{self.kind} of pid {self.pid}"
        return f"{self.kind} {self.name}"

    def manager_words(self) -> str:
        """A unit's manager here in a few words: its place, and whose it is for a user's
        own."""
        return f"{self.user}'s manager, {self.label()}" if self.user is not None else \
            self.label()


HOST = Where()


@dataclass(frozen=True, **SLOTS)
class Action:
    """One thing to do: see the module's docstring. ``subject`` names what it acts on (a
    unit, ``pid:START``, a path, a device, ``file:line``); ``consumer`` the consumer id it
    answers, when it answers one."""

    kind: str
    subject: str
    argv: tuple[str, ...] = ()
    where: Where = HOST
    precondition: cd.Condition = cd.NOTHING
    params: cd.Condition = cd.NOTHING
    consumer: str | None = None

    def __post_init__(self):
        if self.kind not in ACTION_KINDS:
            raise ValueError(f"unknown action kind {self.kind!r}")
        if self.where.kind not in WHERE_KINDS:
            raise ValueError(f"unknown place kind {self.where.kind!r}")
        if self.params is cd.NOTHING and ACTION_PARAMS.get(self.kind) == (cd.Todo,):
            object.__setattr__(self, "params", cd.Todo())
        for name, allowed in (("precondition", ACTION_PRE.get(self.kind, _NONE)),
                              ("params", ACTION_PARAMS.get(self.kind, _NONE))):
            got = type(getattr(self, name))
            if got not in allowed:
                raise TypeError(f"{got.__name__} is not the {name} of a {self.kind} action")

    @classmethod
    def decode_fields(cls, data, where: str) -> dict:
        """The fields, the conditions read as the kind says (every field checked)."""
        if not isinstance(data, dict):
            raise codec.Malformed(where, f"expected an object for an action, found "
                                         f"{codec.kind_of(data)}")
        out = codec.fields_of(cls, {k: v for k, v in data.items()
                                    if k not in ("precondition", "params")}, where)
        if out["kind"] not in ACTION_KINDS:
            raise codec.Malformed(f"{where}.kind", f"unknown action kind {out['kind']!r}")
        for name, table in (("precondition", ACTION_PRE), ("params", ACTION_PARAMS)):
            if name in data:
                out[name] = cd.decode(table.get(out["kind"], _NONE), data[name],
                                      f"{where}.{name}")
        return out

    @property
    def command(self) -> tuple[str, ...]:
        """The full command, entering ``where`` (empty for a manual step without one)."""
        return self.where.wrap(self.argv) if self.argv else ()

    def to_json(self) -> dict:
        return codec.encode(self)

    @classmethod
    def from_json(cls, data, where: str = "action") -> Action:
        return codec.decode(cls, data, where)


codec.register(Where, Action)
