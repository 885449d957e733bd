"""A fleet's answers as ``vacate.check/1`` documents, one per host, each naming its host
(``inventory_hostname``, as Ansible calls it, beside ``host``). A host that could not be looked
at is a document too: ``safe_to_unmount`` null, the reason as its one warning, and ``error``
(``kind``, ``message``, ``hint``)."""

from __future__ import annotations

import os
import re

from vacate.output import jsonfmt

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def host_doc(check, path: str) -> dict[str, Any]:
    """The document for one host's :class:`~vacate.flow.fleet.HostCheck`."""
    if check.result is not None:
        doc = jsonfmt.check_doc(check.result)
        return {"schema": doc.pop("schema"), "inventory_hostname": check.name, **doc}
    from vacate.observing.model.common import Problem

    why = Problem(check.code, check.error or "", path, blocks_verdict=True)
    if check.unanswered is not None:
        doc = jsonfmt.unanswered_check_doc(check.unanswered, why)
    else:
        doc = jsonfmt.unanswered_check_doc(_Unseen(path), why)
    doc = {"schema": doc.pop("schema"), "inventory_hostname": check.name,
           "host": {"name": None, "machine_id": None, "via": check.label}, **doc}
    doc["error"] = {"kind": check.kind, "message": check.error, "hint": check.hint}
    return doc


class _Unseen:
    """The target of a host never reached: its path, nothing else known."""

    def __init__(self, path: str):
        self.path = path

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "mountpoint": None, "source": None, "fstype": None}


def file_names(names: list[str]) -> list[str]:
    """A file name for each host's document (``NAME.json``): inventory names are data, so
    what a file name cannot hold (``/``, a leading ``.``, control characters) becomes ``_``,
    and names that come out alike are told apart by a number."""
    out, seen = [], set()
    for name in names:
        base = re.sub(r"[^A-Za-z0-9._@:+=-]", "_", name).lstrip(".") or "_"
        base = base[:200]
        candidate, n = base, 1
        while candidate.lower() in seen:
            n += 1
            candidate = f"{base}.{n}"
        seen.add(candidate.lower())
        out.append(candidate + ".json")
    return out


def write_dir(directory: str, docs: list[dict]) -> list[str]:
    """Write one document per host into ``directory`` (made if missing), crash-safe; the
    paths written."""
    from vacate.observing.fsio import write_atomic

    os.makedirs(directory, exist_ok=True)
    paths = []
    for doc, name in zip(docs, file_names([d["inventory_hostname"] for d in docs])):
        p = os.path.join(directory, name)
        write_atomic(p, jsonfmt.dumps(doc).encode("utf-8"))
        paths.append(p)
    return paths
