"""What observing a volume saw: the one input of every decision.

An :class:`Observation` holds everything deciding needs (the target and its mount identity,
the inventory, every consumer with its evidence and state, every problem met) and nothing
tied to the machine that made it (no temp-file-backed listings). It round-trips losslessly
through ``vacate.observation/1`` JSON, so it can be saved, sent from another host, decided on
later, and compared with a later observation of the same volume.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model import codec
from vacate.observing.model.common import Problem
from vacate.observing.model.dataset import DatasetFacts, ZfsSnapshot
from vacate.observing.model.inventory import (
    Classification,
    DirSummary,
    FileEntry,
    Item,
    ScanResult,
    Stats,
)
from vacate.observing.model.mount import LoopBacking, Mount, Target
from vacate.observing.model.usage import Consumer, ContainerRoot, Evidence
from vacate.observing.model.walk import DirTable

SCHEMA = "vacate.observation/1"
SCHEMA_FAMILY = "vacate.observation/"


@dataclass(frozen=True, **SLOTS)
class HostFacts:
    """The machine that observed: its name, kernel, boot id and when it looked (POSIX
    seconds), and the vacate version that looked."""

    hostname: str = ""
    kernel: str = ""
    boot_id: str = ""
    observed_at: float = 0.0
    vacate_version: str = ""
    machine_id: str = ""
    via: str = ""               # how it was reached: "" here, "root@pve" over ssh, "CT 129"
    ssh: str = ""               # over ssh: [USER@]HOST[:PORT] as given, to reach it again
    python: str = ""            # over ssh: the far interpreter named (--python)
    become: bool = False        # over ssh: through sudo -n (--become)


@dataclass(frozen=True, **SLOTS)
class CtView:
    """How container ``ctid`` spells the path looked at (``path``) and where the host has the
    same directory (``host_path``); ``running`` with its init's host pid, or stopped;
    ``how`` the mapping's evidence; ``config_sha256`` the config it was read from."""

    ctid: str
    path: str
    host_path: str
    running: bool
    init_pid: int | None
    how: str
    config: str
    config_sha256: str


@dataclass(frozen=True, **SLOTS)
class Destination:
    """A place off the volume that a plan writes to (``--archive-to``, a ``--migrate``
    destination) as the machine saw it when the plan was made: its free bytes (None: not
    known), how the ``--ct`` container spells it (``inside``; "" without one), and, where the
    archive is written by another host's python3, that host's ``zstd`` command (None: not
    looked for; "": it has none)."""

    path: str
    free_bytes: int | None = None
    inside: str = ""
    zstd: str | None = None


@dataclass(frozen=True, **SLOTS)
class Observation:
    """One look at a volume. ``inventory``: the walk (``scanned``) or a listing of the top
    level; ``users``: whether consumers were looked for at all (a scan is an observation
    without users); ``configured``: whether configured users (unit files, fstab, containers)
    were read. ``consumers`` and ``problems`` are what the collectors returned, in their
    order; ``containers`` the running containers seen from the host; ``destinations`` what
    a plan saw of the places it writes to (none for a plain observation); ``dataset`` what
    freeing the volume's ZFS dataset depends on (looked at by a plan that frees it)."""

    target: Target
    inventory: ScanResult
    scanned: bool = True
    users: bool = True
    configured: bool = True
    consumers: tuple[Consumer, ...] = ()
    problems: tuple[Problem, ...] = ()
    containers: tuple[ContainerRoot, ...] = ()
    host: HostFacts = HostFacts()
    elapsed_s: float = 0.0
    ct: CtView | None = None        # --ct: the container's path and the host's
    destinations: tuple[Destination, ...] = ()   # plan: where it writes, off the volume
    dataset: DatasetFacts | None = None   # plan --free-volume: the dataset's snapshots etc.

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "path_encoding": "utf-8+surrogateescape",
                **codec.encode(self)}

    def dumps(self) -> str:
        """The document as text (one line; paths' undecodable bytes as ``\\udcXX``)."""
        return json.dumps(self.to_json(), ensure_ascii=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, doc) -> Observation:
        """The observation ``doc`` holds; :class:`codec.Malformed` when it is not one this
        version can read (another schema, a newer one, or a broken document)."""
        if not isinstance(doc, dict):
            raise codec.Malformed("", "not a vacate observation (expected a JSON object)")
        schema = doc.get("schema")
        if not isinstance(schema, str) or not schema.startswith(SCHEMA_FAMILY):
            raise codec.Malformed("schema", f"not a vacate observation ({schema!r}; "
                                            f"expected {SCHEMA!r})")
        if schema != SCHEMA:
            raise codec.Malformed("schema", f"{schema!r} is not readable by this version "
                                            f"of vacate (it reads {SCHEMA!r})")
        return codec.decode(cls, doc)

    @classmethod
    def loads(cls, text: str) -> Observation:
        return cls.from_json(codec.load_json(text))


def _scan_fields(self: ScanResult) -> dict:
    """A scan as the observation keeps it: the drill-down as rows under a ``columns``
    header (as ``vacate.scan/1`` writes it, times in exact nanoseconds), no listing."""
    rows = getattr(self.dirs, "rows", None)
    if rows is None:
        rows = [[d.path, d.stats.apparent_bytes, d.stats.disk_bytes, d.stats.files,
                 d.stats.dirs, _ns(d.stats.newest_mtime), _ns(d.stats.newest_atime)]
                for d in self.dirs]
    # rows hold JSON values already (a str path, ints or None): copied, not walked through
    # codec.encode (~8 calls a row; 0.4 s for a volume of 63,000 directories)
    return {"target": codec.encode(self.target), "totals": codec.encode(self.totals),
            "items": codec.encode(self.items), "dirs": {"columns": list(DIR_COLUMNS),
                                                        "rows": [list(r) for r in rows]},
            "largest_files": codec.encode(self.largest_files),
            "warnings": codec.encode(self.warnings), "elapsed_s": self.elapsed_s,
            "entries": self.entries}


DIR_COLUMNS = ("path", "apparent_bytes", "disk_bytes", "files", "dirs", "newest_mtime_ns",
               "newest_atime_ns")
_ROW = "tuple[str, int, int, int, int, int | None, int | None]"


def _ns(t: float | None) -> int | None:
    return None if t is None else round(t * 1e9)


def _rows_checked(rows):
    """The drill-down's rows when every one is ``[str, int, int, int, int, int|None,
    int|None]`` (checked in one pass: a million-file volume has tens of thousands), else
    None."""
    if not isinstance(rows, list):
        return None
    for r in rows:
        if type(r) is not list or len(r) != 7 or type(r[0]) is not str:
            return None
        a, b, c, d, e, f = r[1:]
        if not (type(a) is int and type(b) is int and type(c) is int and type(d) is int
                and (type(e) is int or e is None) and (type(f) is int or f is None)):
            return None
    return rows


def _scan_decode(data, where: str) -> dict:
    if not isinstance(data, dict):
        raise codec.Malformed(where, "expected an object for the inventory")
    dirs = data.get("dirs")
    at = f"{where}.dirs"
    if not isinstance(dirs, dict) or dirs.get("columns") != list(DIR_COLUMNS):
        raise codec.Malformed(at, f"expected {{'columns': {list(DIR_COLUMNS)}, 'rows': [...]}}")
    rows = _rows_checked(dirs.get("rows"))
    if rows is None:        # the generic decoder names what is wrong, and where
        rows = [list(r) for r in codec._value(f"tuple[{_ROW}, ...]", dirs.get("rows"),
                                              f"{at}.rows")]
    fields = codec.fields_of(ScanResult, {**data, "dirs": []}, where)
    fields["dirs"] = DirTable(rows)
    fields["listing"] = None
    return fields


def _observation_fields(self: Observation) -> dict:
    """An observation's fields, ``destinations`` left out when there are none and
    ``dataset`` when not looked at: a document made before they were recorded (an
    observation, a plan holding one) is written back byte for byte."""
    out = {f.name: codec.encode(getattr(self, f.name)) for f in dataclasses.fields(self)}
    if not out["destinations"]:
        del out["destinations"]
    if out["dataset"] is None:
        del out["dataset"]
    return out


ScanResult.encode_fields = _scan_fields          # (slots classes take class attributes)
Observation.encode_fields = _observation_fields
ScanResult.decode_fields = staticmethod(_scan_decode)
codec.register(Mount, LoopBacking, Target, Stats, Classification, DirSummary, FileEntry, Item, ScanResult,
               Problem, Evidence, Consumer, ContainerRoot, HostFacts, CtView, Destination,
               ZfsSnapshot, DatasetFacts, Observation)
