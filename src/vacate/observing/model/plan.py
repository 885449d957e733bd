"""A retirement plan: per item what happens to it, then the ordered teardown as steps.

A :class:`Plan` is a value and a file (``vacate.plan/1``) a person reviews; only the items'
``action`` fields are theirs to edit. It records the observation it was made from, so that
applying it later can name what changed since (a stale plan is refused), and for each item
that is archived or deleted the identity of what was there (device, inode, size, file
count, newest mtime and ctime, and a digest of its entries). What a delete item's entries
are is not in the plan but in an entries file beside it that the plan names by its sha256:
the plan holds a few numbers an item, whatever the item holds.

Standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import MISSING, dataclass, fields

from vacate.observing.compat import SLOTS
from vacate.observing.model import codec, conditions, steps
from vacate.observing.model.action import Action
from vacate.observing.model.common import Problem
from vacate.observing.model.observation import Observation
from vacate.observing.model.usage import Evidence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SCHEMA = "vacate.plan/1"
ITEM_ACTIONS = ("keep", "archive", "delete", "migrate")
STEP_KIND = re.compile(r"[a-z][a-z0-9-]{0,40}")     # what each kind is: vacate.act.registry


@dataclass(frozen=True, **SLOTS)
class Identity:
    """What an item was when planned: enough to tell, before acting, that it is unchanged.
    ``digest``: SHA-256 over its entries (path, type, device, inode, size, mtime, ctime)."""

    dev: int
    ino: int
    apparent_bytes: int
    disk_bytes: int
    files: int
    newest_mtime_ns: int | None
    newest_ctime_ns: int | None
    digest: str


@dataclass(frozen=True, **SLOTS)
class PlanItem:
    """One item of the volume and what happens to it. ``action``: keep (stays on the volume,
    untouched, and goes cold with it), archive (copied to the destination and verified; it
    stays on the volume too), migrate (copied to another volume, read back, and what uses it
    repointed and started from there; it stays on the volume too, unless ``delete_source``)
    or delete. ``get_back``: what it would take to have it again."""

    id: str
    path: str
    action: str
    reason: str
    kind: str
    label: str
    recoverable: str | None
    source: str | None
    apparent_bytes: int
    disk_bytes: int
    files: int
    status: str
    users: tuple[str, ...] = ()
    get_back: str = ""
    exclude: tuple[str, ...] = ()          # sub-items with another action
    identity: Identity | None = None
    # a delete item's entries: the entries file beside the plan that holds them, named by its
    # sha256, with its size, where its index starts, its entry and directory counts and the
    # item's digest (vacate.entries-file/1; see vacate.observing.entries)
    entries: dict[str, Any] | None = None
    # a migrate item: its path at the destination, and the free bytes seen there;
    # ``delete_source``: it is also marked delete, and its source on the volume is deleted
    # once what used it runs from the destination (else the source stays on the volume);
    # ``migrate_inside``: with ``--ct``, ``migrate_to`` as that container spells it (what its
    # units are repointed to)
    migrate_to: str | None = None
    dest_free_bytes: int | None = None
    delete_source: bool = False
    migrate_inside: str | None = None


@dataclass(frozen=True, **SLOTS)
class Step:
    """One step of the teardown. ``action``: the command and where it runs, for steps that
    run one (None for the steps vacate does itself: archive, verify, delete, snapshot,
    lock-dir, check); ``params`` the kind's own typed value (:mod:`steps`: the item, the
    destination, the grace period; left out, a kind without fields of its own gets its
    empty one); ``precondition`` what must hold just before it acts, ``postcondition`` what
    proves it done (each one of the kind's ``PRE`` / ``POST``: :mod:`conditions`, or
    nothing);
    ``evidence`` what led to it."""

    id: str
    kind: str
    summary: str
    action: Action | None = None
    params: steps.Params | None = None
    precondition: conditions.Condition = conditions.NOTHING
    postcondition: conditions.Condition = conditions.NOTHING
    evidence: tuple[Evidence, ...] = ()
    downtime: bool = False                 # runs after the services were stopped

    def __post_init__(self):
        cls = steps.KINDS.get(self.kind)
        if self.params is None:
            if cls is not None and not any(
                    f.default is MISSING and f.default_factory is MISSING
                    for f in fields(cls)):
                object.__setattr__(self, "params", cls())
        elif type(self.params) is not cls:
            raise TypeError(f"step {self.id}: {type(self.params).__name__} is not the "
                            f"parameters of a {self.kind} step")
        for name, allowed in (("precondition", cls.PRE if cls else None),
                              ("postcondition", cls.POST if cls else None)):
            got = type(getattr(self, name))
            if allowed is not None and got is not conditions.Nothing and got not in allowed:
                raise TypeError(f"step {self.id}: {got.__name__} is not a {name} of a "
                                f"{self.kind} step")

    @classmethod
    def decode_fields(cls, data, where: str) -> dict:
        """The fields, ``params`` read as the kind's value and the conditions as those the
        kind may hold (every field checked)."""
        if not isinstance(data, dict):
            raise codec.Malformed(where, f"expected an object for a step, found {data!r}")
        out = codec.fields_of(cls, {k: v for k, v in data.items() if k not in _BY_KIND}, where)
        params = out["params"] = steps.decode(out["kind"], data.get("params", {}),
                                              f"{where}.params")
        for name, allowed in (("precondition", params.PRE), ("postcondition", params.POST)):
            if name in data:
                out[name] = conditions.decode(allowed + (conditions.Nothing,), data[name],
                                              f"{where}.{name}")
        return out


_BY_KIND = ("params", "precondition", "postcondition")    # read as the step's kind says
_SINCE = frozenset({"archive_format", "verify_pool", "free_volume"})     # left out while at their default
ARCHIVE_FORMATS = ("tar", "zfs", "both")
RESTORE_MEANS = {
    "tar": "each archived item as files, restored anywhere (vacate restore, or zstd -dc | "
           "tar -x)",
    "zfs": "the whole dataset (every file, its properties and its snapshot), restored on any "
           "ZFS (cat the parts | zstd -dc | zfs receive POOL/NAME)",
}


@dataclass(frozen=True, **SLOTS)
class Plan:
    """See the module's docstring. ``blocked``: why it cannot be applied as it stands (an
    item to archive without a destination); ``problems`` what observing met."""

    target_path: str
    mount_id: int
    mount_dev: str
    fstype: str
    archive_to: str | None
    grace_s: float
    snapshot: bool
    items: tuple[PlanItem, ...]
    steps: tuple[Step, ...]
    observation: Observation
    blocked: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    expected_freed_bytes: int = 0
    archive_bytes: int = 0
    archive_estimate_s: float = 0.0
    created_at: float = 0.0
    mask_references: bool = False
    # how the volume is archived (``--archive-format``): ``tar`` (its items, each a tar
    # archive), ``zfs`` (its dataset, natively: zfs send) or ``both``; where a native archive
    # is proved receivable (``--verify-pool``; None: its stream parsed, the weaker check)
    archive_format: str = "tar"
    verify_pool: str | None = None
    # whether the plan's last steps free the volume itself (``--free-volume``: its dataset
    # destroyed, or its Proxmox volume deleted), once every archive of it is verified
    free_volume: bool = False

    def encode_fields(self) -> dict:
        """Every field, but those added since ``vacate.plan/1`` was first written left out
        while at their default (a plan of the earlier code writes back byte for byte)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in _SINCE and v == f.default:
                continue
            out[f.name] = codec.encode(v)
        return out

    def to_json(self) -> dict:
        """The document: its own fields, and for people and scripts the volume as ``target``
        and each step's command (``argv`` as run there, ``where``) beside its action;
        those copies are checked against the action when read back."""
        doc = codec.encode(self)
        for s, d in zip(self.steps, doc["steps"]):
            if s.action is not None:
                d["argv"] = list(s.action.command)
                d["where"] = codec.encode(s.action.where)
        if self.archive_format != "tar":     # what each archive gives back, for people
            doc["restore_means"] = {f: RESTORE_MEANS[f] for f in self.archive_formats}
        return {"schema": SCHEMA, "path_encoding": "utf-8+surrogateescape",
                "target": self.observation.target.as_json(), **doc}

    @property
    def archive_formats(self) -> tuple[str, ...]:
        """The archives the plan writes: ``("tar",)``, ``("zfs",)`` or both."""
        return ("tar", "zfs") if self.archive_format == "both" else (self.archive_format,)

    def dumps(self) -> str:
        """The plan file: indented for people, but the drill-down's table (a row per
        directory of the volume, most of a large plan) one row a line."""
        doc = self.to_json()
        try:
            dirs = doc["observation"]["inventory"]["dirs"]
            rows = dirs["rows"]
        except (KeyError, TypeError):
            return json.dumps(doc, ensure_ascii=True, indent=1) + "\n"
        mark = "\x00rows\x00"
        dirs["rows"] = mark
        text = json.dumps(doc, ensure_ascii=True, indent=1)
        one = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode
        table = "[\n" + ",\n".join(one(r) for r in rows) + "\n]" if rows else "[]"
        dirs["rows"] = rows
        return text.replace(json.dumps(mark), table, 1) + "\n"

    @classmethod
    def from_json(cls, doc) -> Plan:
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            got = doc.get("schema") if isinstance(doc, dict) else None
            raise codec.Malformed("schema", f"not a {SCHEMA} document ({got!r})")
        plan = codec.decode(cls, doc)
        if plan.archive_format not in ARCHIVE_FORMATS:
            raise codec.Malformed("archive_format", f"{plan.archive_format!r} is not one of "
                                                    f"{', '.join(ARCHIVE_FORMATS)}")
        for i, it in enumerate(plan.items):
            if it.action not in ITEM_ACTIONS:
                raise codec.Malformed(f"items[{i}].action", f"{it.action!r} is not one of "
                                                            f"{', '.join(ITEM_ACTIONS)}")
        for i, st in enumerate(plan.steps):
            if not STEP_KIND.fullmatch(st.kind):
                raise codec.Malformed(f"steps[{i}].kind", f"not a step kind: {st.kind!r}")
            raw = doc["steps"][i]
            if st.action is not None and (
                    raw.get("argv", list(st.action.command)) != list(st.action.command) or
                    raw.get("where", codec.encode(st.action.where)) !=
                    codec.encode(st.action.where)):
                raise codec.Malformed(f"steps[{i}].argv", f"step {st.id}: its command was "
                                      "edited (a plan file is not a script)")
        return plan

    @classmethod
    def loads(cls, text: str) -> Plan:
        return cls.from_json(codec.load_json(text))


codec.register(Identity, PlanItem, Step, Plan)
