"""Environment and profile files that name the volume: ``/etc/environment``, ``/etc/default/*``,
``/etc/profile`` and ``/etc/profile.d/*``, ``/etc/bash.bashrc``. (``EnvironmentFile=`` files are
reported by the systemd source, with the units that read them.) Standard library only.
"""

from __future__ import annotations

import os
import posixpath

from vacate.observing.collectors.configured.cfgfiles import (
    line_evidence,
    line_sha256,
    list_dir,
    read_text,
)
from vacate.observing.collectors.configured.match import VolumeView, lines_with_paths
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer

FILES = ("/etc/environment", "/etc/profile", "/etc/bash.bashrc", "/etc/zsh/zshenv")
DIRS = ("/etc/default", "/etc/profile.d")
MAX_BYTES = 1 << 20


def paths(host: Host, problems: list[Problem]) -> list[str]:
    out = list(FILES)
    for d in DIRS:
        entries, p = list_dir(host, host.path(d))
        if p:
            problems.append(p)
        # directories in them are not read by anything that reads the files
        out += [posixpath.join(d, os.path.basename(e)) for e in entries if not os.path.isdir(e)]
    return out


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    consumers: list[Consumer] = []
    problems: list[Problem] = []
    for path in paths(host, problems):
        text, p = read_text(host, host.path(path), MAX_BYTES)
        if p:
            problems.append(p)
        if text is None:
            continue
        hits = lines_with_paths(view, text)
        if not hits:
            continue
        evidence = tuple(line_evidence("config-line", h, path, n, line)
                         for n, line, found in hits for _s, h in found)
        consumers.append(Consumer(
            id=f"config-file:{path}", type="config-file", name=path, live=False,
            paths=tuple(sorted({e.path for e in evidence if e.path})), evidence=evidence,
            attrs={"file": path, "format": "environment" if "profile" not in path
                   and "bashrc" not in path else "shell", "lines": [n for n, _l, _f in hits],
                   "line_sha256s": [[n, line_sha256(line)] for n, line, _f in hits]}))
    return tuple(consumers), tuple(problems)
