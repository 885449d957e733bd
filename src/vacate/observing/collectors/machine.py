"""Which machine this is: its ``machine-id``, which a plan and an observation record (a plan
applies only where it was made). Standard library only."""

from __future__ import annotations

from vacate.observing.host import Host


def machine_id(host: Host) -> str:
    """``/etc/machine-id`` (systemd's, also on hosts without systemd as PID 1), "" unread."""
    for path in (host.etc_path("machine-id"), host.path("/var/lib/dbus/machine-id")):
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                text = f.read(64).strip()
        except OSError:
            continue
        if text:
            return text
    return ""
