"""Actions as values: what to do about a consumer, the command, where it runs, and what it
relies on.

An :class:`Action` is data, never a sentence: ``kind`` says what it does, ``argv`` the command
as it runs *inside* ``where`` (``["systemctl", "stop", "x.service"]``), ``where`` the place
(:class:`Where`: the host, a container's manager, a mount namespace), ``precondition`` the
facts the action relies on (a process's pid and start time, a unit's state, a mount's id), and
``params`` its kind's own fields. :meth:`Where.wrap` is the one place that decides how a
container's manager is reached; ``model/sentence.py`` renders the sentence a person reads.

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vacate.observing.compat import SLOTS
from vacate.observing.model import codec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# What an action does. ``manual``: only a person can do it (``params["do"]`` says what).
ACTION_KINDS = (
    "stop-unit", "disable-unit", "mask-unit", "end-process", "stop-container", "remove-container",
    "swapoff", "detach-loop", "unmount", "unexport", "edit-config", "manual",
)

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
    precondition: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    consumer: str | None = None

    def __post_init__(self):
        if self.kind not in ACTION_KINDS:
            raise ValueError(f"unknown action kind {self.kind!r}")
        if self.where.kind not in WHERE_KINDS:
            raise ValueError(f"unknown place kind {self.where.kind!r}")

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
