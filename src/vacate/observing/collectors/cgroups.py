"""Which systemd unit and which container a process belongs to, from ``/proc/PID/cgroup``.

Pure parsing (text in, values out); standard library only. Both cgroup formats:

* v2 (unified): one line ``0::/system.slice/sglang-qwen.service``;
* v1 (legacy/hybrid): ``N:controllers:/path`` lines; the ``name=systemd`` hierarchy names the
  unit (systemd keeps it), else the unified ``0::`` line of a hybrid host, else any line.

Containers recognised in the path, outermost first:

* LXC: ``/lxc/NAME/...`` (cgroupfs, LXC < 4 and Proxmox v1), ``/lxc.payload.NAME/...`` and
  ``/lxc.payload/NAME`` (LXC >= 4), ``/lxc.monitor.NAME`` (the host-side monitor: not inside);
  a numeric NAME is a Proxmox CTID (``lxc/129``);
* systemd-nspawn / machined: ``/machine.slice/machine-NAME.scope/...`` (``\\x2d`` unescaped);
* docker: ``/docker/ID`` (cgroupfs driver) and ``.../docker-ID.scope`` (systemd driver).

The unit is the innermost ``*.service`` / ``*.scope`` / ``*.socket`` / ``*.mount`` / ``*.swap``
component; when the process is inside a container, only components inside the container count
(the unit runs in the container's own manager), so the container's own scope is not its unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vacate.observing.compat import SLOTS

_UNIT_SUFFIXES = (".service", ".scope", ".socket", ".mount", ".swap", ".timer", ".slice")
_DOCKER_ID = re.compile(r"^[0-9a-f]{64}$")
_DOCKER_SCOPE = re.compile(r"^docker-([0-9a-f]{64})\.scope$")
_MACHINE_SCOPE = re.compile(r"^machine-(.+)\.scope$")
_USER_MANAGER = re.compile(r"^user@(\d+)\.service$")


@dataclass(frozen=True, **SLOTS)
class CgroupInfo:
    """What a process's cgroup tells: its systemd unit and its container."""
    path: str                    # the cgroup path used ("/system.slice/x.service")
    unit: str | None             # innermost unit (inside the container when there is one)
    container_type: str | None   # lxc, nspawn, docker
    container_name: str | None   # LXC name / CTID, machine name, docker id
    ctid: int | None = None      # Proxmox CTID when the LXC name is numeric
    lxc_monitor: bool = False    # the host-side LXC monitor process of that container
    user_manager: int | None = None  # uid whose user manager (user@UID.service) runs the unit

    def container_json(self) -> dict | None:
        if self.container_type is None:
            return None
        d: dict = {"type": self.container_type, "name": self.container_name}
        if self.ctid is not None:
            d["ctid"] = self.ctid
        return d


def unescape_unit(name: str) -> str:
    r"""systemd's ``\xNN`` escapes (``machine-my\x2dbox.scope`` -> ``my-box``)."""
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), name)


def pick_path(text: str) -> str | None:
    """The cgroup path that names the unit, from the whole ``/proc/PID/cgroup`` text."""
    unified = named = anyp = None
    for line in text.splitlines():
        hier, sep1, rest = line.partition(":")
        ctrl, sep2, path = rest.partition(":")
        if not (sep1 and sep2):
            continue
        if hier == "0" and ctrl == "":
            unified = path
        elif ctrl == "name=systemd":
            named = path
        elif anyp is None or (path not in ("/", "") and anyp in ("/", "")):
            anyp = path
    # On a hybrid host the unified line may be "/" while name=systemd holds the real path.
    for p in (named, unified, anyp):
        if p not in (None, "", "/"):
            return p
    return named or unified or anyp


def _unit_in(parts: list[str]) -> str | None:
    for comp in reversed(parts):
        if comp.endswith(_UNIT_SUFFIXES) and not comp.endswith(".slice"):
            return unescape_unit(comp)
    return None


def parse(text: str) -> CgroupInfo:
    """Parse ``/proc/PID/cgroup``."""
    path = pick_path(text) or "/"
    parts = [p for p in path.split("/") if p]
    ctype = cname = None
    monitor = False
    inner = parts
    for i, comp in enumerate(parts):
        nxt = parts[i + 1] if i + 1 < len(parts) else None
        if comp in ("lxc", "lxc.payload") and nxt:    # /lxc/129/ns/..., /lxc.payload/NAME/...
            ctype, cname, inner = "lxc", nxt, parts[i + 2:]
        elif comp.startswith("lxc.payload."):             # /lxc.payload.NAME/...
            ctype, cname, inner = "lxc", comp[len("lxc.payload."):], parts[i + 1:]
        elif comp == "lxc.monitor" and nxt:               # /lxc.monitor/NAME (Proxmox)
            ctype, cname, inner, monitor = "lxc", nxt, [], True
        elif comp.startswith("lxc.monitor."):
            ctype, cname, inner, monitor = "lxc", comp[len("lxc.monitor."):], [], True
        elif comp == "docker" and nxt and _DOCKER_ID.match(nxt):
            ctype, cname, inner = "docker", nxt, parts[i + 2:]
        elif (m := _DOCKER_SCOPE.match(comp)):
            ctype, cname, inner = "docker", m.group(1), parts[i + 1:]
        elif (m := _MACHINE_SCOPE.match(comp)) and i > 0 and parts[i - 1] == "machine.slice":
            ctype, cname, inner = "nspawn", unescape_unit(m.group(1)), parts[i + 1:]
        else:
            continue
        break
    if ctype is None:
        unit = _unit_in(parts)
    else:
        if inner and inner[0] in ("ns", "payload"):   # Proxmox /lxc/ID/ns/, nspawn /payload/
            inner = inner[1:]
        unit = _unit_in(inner)
    ctid = int(cname) if ctype == "lxc" and cname and cname.isdigit() else None
    return CgroupInfo(path=path, unit=unit, container_type=ctype, container_name=cname,
                      ctid=ctid, lxc_monitor=monitor, user_manager=_user_manager(inner, unit))


def _user_manager(parts: list[str], unit: str | None) -> int | None:
    """``.../user@1000.service/app.slice/nb.service``: the unit runs in uid 1000's manager."""
    for i, comp in enumerate(parts):
        m = _USER_MANAGER.match(comp)
        if m and unit is not None and unit != comp and i + 1 < len(parts):
            return int(m.group(1))
    return None
