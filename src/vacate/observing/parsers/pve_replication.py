"""Proxmox VE ``/etc/pve/replication.cfg`` (storage replication, ``pvesr``): its jobs.

A job is a section ``TYPE: GUEST-JOBNUM`` (pve-guest-common ReplicationConfig
``parse_section_header``: ``^(\\S+):\\s*(\\d+)-(\\d+)\\s*$``) followed by indented ``key
value`` lines (``target``, ``schedule``, ``disable``...); ``#`` lines are comments. A guest
with any job is replicated (``check_for_existing_jobs`` asks no more). Pure: text in, values
out; standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem
from vacate.observing.parsers.redact import shown_text

_HEADER = re.compile(r"^(\S+):\s*(\d+)-(\d+)\s*$")


@dataclass(frozen=True, **SLOTS)
class Job:
    """One replication job: its type (``local``), id (``129-0``), guest, properties, line."""

    type: str
    id: str
    guest: int
    props: dict[str, str] = field(default_factory=dict)
    line: int = 0


def parse(text: str, source: str = "replication.cfg") -> tuple[tuple[Job, ...],
                                                                 tuple[Problem, ...]]:
    jobs: list[Job] = []
    problems: list[Problem] = []
    cur: list | None = None          # [type, guest, subid, line, props]

    def close() -> None:
        if cur is not None:
            jobs.append(Job(cur[0], f"{cur[1]}-{cur[2]}", cur[1], dict(cur[4]), cur[3]))

    for n, t in enumerate(text.splitlines(), 1):
        s = t.strip()
        if not s or s.startswith("#"):
            continue
        if not t[:1].isspace():
            close()
            m = _HEADER.match(s)
            if m is None:
                problems.append(Problem("malformed-config", "not a 'type: guest-jobnum' "
                                        f"line: {shown_text(s, 120)!r}", f"{source}:{n}"))
                cur = None
                continue
            cur = [m.group(1).lower(), int(m.group(2)), int(m.group(3)), n, {}]
            continue
        if cur is None:
            continue                 # a property of a section already named as malformed
        key, _, value = s.partition(" ")
        cur[4][key] = value.strip()
    close()
    return tuple(jobs), tuple(problems)


def jobs_of(jobs: tuple[Job, ...], vmid: int) -> list[str]:
    """The ids of the guest's jobs (``check_for_existing_jobs``: any job whose guest it is)."""
    return [j.id for j in jobs if j.guest == vmid]
