"""Proxmox VE ``/etc/pve/replication.cfg`` (storage replication, ``pvesr``): its jobs.

The file is a SectionConfig as ``storage.cfg`` is (read by :func:`pve_storage.parse`): a job
is a section ``TYPE: GUEST-JOBNUM`` (pve-guest-common ReplicationConfig
``parse_section_header``: ``^(\\S+):\\s*(\\d+)-(\\d+)\\s*$``) with indented ``key value`` lines
(``target``, ``schedule``, ``disable``...). A guest with any job is replicated
(``check_for_existing_jobs`` asks no more). Pure: text in, values out; standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vacate.observing.compat import SLOTS
from vacate.observing.model.common import Problem
from vacate.observing.parsers import pve_storage


@dataclass(frozen=True, **SLOTS)
class Job:
    """One replication job: its type (``local``), id (``129-0``), guest, properties, line."""

    type: str
    id: str
    guest: int
    props: dict[str, str] = field(default_factory=dict)
    line: int = 0


_JOB_ID = re.compile(r"^(\d+)-(\d+)$")


def parse(text: str, source: str = "replication.cfg") -> tuple[tuple[Job, ...],
                                                                 tuple[Problem, ...]]:
    sections, problems = pve_storage.parse(text, source)
    jobs, more = [], list(problems)
    for s in sections.values():
        m = _JOB_ID.match(s.id)
        if m is None:
            more.append(Problem("malformed-config", f"not a replication job id: {s.id!r}",
                                f"{source}:{s.line}"))
            continue
        jobs.append(Job(s.type.lower(), f"{int(m.group(1))}-{int(m.group(2))}",
                        int(m.group(1)), dict(s.props), s.line))
    return tuple(jobs), tuple(more)


def jobs_of(jobs: tuple[Job, ...], vmid: int) -> list[str]:
    """The ids of the guest's jobs (``check_for_existing_jobs``: any job whose guest it is)."""
    return [j.id for j in jobs if j.guest == vmid]
