"""Cron jobs that name the volume: ``/etc/crontab``, ``/etc/cron.d/*``, the spools
(``/var/spool/cron/crontabs/*`` on Debian, ``/var/spool/cron/*`` on Red Hat), ``/etc/anacrontab``
and the run-parts scripts in ``/etc/cron.{hourly,daily,weekly,monthly}``. Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import posixpath

from vacate.observing.collectors.configured.cfgfiles import line_evidence, list_dir, read_text
from vacate.observing.collectors.configured.match import VolumeView, lines_with_paths
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer
from vacate.observing.parsers import crontab
from vacate.observing.parsers.redact import bound, redact_text

SPOOLS = ("/var/spool/cron/crontabs", "/var/spool/cron")
RUN_PARTS = ("hourly", "daily", "weekly", "monthly")
MAX_BYTES = 1 << 20


def _files(host: Host, d: str, problems: list[Problem]) -> list[str]:
    """The crontabs of a directory: regular files not starting with a dot (cron itself skips
    the rest); an unreadable directory is a problem."""
    entries, p = list_dir(host, host.path(d))
    if p:
        problems.append(p)
    out = []
    for local in entries:
        n = os.path.basename(local)
        if not n.startswith(".") and os.path.isfile(local):
            out.append(posixpath.join(d, n))
    return out


def _read(host: Host, path: str, problems: list[Problem]) -> str | None:
    text, p = read_text(host, host.path(path), MAX_BYTES)
    if p:
        problems.append(p)
    return text


def _consumer(path: str, line: int, text: str, found: list[tuple[str, str]],
              attrs: dict) -> Consumer:
    shown = redact_text(text.strip())
    who = attrs.get("user") or "?"
    return Consumer(
        id=f"cron:{path}:{line}", type="cron", name=f"{who}: {bound(shown, 80)}", live=False,
        paths=tuple(sorted({h for _s, h in found})),
        evidence=tuple(line_evidence("config-line", h, path, line, text) for _s, h in found),
        attrs={"file": path, "line": line, **attrs,
               "line_sha256": hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()})


def _tables(host: Host, problems: list[Problem]) -> list[tuple[str, str, str | None]]:
    """(path, format, user) of every crontab: system, user, anacron."""
    out: list[tuple[str, str, str | None]] = [("/etc/crontab", "system", None)]
    out += [(p, "system", None) for p in _files(host, "/etc/cron.d", problems)]
    seen: set[str] = set()
    for spool in SPOOLS:
        for p in _files(host, spool, problems):
            if p not in seen:
                seen.add(p)
                out.append((p, "user", posixpath.basename(p)))
    out.append(("/etc/anacrontab", "anacron", "root"))
    return out


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    consumers: list[Consumer] = []
    problems: list[Problem] = []
    for path, fmt, user in _tables(host, problems):
        text = _read(host, path, problems)
        if text is None:
            continue
        if fmt == "anacron":
            lines, _warn = crontab.parse_anacrontab(text)
        else:
            lines, _warn = crontab.parse(text, system=fmt == "system")
        for cl in lines:
            found = view.paths_in_text(cl.command)
            if found:
                consumers.append(_consumer(path, cl.line, cl.text, found, {
                    "user": cl.user or user, "schedule": cl.schedule, "entry": cl.kind,
                    "crontab": fmt}))
    for period in RUN_PARTS:
        for path in _files(host, f"/etc/cron.{period}", problems):
            text = _read(host, path, problems)
            for n, line, found in lines_with_paths(view, text or ""):
                consumers.append(_consumer(path, n, line, found, {
                    "user": "root", "schedule": f"@{period}", "entry": "script",
                    "crontab": "run-parts"}))
    return tuple(consumers), tuple(problems)
