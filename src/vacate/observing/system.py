"""The filesystems the running system lives on, by device: the ``st_dev`` of ``/``,
``/usr``, ``/var``, ``/boot``, ``/boot/efi``, PID 1's root, the interpreter's ``sys.prefix``
and vacate's own files. Standard library only (read where the volume is)."""

from __future__ import annotations

import os
import sys

from vacate.observing.host import Host

SYSTEM_PATHS = ("/", "/usr", "/var", "/boot", "/boot/efi")


def system_devices(host: Host) -> dict[str, list[str]]:
    """Device (``st_dev`` as text, for JSON) -> what of the running system is on it (paths
    that cannot be read are left out: the others still count)."""
    import vacate

    where = [(p, host.path(p)) for p in SYSTEM_PATHS]
    where.append(("PID 1's root", host.proc_path(1, "root") + "/"))
    if host.live:
        where.append((f"this Python ({sys.prefix})", sys.prefix))
        own = getattr(vacate, "__file__", None)      # (none where imported from memory)
        if own:
            where.append((f"vacate itself ({os.path.dirname(own)})", os.path.dirname(own)))
    out: dict[str, list[str]] = {}
    for name, p in where:
        try:
            dev = os.stat(p).st_dev
        except OSError:
            continue
        what = out.setdefault(str(dev), [])
        if name not in what:
            what.append(name)
    return out
