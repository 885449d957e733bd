"""NFS exports configured in ``/etc/exports`` and ``/etc/exports.d/*.exports`` that share a path
on the volume (or a parent of it with ``crossmnt``, which exports the volume as well).
What the kernel exports right now (``etab``) is the live side's. Standard library only.
"""

from __future__ import annotations

import os

from vacate.observing.collectors.configured.cfgfiles import (
    line_evidence,
    line_sha256,
    list_dir,
    read_text,
    spelled,
)
from vacate.observing.collectors.configured.match import VolumeView
from vacate.observing.collectors.configured.resolve import on_volume
from vacate.observing.collectors.mounts import is_under as _under
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer
from vacate.observing.parsers import exports as exports_parser


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    problems: list[Problem] = []
    files = [host.etc_path("exports")]
    more, p = list_dir(host, host.etc_path("exports.d"), ".exports")
    files += more
    if p:
        problems.append(p)
    consumers: list[Consumer] = []
    spellings = [pre for pre, _h in view.prefixes]
    for local in files:
        text, p = read_text(host, local)
        if p:
            problems.append(p)
        if text is None:
            continue
        where = spelled(host, local)
        entries, probs = exports_parser.parse(text, where)
        problems.extend(probs)
        physical = text.splitlines()
        for e in entries:
            h = on_volume(host, view, e.path)
            rel, note = "export", "exports a path on the volume"
            if h is None:
                opts = ",".join(o for _c, o in e.clients).split(",")
                inside = [s for s in spellings if _under(s, os.path.normpath(e.path))]
                if "crossmnt" in opts and inside:
                    h, rel = view.to_host(inside[0]), "crossmnt-parent"
                    note = "exports a parent with crossmnt: the volume is exported too"
            if h is None:
                continue
            attrs = {"file": where, "line": e.line, "export": e.path, "relation": rel,
                     "clients": [{"host": c or "(default)", "options": o}
                                 for c, o in e.clients]}
            if physical[e.line - 1] == e.raw:
                # one line of the file (an entry continued with a backslash has none: taking
                # out its first line would leave the rest as an entry of its own)
                attrs["line_sha256"] = line_sha256(e.raw)
            consumers.append(Consumer(
                f"nfs-export:{where}:{e.line}", "nfs-export", e.path, False, (h,),
                (line_evidence("config-line", h, where, e.line, e.raw, note),), attrs))
    return tuple(consumers), tuple(problems)
