"""Versioned JSON documents.

Paths are Python strings decoded from the kernel's bytes with ``surrogateescape`` (PEP 383):
a byte that is not valid UTF-8 becomes a lone surrogate U+DC80..U+DCFF. JSON is written with
``ensure_ascii=True``, so such a byte appears as the escape ``\\udcXX`` and the document stays
valid ASCII. Reading it back with Python's ``json`` and calling ``os.fsencode(path)`` gives the
exact original bytes; for other readers, ``\\udc80``-``\\udcff`` stand for bytes 0x80-0xff.
"""

from __future__ import annotations

import json

# typing is imported only by type checkers (its import is a measurable part of start-up)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def dumps(doc: dict[str, Any]) -> str:
    """The document laid out for people and line tools alike: the top two levels indented,
    and each element of a list (an item, a consumer, a directory row, a warning) on one line
    of its own. (``indent=`` would send every value through the json module's pure-Python
    encoder, ~25x slower: 0.4 s for the 63,000 directories of a million-file scan.)"""
    return _layout(doc, 0) + "\n"


def _layout(v: Any, depth: int) -> str:
    pad = "  " * (depth + 1)
    if isinstance(v, dict) and v and depth <= 1:
        return "{\n" + ",\n".join(f"{pad}{_compact(str(k))}: {_layout(x, depth + 1)}"
                                  for k, x in v.items()) + "\n" + "  " * depth + "}"
    if isinstance(v, (list, tuple)) and v and depth <= 2:
        return "[\n" + ",\n".join(pad + _compact(x) for x in v) + "\n" + "  " * depth + "]"
    return _compact(v)


def _default(o: Any) -> Any:
    """What the encoder does with the values that are not JSON types."""
    if hasattr(o, "as_json"):
        return o.as_json()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, bytes):
        return o.decode("utf-8", "surrogateescape")
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _compact_encoder():
    """One value on one line: the json module's C encoder, made once (``json.dumps`` makes
    one per call, which costs more than a directory row takes to encode)."""
    c_make = getattr(json.encoder, "c_make_encoder", None)
    if c_make is None:      # a Python without the C accelerator
        return json.JSONEncoder(ensure_ascii=True, separators=(", ", ": "),
                                default=_default).encode
    enc = c_make(None, _default, json.encoder.encode_basestring_ascii, None, ": ", ", ",
                 False, False, True)
    return lambda v: "".join(enc(v, 0))


_compact = _compact_encoder()


def scan_doc(result, dirs: Any = None, host=None) -> dict[str, Any]:
    """``vacate.scan/1``, as a dict (:func:`scan_json` writes it); ``dirs``: what to put in
    the drill-down's place instead of :func:`dir_table` (None: the table); ``host``: the
    :class:`HostFacts` of a scan made elsewhere (``--host``), named in the document."""
    return {
        "schema": "vacate.scan/1",
        **({"host": host_json(host)} if host is not None else {}),
        # paths are UTF-8; a byte that is not valid UTF-8 is the escape \udc80-\udcff (PEP 383)
        "path_encoding": "utf-8+surrogateescape",
        "target": result.target.as_json(),
        "totals": {**result.totals.as_json(), "entries": result.entries},
        "items": [i.as_json() for i in result.items],
        "largest_files": [
            {"path": f.path, "apparent_bytes": f.apparent_bytes, "disk_bytes": f.disk_bytes,
             "mtime": f.mtime, "atime": f.atime, "nlink": f.nlink}
            for f in result.largest_files
        ],
        "dirs": dir_table(result.dirs) if dirs is None else dirs,
        "warnings": [w.as_json() for w in result.warnings],
        "elapsed_s": round(result.elapsed_s, 3),
    }


def scan_json(result, dirs_json: str | None = None, host=None) -> str:
    """:func:`scan_doc` on one line, exactly as ``json.dumps(scan_doc(result),
    ensure_ascii=True)`` writes it; ``dirs_json``: its ``dirs`` already encoded
    (:func:`dir_table_json` of ``result.dirs``, done while the recognisers looked: the same
    JSON, ASCII, without spaces where orjson wrote it)."""
    if dirs_json is None:
        return _compact(scan_doc(result, host=host))
    doc = scan_doc(result, dirs=0, host=host)          # a stand-in, for the place of "dirs"
    keys = list(doc)
    at = keys.index("dirs")
    # the keys before "dirs", then the encoded table, then those after (their order kept)
    head = _compact({k: doc[k] for k in keys[:at]})
    tail = _compact({k: doc[k] for k in keys[at + 1:]})
    return f'{head[:-1]}, "dirs": {dirs_json}, {tail[1:]}'


def dir_table_json(dirs) -> str:
    """:func:`dir_table` encoded for :func:`scan_json`: by orjson, without spaces, when every
    path is ASCII (a fourth of the time: 0.03 s against 0.11 s for a 1M-entry tree's 62,798
    directories, at the end of a scan); otherwise as the rest of the document is written
    (orjson refuses the surrogates that stand for bytes that are not UTF-8, and would write
    other non-ASCII characters as they are where the rest of the document escapes them)."""
    table = dir_table(dirs)
    try:
        import orjson

        fast = orjson.dumps(table)
    except (ImportError, TypeError):        # (orjson.JSONEncodeError is a TypeError)
        fast = None
    if fast is not None and fast.isascii():
        return fast.decode("ascii")
    return _compact(table)


# (times in the drill-down: integer nanoseconds, exact; in items and totals: float seconds)
DIR_COLUMNS = ("path", "apparent_bytes", "disk_bytes", "files", "dirs", "newest_mtime_ns",
               "newest_atime_ns")


def dir_table(dirs) -> dict[str, Any]:
    """The scan's drill-down, one row per directory under a ``columns`` header (a scan of
    millions of files has tens of thousands of directories: rows are half the size of
    records, and quicker to write and to read)."""
    rows = getattr(dirs, "rows", None)     # model.walk.DirTable: the rows as they are
    if rows is None:
        rows = [[d.path, d.stats.apparent_bytes, d.stats.disk_bytes, d.stats.files,
                 d.stats.dirs, _ns(d.stats.newest_mtime), _ns(d.stats.newest_atime)]
                for d in dirs]
    return {"columns": list(DIR_COLUMNS), "rows": rows}


def _ns(t: float | None) -> int | None:
    return None if t is None else round(t * 1e9)


def unanswered_check_doc(target, why) -> dict[str, Any]:
    """``vacate.check/1`` for a target whose filesystem does not answer: the target as
    mountinfo tells it, no items or consumers, ``safe_to_unmount`` null and ``why`` (a
    Problem) as the warning that makes it so."""
    from vacate.observing.model.usage import Verdict

    return {
        "schema": "vacate.check/1",
        "target": target.as_json(),
        "verdict": verdict_json(Verdict(None, (), (why,))),
        "items": [],
        "whole_volume": [],
        "consumers": [],
        "warnings": [why.as_json()],
        "scanned": False,
    }


def verdict_json(v) -> dict[str, Any]:
    """A verdict: each blocker with its next actions as values (``actions``) and as the line
    a person reads (``action``)."""
    from vacate.observing.model.sentence import render

    return {
        "safe_to_unmount": v.safe_to_unmount,
        "blockers": [{"consumer": b.consumer, "reason": b.reason, "action": render(b.actions),
                      "actions": [a.to_json() for a in b.actions]} for b in v.blockers],
        "unknowns": [u.as_json() for u in v.unknowns],
    }


def consumer_json(c, by_id) -> dict[str, Any]:
    """A consumer with its evidence, and what would end its use of the volume (``action``)."""
    from vacate.output.next_steps import for_consumer

    d = c.as_json()
    d["action"] = for_consumer(c, by_id)
    return d


def _codec():
    from vacate.observing.model import codec

    return codec


def host_json(facts) -> dict[str, Any] | None:
    """The machine a document is about: its name and machine id, and how it was reached
    (``via``: null here, ``user@host`` over ssh, ``CT 129`` inside a container)."""
    if facts is None:
        return None
    return {"name": facts.hostname, "machine_id": facts.machine_id or None,
            "via": facts.via or None}


def check_doc(result) -> dict[str, Any]:
    """``vacate.check/1``: the target, the verdict, every item with its status and users, every
    consumer with its evidence, and the warnings."""
    by_id = {c.id: c for c in result.consumers}
    items = []
    for u in result.items:
        it = u.item
        c = it.classification
        d = {"id": it.id, "path": it.path, "parent": it.parent,
             "kind": c.kind if c else ("directory" if it.is_dir else "file"),
             "label": c.label if c else ("directory" if it.is_dir else "file"),
             "recoverable": c.recoverable if c else None,
             "status": u.status}
        d.update(it.stats.as_json())
        d["users"] = list(u.users)
        items.append(d)
    return {
        "schema": "vacate.check/1",
        "host": host_json(result.host),
        **({"ct": _codec().encode(result.ct)} if result.ct is not None else {}),
        "target": result.target.as_json(),
        "verdict": verdict_json(result.verdict),
        "items": items,
        "whole_volume": list(result.whole_volume),
        "consumers": [consumer_json(c, by_id) for c in result.consumers],
        "warnings": [w.as_json() for w in result.warnings],
        "scanned": result.scanned,
        "elapsed_s": round(result.elapsed_s, 3),
    }
