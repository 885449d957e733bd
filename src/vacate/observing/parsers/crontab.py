"""crontab(5) and anacrontab(5) files, parsed as cron reads them.

A system crontab (``/etc/crontab``, ``/etc/cron.d/*``) has a user field after the schedule; a
user's crontab (the spool) does not. Lines are comments (``#``), environment settings
(``NAME = value``), or jobs: five time fields or an ``@reboot``/``@daily``-style nickname, then
the command (``%`` starts its standard input). Anacrontab jobs are ``period delay job-id
command``. Pure, standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.parsers.redact import shown_text

_ENV = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
NICKNAMES = frozenset({"@reboot", "@yearly", "@annually", "@monthly", "@weekly", "@daily",
                       "@midnight", "@hourly"})
_FIELD = re.compile(r"^[0-9A-Za-z*/,\-~]+$")


@dataclass(frozen=True, **SLOTS)
class CronLine:
    """One job or environment line of a crontab."""
    line: int
    kind: str              # "job" or "env"
    schedule: str          # "*/5 * * * *", "@reboot", anacron "1 5 job-id"; "" for env
    user: str | None       # system crontabs name the user; None in a user's crontab
    command: str           # the command (jobs) or NAME=value (env)
    text: str              # the line as written (redact before showing)


def _unquote(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    return v


def _env_line(n: int, m: re.Match, raw: str) -> CronLine:
    """``NAME=value`` (quotes removed) as an environment line."""
    return CronLine(n, "env", "", None, f"{m.group(1)}={_unquote(m.group(2))}", raw)


def _content(text: str):
    """(line number, raw line, stripped line) of each line that is neither blank nor a
    comment."""
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if s and not s.startswith("#"):
            yield n, raw, s


def parse(text: str, *, system: bool) -> tuple[tuple[CronLine, ...], tuple[str, ...]]:
    """A crontab: its jobs and environment lines, and warnings for lines that are neither."""
    out: list[CronLine] = []
    warnings: list[str] = []
    for n, raw, s in _content(text):
        m = _ENV.match(s)
        if m:
            out.append(_env_line(n, m, raw))
            continue
        parts = s.split(None, 1)
        if parts[0] in NICKNAMES or (parts[0].startswith("@") and parts[0][1:].isdigit()):
            schedule, rest = parts[0], parts[1] if len(parts) > 1 else ""
        else:
            fields = s.split(None, 5)
            if len(fields) < 6 or not all(_FIELD.match(f) for f in fields[:5]):
                warnings.append(f"line {n}: not a cron job: {shown_text(s, 80)!r}")
                continue
            schedule, rest = " ".join(fields[:5]), fields[5]
        user = None
        if system:
            u = rest.split(None, 1)
            if len(u) < 2:
                warnings.append(f"line {n}: no user or no command: {shown_text(s, 80)!r}")
                continue
            user, rest = u
        out.append(CronLine(n, "job", schedule, user, rest.strip(), raw))
    return tuple(out), tuple(warnings)


def parse_anacrontab(text: str) -> tuple[tuple[CronLine, ...], tuple[str, ...]]:
    """``period delay job-id command`` jobs (run as root) and environment lines."""
    out: list[CronLine] = []
    warnings: list[str] = []
    for n, raw, s in _content(text):
        m = _ENV.match(s)
        f = s.split(None, 3)
        if m and not (len(f) == 4 and (f[0].isdigit() or f[0].startswith("@"))):
            out.append(_env_line(n, m, raw))
            continue
        if len(f) < 4 or not (f[0].isdigit() or f[0] in NICKNAMES) or not f[1].isdigit():
            warnings.append(f"line {n}: not an anacron job: {shown_text(s, 80)!r}")
            continue
        out.append(CronLine(n, "job", " ".join(f[:3]), "root", f[3], raw))
    return tuple(out), tuple(warnings)
