"""Environment and profile files that name the volume: ``/etc/environment``, ``/etc/default/*``,
``/etc/profile`` and ``/etc/profile.d/*``, ``/etc/bash.bashrc``. (``EnvironmentFile=`` files are
reported by the systemd source, with the units that read them.) Standard library only.
"""

from __future__ import annotations

import os
import posixpath

from vacate.collectors.configured.match import VolumeView, lines_with_paths
from vacate.host import Host
from vacate.model.common import Problem
from vacate.model.mount import Target
from vacate.model.usage import Consumer, Evidence
from vacate.parsers.redact import redact_text

FILES = ("/etc/environment", "/etc/profile", "/etc/bash.bashrc", "/etc/zsh/zshenv")
DIRS = ("/etc/default", "/etc/profile.d")
MAX_BYTES = 1 << 20


def paths(host: Host) -> list[str]:
    out = list(FILES)
    for d in DIRS:
        try:
            names = sorted(os.listdir(host.path(d)))
        except OSError:
            continue
        out += [posixpath.join(d, n) for n in names
                if os.path.isfile(host.path(posixpath.join(d, n)))]
    return out


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    consumers: list[Consumer] = []
    problems: list[Problem] = []
    for path in paths(host):
        try:
            with open(host.path(path), "rb") as f:
                text = f.read(MAX_BYTES).decode("utf-8", "surrogateescape")
        except FileNotFoundError:
            continue
        except OSError as e:
            problems.append(Problem("unreadable-config", f"cannot read {path}: {e.strerror}",
                                    path=path, blocks_verdict=True))
            continue
        hits = lines_with_paths(view, text)
        if not hits:
            continue
        evidence = tuple(Evidence("config-line", h, f"{path}:{n}", redact_text(line.strip()))
                         for n, line, found in hits for _s, h in found)
        consumers.append(Consumer(
            id=f"config-file:{path}", type="config-file", name=path, live=False,
            paths=tuple(sorted({e.path for e in evidence if e.path})), evidence=evidence,
            attrs={"file": path, "format": "environment" if "profile" not in path
                   and "bashrc" not in path else "shell", "lines": [n for n, _l, _f in hits]}))
    return tuple(consumers), tuple(problems)
