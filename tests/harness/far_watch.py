"""Watching vacate's far side from a test: :func:`wrapper` makes a ``--python`` that runs the
far side under :mod:`harness.far_python` (forks, warnings, resource use logged; a worker
stopped or a walk slowed on request), :func:`events` reads its log, and :func:`far_processes`
finds far-side processes still alive on this machine (the bootstrap's command line marks them,
or :mod:`harness.far_python`'s where it runs an Ansible module); :func:`none_left` waits a
little for them to go.
"""

from __future__ import annotations

import json
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WATCHER = os.path.join(HERE, "far_python.py")
STAGE_MARK = "exec(base64.b64decode("


def wrapper(directory: str, python: str, modes: str = "") -> tuple[str, str]:
    """A shell script in ``directory`` that runs ``python`` on :mod:`harness.far_python`
    with ``modes``; (its path for ``--python``, the log's path)."""
    os.makedirs(directory, exist_ok=True)
    log = os.path.join(directory, "far.log")
    script = os.path.join(directory, "far-python")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\nexec {python} -I -S {WATCHER} {log} '{modes}' \"$@\"\n")
    os.chmod(script, 0o755)
    return script, log


def events(log: str, kind: str | None = None) -> list[dict]:
    """The log's events (of ``kind`` where given), in order."""
    try:
        with open(log) as f:
            out = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return [e for e in out if kind is None or e.get("event") == kind]


def ppid(pid: int) -> int:
    """The parent of ``pid`` (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def descends(pid: int, ancestor: int) -> bool:
    while pid > 1:
        pid = ppid(pid)
        if pid == ancestor:
            return True
    return False


def far_processes(mark: str | None = None, under: int | None = None) -> list[int]:
    """The far-side processes alive here (supervisor, worker, walkers: the bootstrap's command
    line is their mark; not the ssh client that carries it); with ``mark``, only those whose
    command line also holds it (a :func:`wrapper`'s log: one test's, not another run's);
    with ``under``, only those started under that process (a test's own sshd)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        watched = any(STAGE_MARK in a for a in argv) or WATCHER in argv    # (an Ansible module)
        if watched and "ssh" not in os.path.basename(argv[0]) \
                and (mark is None or mark in argv) \
                and (under is None or descends(int(pid), under)):
            out.append(int(pid))
    return out


def none_left(log: str, within: float = 10.0) -> None:
    """No far process of a test's (its wrapper's ``log`` marks them) is left, ``within``
    seconds at most after the command that started them ended."""
    deadline = time.monotonic() + within
    while far_processes(log) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not far_processes(log), far_processes(log)


def worker_forks(log: str, by: str) -> list[dict]:
    """The forks the far worker (a ``vacate.volume`` module's worker too) made from module
    ``by`` (``popen_fork.py``: the walk's pool, ``sidebyside.py``: the recognisers,
    ``delete.py``: the delete)."""
    forks = events(log, "fork")
    workers = {e["child"] for e in forks if e["pid"] not in {f["child"] for f in forks}}
    return [e for e in forks if e["pid"] in workers and e["by"] == by]
