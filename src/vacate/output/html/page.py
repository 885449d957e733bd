"""The report as one self-contained HTML page (``vacate report SOURCE --html FILE``).

Everything is in the file: the styles and the one script are inlined, the data a script
reads is JSON inside ``<script type="application/json">`` (Jinja2's ``tojson``, which
escapes ``<``, ``>``, ``&`` and ``'``), and a Content-Security-Policy meta tag lets the page
load nothing at all and run only its own script (by its sha256). Every string from the
report goes through Jinja2's autoescape and :func:`report_names.shown`, wrapped in
``<bdi>``: a file name is hostile input. The content is in the HTML (the treemap's tiles
are positioned in percentages by the server side), so the page reads the same with scripts
off; the script adds only drilling into a directory and a panel for the tile clicked.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
from importlib import resources

from vacate.observing.human import human_age, human_bytes, human_duration
from vacate.output.html import treemap
from vacate.output.report_names import Hider, shown

COLOURS = ("active", "referenced", "cold", "disposable", "artifact")
ACTIONS = ("keep", "archive", "delete", "migrate")


def _asset(name: str) -> str:
    return resources.files("vacate.output.html").joinpath(name).read_text(encoding="utf-8")


def _env():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("vacate.output.html", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True)
    env.filters["name"] = shown
    env.filters["bytes"] = human_bytes
    env.filters["duration"] = human_duration
    env.filters["when"] = lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) \
        if t else "-"
    env.filters["age"] = human_age
    return env


def _rows_by_path(doc: dict) -> dict[str, dict]:
    return {r["path"]: r for r in doc["there"]["rows"]}


def _dir_rows(observation) -> list:
    """The scan's drill-down rows (path, apparent, disk, files, dirs, ...) of the source."""
    if observation is None:
        return []
    dirs = observation.inventory.dirs
    rows = getattr(dirs, "rows", None)
    if rows is not None:
        return rows
    return [[d.path, d.stats.apparent_bytes, d.stats.disk_bytes, d.stats.files, d.stats.dirs]
            for d in dirs]


def _maps(doc: dict, observation, hide: bool, limits: dict) -> list[dict]:
    """One treemap by bytes on disk and, where they differ, one by apparent bytes."""
    tops = [dict(r, is_dir=_is_dir(r, observation)) for r in doc["there"]["rows"]]
    rows = _dir_rows(observation)
    out = []
    for key in ("disk_bytes", "apparent_bytes"):
        if key == "apparent_bytes" and all(r["disk_bytes"] == r["apparent_bytes"]
                                           for r in tops):
            break
        out.append(treemap.layout(tops, rows, doc["there"]["inside"], key=key, hide=hide,
                                  **limits))
    return out


def _is_dir(row: dict, observation) -> bool:
    if observation is None:
        return row["kind"] not in ("file", "installer", "env-backup")
    return next((i.is_dir for i in observation.inventory.items if i.path == row["path"]), True)


def _hash(js: str) -> str:
    return base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")


def _users(doc: dict) -> dict[str, list]:
    """Top-level item path -> who uses it and the evidence (what a tile's panel shows)."""
    by_id = {c["id"]: c for c in doc["used"]}
    out: dict[str, list] = {}
    for r in doc["there"]["rows"]:
        out[r["path"]] = [{"name": f"{by_id[u]['type']} {by_id[u]['name']}" if u in by_id
                           else u,
                           "evidence": [e["source"] for e in by_id[u]["evidence"][:8]]
                           if u in by_id else []}
                          for u in r["users"]]
    return out


def _without_labels(doc: dict) -> dict:
    """``doc`` with what the recognisers said of each item (which names what is inside it:
    a model's name is its directory's) reduced to the item's kind."""
    there = dict(doc["there"])
    there["rows"] = [dict(r, label=r["kind"]) for r in there["rows"]]
    there["inside"] = [dict(i, label=i["kind"]) for i in there["inside"]]
    there["items"] = []
    return dict(doc, there=there)


def render(doc: dict, observation=None, *, hide_names: bool = False,
           limits: dict | None = None) -> str:
    """The page of the report ``doc`` (``vacate.report/1``); ``observation`` the one it was
    made from (its drill-down table draws directories inside the items); ``hide_names``:
    names below the top level hidden in every string (see :class:`report_names.Hider`)."""
    started = time.perf_counter()
    target = doc["there"]["volume"]["path"]
    if hide_names:
        doc = Hider(target, [os.path.basename(r["path"]) for r in doc["there"]["rows"]]
                    ).all(_without_labels(doc))
    hider = Hider(target, [os.path.basename(r["path"]) for r in doc["there"]["rows"]]) \
        if hide_names else None
    maps = _maps(doc, observation, hide_names, limits or {})
    js = _asset("report.js")
    steps = doc["done"]["steps"]
    t0 = min((s["started"] or s["ended"] for s in steps if s["started"] or s["ended"]),
             default=None)
    t1 = max((s["ended"] or s["started"] for s in steps if s["started"] or s["ended"]),
             default=None)
    page = _env().get_template("report.html.j2").render(
        doc=doc, maps=maps, rows=_rows_by_path(doc),
        no_row={"status": None, "action": None, "users": []}, css=_asset("report.css"), js=js,
        script_hash=_hash(js), colours=COLOURS, actions=ACTIONS,
        planned=doc["source"] != "observation", hide=hider.text if hider else (lambda s: s),
        data={"users": _users(doc), "source": doc["source"]},
        span=(t0, max((t1 or 0) - (t0 or 0), 1e-3)), now=time.time(),
        built_in=time.perf_counter() - started)
    return page
