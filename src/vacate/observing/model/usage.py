"""Who uses the volume, with evidence, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model import codec, consumers
from vacate.observing.model.action import Action
from vacate.observing.model.common import Problem
from vacate.observing.model.inventory import Item, ScanResult
from vacate.observing.model.mount import Target

# typing is imported only by type checkers (its import is a measurable part of start-up)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from vacate.observing.model.observation import CtView, HostFacts

# Item statuses, strongest first: a directory takes the strongest status found inside it.
STATUS_ORDER = ("active", "referenced", "cold", "disposable", "artifact")

CONSUMER_TYPES = (
    "process", "systemd-unit", "mount", "fstab", "swap", "loop-device", "nfs-export", "smb-share",
    "lxc-container", "pve-container", "pve-vm", "docker-container", "cron", "symlink",
    "config-file",
)


@dataclass(frozen=True, **SLOTS)
class Evidence:
    """One observation behind a claim: what was seen, where, and how.

    ``kind``: for processes one of fd, mmap, cwd, root, exe; otherwise what was read
    (``unit-file``, ``mountinfo``, ``swaps``, ``loop``, ``config-line``, ``cgroup``, ...).
    ``path`` is the host path on the volume that it concerns; ``source`` where it was seen
    (``/proc/123/fd/4``, ``/etc/systemd/system/x.service:7``); ``detail`` the raw text.
    """

    kind: str
    path: str | None
    source: str
    detail: str = ""
    deleted: bool = False

    def as_json(self) -> dict:
        d = {"kind": self.kind, "path": self.path, "source": self.source, "detail": self.detail}
        if self.deleted:
            d["deleted"] = True
        return d


@dataclass(frozen=True, **SLOTS)
class Consumer:
    """Something that uses the volume: a process, a unit, a mount, a config entry...

    ``id`` is stable: ``process:PID:STARTTIME``, ``systemd-unit:NAME``, ``swap:PATH``,
    ``fstab:LINE``... ``live`` is True when it uses the volume now (a running process, an active
    swap, a mount) and False when it is only configured to. ``attrs`` holds the type's own
    fields (:mod:`consumers`: pid, access, unit, container, gpus, enabled, active, ...), the
    value of the class its ``type`` names (a dict given is made one, every field checked);
    ``as_json()`` merges them into the consumer's object, an observation keeps them as its
    ``attrs`` object.
    """

    id: str
    type: str
    name: str
    live: bool
    paths: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    attrs: consumers.Attrs = None   # type: ignore[assignment]  (None: none)

    def __post_init__(self):
        if not isinstance(self.attrs, consumers.Attrs):
            object.__setattr__(self, "attrs", consumers.of(self.type, self.attrs or {}))

    def as_json(self) -> dict:
        d = {"id": self.id, "type": self.type, "name": self.name, "live": self.live}
        d.update(self.attrs.encode_fields())
        d["paths"] = list(self.paths)
        d["evidence"] = [e.as_json() for e in self.evidence]
        return d

    @classmethod
    def decode_fields(cls, data, where: str) -> dict:
        """A consumer's fields from an observation's object: its ``attrs`` by its type's
        class (:func:`consumers.decode`), every field checked."""
        if not isinstance(data, dict):
            return codec.fields_of(cls, data, where)        # refused, named
        fields = codec.fields_of(cls, {k: v for k, v in data.items() if k != "attrs"}, where)
        at = f"{where}.attrs" if where else "attrs"
        fields["attrs"] = consumers.decode(fields["type"], data.get("attrs", {}), at)
        return fields


@dataclass(frozen=True, **SLOTS)
class Blocker:
    """Why the volume cannot be unmounted now: a consumer, the reason, and the next actions
    in the order they must run."""
    consumer: str   # consumer id
    reason: str
    actions: tuple[Action, ...]


@dataclass(frozen=True, **SLOTS)
class Verdict:
    """``safe_to_unmount``: True, False (with blockers) or None (could not tell)."""

    safe_to_unmount: bool | None
    blockers: tuple[Blocker, ...]
    unknowns: tuple[Problem, ...] = ()



@dataclass(frozen=True, **SLOTS)
class ItemUsage:
    """A scanned item with its status and the ids of the consumers that use it."""
    item: Item
    status: str
    users: tuple[str, ...]   # consumer ids


@dataclass(frozen=True, **SLOTS)
class CheckResult:
    """What `vacate check` found: the target, its items and consumers, the verdict."""
    target: Target
    scan: ScanResult
    verdict: Verdict
    items: tuple[ItemUsage, ...]
    consumers: tuple[Consumer, ...]
    warnings: tuple[Problem, ...]
    whole_volume: tuple[str, ...] = ()   # consumer ids using the volume itself, not one item
    scanned: bool = True                 # False with --no-scan: items are listed, not walked
    elapsed_s: float = 0.0
    host: HostFacts | None = None        # the machine that was looked at
    ct: CtView | None = None             # --ct: the container's path and the host's


@dataclass(frozen=True, **SLOTS)
class ContainerRoot:
    """A running container found from the host, whose own configs are read through its root.

    ``type``: lxc, pve, nspawn, docker, pidns (a private pid namespace that no runtime names,
    systemd as its PID 1 say); ``name``: LXC name / CTID / machine / docker name / the init's
    pid;
    ``init_pid``: host pid of its init, so ``/proc/INIT/root`` and ``/proc/INIT/mountinfo``
    give its filesystem and its mounts.
    """

    type: str
    name: str
    init_pid: int
