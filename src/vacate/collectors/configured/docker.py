"""Docker containers, running and stopped, that use the volume: bind mounts and ``--mount``
binds from it, named volumes whose data (or bind device) is on it, environment values naming
it, and a daemon data root on it (then every container and image lives there). Read from the
daemon's files (``DATA_ROOT/containers/*/config.v2.json`` and ``hostconfig.json``), so stopped
containers and a stopped daemon are covered; data roots from ``/etc/docker/daemon.json``, the
command lines of running ``dockerd`` processes, and the default ``/var/lib/docker``.
Standard library only.
"""

from __future__ import annotations

import json
import os

from vacate.collectors.configured.cfgfiles import list_dir, read_text, spelled
from vacate.collectors.configured.match import VolumeView
from vacate.collectors.configured.resolve import on_volume
from vacate.host import Host
from vacate.model.common import Problem
from vacate.model.mount import Target
from vacate.model.usage import Consumer, Evidence
from vacate.parsers.redact import redact_text

DEFAULT_ROOT = "/var/lib/docker"


def _flag(argv: list[str], names: tuple[str, ...]) -> str | None:
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(n + "="):
                return a[len(n) + 1:]
    return None


def _daemon_json(host: Host, local: str) -> str | None:
    text, _ = read_text(host, local)
    if not text:
        return None
    try:
        d = json.loads(text)
    except ValueError:
        return None
    v = d.get("data-root") or d.get("graph") if isinstance(d, dict) else None
    return v if isinstance(v, str) else None


def data_roots(host: Host) -> list[str]:
    """Every docker data root this host uses or is configured to use (host spelling)."""
    roots = [_daemon_json(host, host.etc_path("docker", "daemon.json")) or DEFAULT_ROOT]
    try:
        pids = sorted((p for p in os.listdir(host.proc) if p.isdigit()), key=int)
    except OSError:
        pids = []
    for pid in pids:
        try:
            with open(host.proc_path(pid, "comm")) as f:
                if f.read().strip() != "dockerd":
                    continue
            with open(host.proc_path(pid, "cmdline"), "rb") as f:
                argv = f.read().decode("utf-8", "surrogateescape").split("\0")
        except OSError:
            continue   # vanished
        root = _flag(argv, ("--data-root", "-g", "--graph"))
        cfg = _flag(argv, ("--config-file",))
        if root is None and cfg:
            root = _daemon_json(host, host.path(cfg))
        roots.append(root or _rootless_root(host, pid) or DEFAULT_ROOT)
    return list(dict.fromkeys(os.path.normpath(r) for r in roots))


def _rootless_root(host: Host, pid: str) -> str | None:
    """A rootless daemon's default data root: ``$XDG_DATA_HOME/docker`` (``~/.local/share``)."""
    try:
        with open(host.proc_path(pid, "status")) as f:
            uid = next((ln.split()[1] for ln in f if ln.startswith("Uid:")), "0")
        if uid == "0":
            return None
        with open(host.proc_path(pid, "environ"), "rb") as f:
            env = dict(kv.split("=", 1) for kv in
                       f.read().decode("utf-8", "surrogateescape").split("\0") if "=" in kv)
    except OSError:
        return None
    data = env.get("XDG_DATA_HOME") or (env["HOME"] + "/.local/share" if "HOME" in env else None)
    return data + "/docker" if data and data.startswith("/") else None


def _load(host: Host, local: str, problems: list[Problem]) -> dict:
    text, p = read_text(host, local)
    if p:
        problems.append(p)
    if not text:
        return {}
    try:
        d = json.loads(text)
    except ValueError as e:
        problems.append(Problem("malformed-config", f"{spelled(host, local)}: {e}",
                                spelled(host, local), blocks_verdict=True))
        return {}
    return d if isinstance(d, dict) else {}


def _volume_device(host: Host, root: str, name: str) -> str | None:
    """The bind device of a local-driver volume (``docker volume create -o o=bind -o
    device=/data/x``), from ``volumes/NAME/opts.json``."""
    text, _ = read_text(host, host.path(os.path.join(root, "volumes", name, "opts.json")))
    try:
        d = json.loads(text) if text else {}
    except ValueError:
        return None
    dev = d.get("MountDevice") if isinstance(d, dict) else None
    return dev if isinstance(dev, str) and dev.startswith("/") else None


def _mounts(cfg: dict, hostcfg: dict) -> list[tuple[str, str, str, bool, str]]:
    """(type, source, destination, rw, volume name) of every mount a container has."""
    out: list[tuple[str, str, str, bool, str]] = []
    seen: set[tuple[str, str]] = set()
    for dest, mp in (cfg.get("MountPoints") or {}).items():
        if not isinstance(mp, dict):
            continue
        typ = mp.get("Type") or ("volume" if mp.get("Name") else "bind")
        src = mp.get("Source") or ""
        out.append((typ, src, mp.get("Destination") or dest, bool(mp.get("RW", True)),
                    mp.get("Name") or ""))
        seen.add((src, mp.get("Destination") or dest))
    # hostconfig: what was asked for (a created, never started container may lack MountPoints)
    for b in hostcfg.get("Binds") or []:
        parts = b.split(":")
        if len(parts) >= 2 and parts[0].startswith("/") and (parts[0], parts[1]) not in seen:
            out.append(("bind", parts[0], parts[1], "ro" not in parts[2:3], ""))
            seen.add((parts[0], parts[1]))
    for m in hostcfg.get("Mounts") or []:
        if isinstance(m, dict) and m.get("Type") == "bind" and \
                (m.get("Source"), m.get("Target")) not in seen:
            out.append(("bind", m.get("Source") or "", m.get("Target") or "",
                        not m.get("ReadOnly"), ""))
    return out


def _state(host: Host, cfg: dict) -> tuple[bool | None, int | None, str]:
    st = cfg.get("State") or {}
    pid = st.get("Pid") or None
    if st.get("Running"):
        if pid and os.path.exists(host.proc_path(pid)):
            return True, pid, "running"
        return False, None, "stale: marked running, but its process is gone"
    started = str(st.get("StartedAt") or "")
    return False, None, "created" if started.startswith("0001-") or not started else "exited"


def _container(host: Host, view: VolumeView, root: str, root_on: str | None, cdir: str,
               problems: list[Problem]) -> Consumer | None:
    cfg = _load(host, os.path.join(cdir, "config.v2.json"), problems)
    if not cfg:
        return None
    hostcfg = _load(host, os.path.join(cdir, "hostconfig.json"), problems)
    src = spelled(host, os.path.join(cdir, "config.v2.json"))
    name = (cfg.get("Name") or os.path.basename(cdir)[:12]).lstrip("/")
    paths: list[str] = []
    ev: list[Evidence] = []
    relations: list[str] = []
    if root_on is not None:
        relations.append("data-root")
        paths.append(root_on)
        ev.append(Evidence("config-line", root_on, src,
                           f"its filesystem and logs live in the data root {root}"))
    for typ, source, dest, rw, vname in _mounts(cfg, hostcfg):
        mode = "rw" if rw else "ro"
        h = on_volume(host, view, source)
        if h is not None:
            rel = "bind" if typ == "bind" else "volume"
            if root_on is not None and rel == "volume":
                continue   # already said by the data root
            relations.append(rel)
            paths.append(h)
            what = f"volume {vname}" if vname else f"bind {source}"
            ev.append(Evidence("config-line", h, src, f"{what} -> {dest} ({mode})"))
        elif typ == "volume" and vname:
            dev = _volume_device(host, root, vname)
            h = on_volume(host, view, dev)
            if h is not None:
                relations.append("volume-device")
                paths.append(h)
                ev.append(Evidence("config-line", h, src,
                                   f"volume {vname} binds {dev} -> {dest} ({mode})"))
    for env in (cfg.get("Config") or {}).get("Env") or []:
        for tok, h in view.paths_in_text(env):
            relations.append("env")
            paths.append(h)
            ev.append(Evidence("config-line", h, src, f"Env {redact_text(env)} names {tok}"))
    if not ev:
        return None
    running, pid, status = _state(host, cfg)
    policy = ((hostcfg.get("RestartPolicy") or {}).get("Name") or "no")
    attrs = {"container_id": cfg.get("ID") or os.path.basename(cdir),
             "image": (cfg.get("Config") or {}).get("Image") or cfg.get("Image"),
             "running": running, "status": status, "data_root": root,
             "restart_policy": policy,
             # comes back by itself when the daemon (re)starts
             "autostart": policy in ("always", "unless-stopped") or
                          (policy == "on-failure" and running is True),
             "relations": list(dict.fromkeys(relations))}
    if pid:
        attrs["pid"] = pid
    return Consumer(f"docker-container:{name}", "docker-container", name, False,
                    tuple(dict.fromkeys(paths)), tuple(ev), attrs)


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    consumers: list[Consumer] = []
    problems: list[Problem] = []
    for root in data_roots(host):
        local = host.path(root)
        root_on = on_volume(host, view, root)
        if root_on is not None:
            consumers.append(Consumer(
                f"config-file:docker-data-root:{root}", "config-file", f"docker data root {root}",
                False, (root_on,),
                (Evidence("config-line", root_on, root, "the docker daemon's data root "
                          "(images, containers, volumes) is on the volume"),),
                {"data_root": root}))
        dirs, p = list_dir(host, os.path.join(local, "containers"))
        if p:
            problems.append(p)
        for cdir in dirs:
            c = _container(host, view, root, root_on, cdir, problems)
            if c is not None:
                consumers.append(c)
    return tuple(consumers), tuple(problems)
