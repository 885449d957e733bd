"""The filesystems the running system lives on, by device: a plan never retires one of
them (``check`` may still audit it). The ``st_dev`` of ``/``, ``/usr``, ``/var``, ``/boot``,
``/boot/efi``, PID 1's root, the interpreter's ``sys.prefix`` and vacate's own files."""

from __future__ import annotations

import os
import sys

from vacate.observing.host import Host

SYSTEM_PATHS = ("/", "/usr", "/var", "/boot", "/boot/efi")


def system_devices(host: Host) -> dict[int, list[str]]:
    """Device -> what of the running system is on it (paths that cannot be read are left
    out: the others still count)."""
    import vacate

    where = [(p, host.path(p)) for p in SYSTEM_PATHS]
    where.append(("PID 1's root", host.proc_path(1, "root") + "/"))
    if host.live:
        where += [(f"this Python ({sys.prefix})", sys.prefix),
                  (f"vacate itself ({os.path.dirname(vacate.__file__)})",
                   os.path.dirname(vacate.__file__))]
    out: dict[int, list[str]] = {}
    for name, p in where:
        try:
            dev = os.stat(p).st_dev
        except OSError:
            continue
        what = out.setdefault(dev, [])
        if name not in what:
            what.append(name)
    return out


def refuse_running_system(path: str, target, host: Host) -> None:
    """A usage error (exit 2) when ``target`` (the filesystem ``path`` is on) holds the
    running system."""
    from vacate.observing.errors import UsageError

    what = system_devices(host).get(target.st_dev)
    if what:
        on = "" if os.path.realpath(path) == target.mountpoint else \
            f"{path} is on {target.mountpoint}, "
        raise UsageError(f"{on}{target.mountpoint} is a filesystem the running system lives on ("
                         f"{', '.join(what)}): vacate does not plan its retirement",
                         hint=f"vacate check {path} audits what uses it")
