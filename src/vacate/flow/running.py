"""A plan never retires a filesystem the running system lives on (``check`` may still audit
it): the devices come from :func:`vacate.observing.system.system_devices` of the machine the
volume is on."""

from __future__ import annotations


def refuse_running_system(path: str, target, devices: dict[str, list[str]]) -> None:
    """A usage error (exit 2) when ``target`` (the filesystem ``path`` is on) holds the
    running system; ``devices``: :func:`system_devices` of the machine it is on."""
    from vacate.observing.errors import UsageError

    what = devices.get(str(target.st_dev))
    if what:
        on = "" if target.path == target.mountpoint else \
            f"{path} is on {target.mountpoint}, "
        raise UsageError(f"{on}{target.mountpoint} is a filesystem the running system lives on ("
                         f"{', '.join(what)}): vacate does not plan its retirement",
                         hint=f"vacate check {path} audits what uses it")
