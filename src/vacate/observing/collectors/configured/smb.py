"""Samba shares whose ``path`` is on the volume, and other smb.conf parameters naming it
(``root preexec``, ``log file``, ``usershare path``...), from ``/etc/samba/smb.conf`` and the
files it includes; user shares from ``/var/lib/samba/usershares``. Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import re

from vacate.observing.collectors.configured.cfgfiles import (
    line_evidence,
    list_dir,
    read_text,
    spelled,
)
from vacate.observing.collectors.configured.match import VolumeView
from vacate.observing.collectors.configured.resolve import on_volume
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer, Evidence
from vacate.observing.parsers import smb_conf
from vacate.observing.parsers.redact import shown_text
from vacate.observing.parsers.smb_conf import SmbParam

MAX_INCLUDES = 16
USERSHARES = "/var/lib/samba/usershares"


def _yes(value: str) -> bool:
    return value.strip().lower() in ("yes", "true", "1", "on")


def _read_all(host: Host, local: str, problems: list[Problem], seen: set[str],
              section: str | None = None) -> list[tuple[str, SmbParam]]:
    """Every parameter of ``local`` and what it includes, in order, with its file."""
    if local in seen or len(seen) > MAX_INCLUDES:
        return []
    seen.add(local)
    text, p = read_text(host, local)
    if p:
        problems.append(p)
    if text is None:
        return []
    where = spelled(host, local)
    params, probs = smb_conf.parse(text, where)
    problems.extend(probs)
    out: list[tuple[str, SmbParam]] = []
    for prm in params:
        if section is not None and prm.section == "global":
            # an included file continues the section it was included from
            prm = SmbParam(prm.line, section, prm.name, prm.value, prm.raw)
        if prm.name == "include":
            if "%" in prm.value:
                problems.append(Problem(
                    "unresolved-include", f"include with substitutions not followed: "
                    f"{shown_text(prm.value)}", f"{where}:{prm.line}"))
                continue
            out += _read_all(host, host.path(prm.value), problems, seen, prm.section)
            continue
        out.append((where, prm))
    return out


def _usershares(host: Host, view: VolumeView, problems: list[Problem]) -> list[Consumer]:
    files, p = list_dir(host, host.path(USERSHARES))
    if p:
        problems.append(p)
    out = []
    for f in files:
        text, p = read_text(host, f)
        if p:
            problems.append(p)
        for n, line in enumerate((text or "").splitlines(), 1):
            k, _, v = line.partition("=")
            h = on_volume(host, view, v.strip()) if k.strip() == "path" else None
            if h is not None:
                name = os.path.basename(f)
                out.append(Consumer(f"smb-share:{name}", "smb-share", name, False, (h,),
                                    (line_evidence("config-line", h, spelled(host, f), n, line,
                                                   "user share on the volume"),),
                                    {"usershare": True}))
    return out


def _section_lines(host: Host, name: str, items) -> tuple[str, list] | None:
    """Where a share is written, to comment it out whole: its file (as the host spells it)
    and each line of its section, from the ``[name]`` header to the line before the next
    header, that is not blank or a comment, as ``[number, sha256 of the raw line]``. None
    when its parameters are spread over several files (includes)."""
    files = {where for where, _prm in items}
    if len(files) != 1:
        return None
    where = files.pop()
    local = host.path(where)
    text, _p = read_text(host, local)
    if text is None:
        return None
    raw = os.fsencode(text).split(b"\n")
    first = min(prm.line for _w, prm in items)
    header = re.compile(rb"\s*\[\s*" + re.escape(os.fsencode(name)) + rb"\s*\]", re.IGNORECASE)
    head = next((i for i in range(first - 1, 0, -1) if header.match(raw[i - 1])), None)
    if head is None:
        return None
    out = []
    for n in range(head, len(raw) + 1):
        line = raw[n - 1].rstrip(b"\r")
        if n > head and line.lstrip().startswith(b"["):
            break
        if line.strip() and line.lstrip()[:1] not in (b"#", b";"):
            out.append([n, hashlib.sha256(raw[n - 1].rstrip(b"\r")).hexdigest()])
    return where, out


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    problems: list[Problem] = []
    params = _read_all(host, host.etc_path("samba", "smb.conf"), problems, set())
    sections: dict[str, list[tuple[str, SmbParam]]] = {}
    for where, prm in params:
        sections.setdefault(prm.section, []).append((where, prm))
    consumers: list[Consumer] = []
    for name, items in sections.items():
        ev: list[Evidence] = []
        paths: list[str] = []
        relations: list[str] = []
        settings = {prm.name: prm.value for _w, prm in items}
        for where, prm in items:
            if prm.name == "path":
                h = on_volume(host, view, prm.value.rstrip("/") or "/")
                if h is not None:
                    relations.append("share-path")
                    paths.append(h)
                    ev.append(line_evidence("config-line", h, where, prm.line, prm.raw,
                                            "share path on the volume"))
                continue
            for tok, h in view.paths_in_text(prm.value):
                relations.append("config-path")
                paths.append(h)
                ev.append(line_evidence("config-line", h, where, prm.line, prm.raw,
                                        f"{prm.name} names {tok}"))
        if not ev:
            continue
        if name.lower() == "global":
            where = spelled(host, host.etc_path("samba", "smb.conf"))
            consumers.append(Consumer(f"config-file:{where}", "config-file", where, False,
                                      tuple(dict.fromkeys(paths)), tuple(ev),
                                      {"section": "global"}))
            continue
        ro, writable = settings.get("readonly"), settings.get("writable")
        read_only = _yes(ro) if ro is not None else \
            (not _yes(writable) if writable is not None else True)   # Samba's default
        attrs = {"relations": list(dict.fromkeys(relations)),
                 "available": _yes(settings.get("available", "yes")), "read_only": read_only}
        section = _section_lines(host, name, items)
        if section is not None:
            attrs["file"], attrs["section_lines"] = section
        consumers.append(Consumer(
            f"smb-share:{name}", "smb-share", name, False, tuple(dict.fromkeys(paths)),
            tuple(ev), attrs))
    consumers += _usershares(host, view, problems)
    return tuple(consumers), tuple(problems)
