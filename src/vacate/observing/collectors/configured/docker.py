"""Docker containers, running and stopped, that use the volume: bind mounts and ``--mount``
binds from it, named volumes whose data (or bind device) is on it, environment values naming
it, and a daemon data root on it (then every container and image lives there). Read from the
daemon's files (``DATA_ROOT/containers/*/config.v2.json`` and ``hostconfig.json``), so stopped
containers and a stopped daemon are covered; data roots from :func:`data_roots`.
Standard library only.
"""

from __future__ import annotations

import json
import os
import posixpath

from vacate.observing.collectors.configured import systemd
from vacate.observing.collectors.configured.cfgfiles import list_dir, read_text, spelled
from vacate.observing.collectors.configured.match import VolumeView
from vacate.observing.collectors.configured.resolve import on_volume
from vacate.observing.fsio import read_bounded
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer, Evidence
from vacate.observing.parsers import passwd
from vacate.observing.parsers import systemd_unit as su
from vacate.observing.parsers.redact import shown_text

DEFAULT_ROOT = "/var/lib/docker"
_ROOT_FLAGS = ("--data-root", "--graph", "-g")
_NO_ARGV: tuple[str | None, str | None] = (None, None)


def _flag(argv: list[str] | tuple[str, ...], names: tuple[str, ...]) -> str | None:
    """The value of the last of ``names`` in ``argv``: ``--opt V``, ``--opt=V`` and, for a
    one-letter flag, ``-gV`` (dockerd's flag parser takes all three)."""
    found = None
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                found = argv[i + 1]
            elif a.startswith(n + "="):
                found = a[len(n) + 1:]
            elif len(n) == 2 and a.startswith(n) and not a.startswith("--") and len(a) > 2:
                found = a[2:]
    return found


def _argv_roots(argv: list[str] | tuple[str, ...]) -> tuple[str | None, str | None]:
    """(data root, config file) a dockerd command line names."""
    return _flag(argv, _ROOT_FLAGS), _flag(argv, ("--config-file",))


def _daemon_json(host: Host, spelled_path: str, problems: list[Problem]) -> str | None:
    """``data-root`` (or the older ``graph``) of a daemon.json."""
    text, p = read_text(host, host.path(spelled_path))
    if p:
        problems.append(p)
    if not text:
        return None
    try:
        d = json.loads(text)
    except ValueError as e:
        problems.append(Problem("malformed-config", f"{spelled_path}: {e}", spelled_path,
                                blocks_verdict=True))
        return None
    v = (d.get("data-root") or d.get("graph")) if isinstance(d, dict) else None
    return v if isinstance(v, str) and v.startswith("/") else None


def _root_of(host: Host, argv: tuple[str, ...] | list[str], default_config: str,
             default_root: str, problems: list[Problem]) -> str:
    """The data root a daemon started with ``argv`` uses: its flag, else its config file's
    ``data-root``, else the default."""
    root, cfg = _argv_roots(argv)
    if root:
        return root
    return _daemon_json(host, cfg if cfg and cfg.startswith("/") else default_config,
                        problems) or default_root


def _unit(host: Host, dirs: tuple[str, ...], name: str, problems: list[Problem]
          ) -> tuple[su.Unit, dict[str, str]] | None:
    """The unit ``name`` (first fragment of ``dirs``, every drop-in by file name) and the
    environment its commands see, or None when it is not installed."""
    frag = None
    for d in dirs:
        text, p = read_text(host, host.path(posixpath.join(d, name)))
        if p:
            problems.append(p)
        if text is not None:
            frag = (posixpath.join(d, name), text)
            break
    if frag is None:
        return None
    by_file: dict[str, str] = {}
    for d in reversed(dirs):            # a higher-priority directory's file replaces
        files, p = list_dir(host, host.path(posixpath.join(d, name + ".d")), ".conf")
        if p:
            problems.append(p)
        for f in files:
            by_file[os.path.basename(f)] = posixpath.join(d, name + ".d", os.path.basename(f))
    dropins = []
    for f in sorted(by_file):
        text, p = read_text(host, host.path(by_file[f]))
        if p:
            problems.append(p)
        if text is not None:
            dropins.append((by_file[f], text))
    unit = su.load(name, frag, tuple(dropins))
    ctx = su.Context()
    env_texts = {}
    for path, _optional, _a in su.environment_files(unit, ctx):
        text, p = read_text(host, host.path(path)) if path.startswith("/") else (None, None)
        if p:
            problems.append(p)
        if text is not None:
            env_texts[path] = text
    return unit, su.environment(unit, ctx, env_texts)


def _unit_daemons(unit: su.Unit, env: dict[str, str]) -> list[tuple[str, ...]]:
    """The dockerd command lines of a unit's ``ExecStart=`` (``dockerd-rootless.sh`` passes
    its arguments on to dockerd)."""
    out = []
    for a in unit.values("Service", "ExecStart"):
        value = su.expand_specifiers(a.value, unit.name, su.Context(), unit.fragment)
        for cmd in su.parse_exec(value, env):
            if posixpath.basename(cmd.path).startswith("dockerd"):
                out.append(cmd.argv)
    return out


def _proc_text(host: Host, pid: str, name: str) -> str | None:
    """``/proc/PID/NAME`` whole (a command line or an environment is at most a few MB), or
    None when the process has gone."""
    try:
        data, _more = read_bounded(host.proc_path(pid, name), 64 << 20)
    except OSError:
        return None
    return data.decode("utf-8", "surrogateescape")


def _rootless(home: str | None, env: dict[str, str]) -> tuple[str, str] | None:
    """(default config file, default data root) of a rootless daemon: under
    ``$XDG_CONFIG_HOME`` and ``$XDG_DATA_HOME``, by default ``~/.config`` and
    ``~/.local/share``."""
    home = env.get("HOME") or home
    cfg = env.get("XDG_CONFIG_HOME") or (home + "/.config" if home else None)
    data = env.get("XDG_DATA_HOME") or (home + "/.local/share" if home else None)
    if not (cfg and data and cfg.startswith("/") and data.startswith("/")):
        return None
    return cfg + "/docker/daemon.json", data + "/docker"


def data_roots(host: Host, problems: list[Problem] | None = None) -> list[str]:
    """Every docker data root this host uses or is configured to use (host spelling), the
    one place they are found: ``/etc/docker/daemon.json`` (``data-root``, ``graph``), the
    system ``docker.service``'s ``ExecStart=`` (``--data-root``, ``-g``, ``--graph``,
    ``--config-file``), the rootless daemons users installed (``~/.config/systemd/user/
    docker.service``: ``~/.local/share/docker``), and the command line (and, for a rootless
    one, the environment) of every running ``dockerd``."""
    problems = problems if problems is not None else []
    system_cfg = "/etc/docker/daemon.json"
    roots = [_daemon_json(host, system_cfg, problems) or DEFAULT_ROOT]
    got = _unit(host, systemd.SYSTEM_DIRS, "docker.service", problems)
    if got:
        for argv in _unit_daemons(*got):
            roots.append(_root_of(host, argv, system_cfg, DEFAULT_ROOT, problems))
    text, p = read_text(host, host.etc_path("passwd"))
    if p:
        problems.append(p)
    for user in passwd.parse(text or ""):
        if user.uid == 0 or not user.home.startswith("/") or user.home == "/":
            continue
        udir = user.home.rstrip("/") + "/.config/systemd/user"
        if not os.path.isdir(host.path(udir)):
            continue
        got = _unit(host, (udir,), "docker.service", problems)
        where = _rootless(user.home, got[1] if got else {})
        if got and where:
            for argv in _unit_daemons(*got):
                roots.append(_root_of(host, argv, *where, problems))
    try:
        pids = sorted((p for p in os.listdir(host.proc) if p.isdigit()), key=int)
    except OSError:
        pids = []
    for pid in pids:
        if (_proc_text(host, pid, "comm") or "").strip() != "dockerd":
            continue
        cmdline = _proc_text(host, pid, "cmdline")
        status = _proc_text(host, pid, "status")
        if cmdline is None or status is None:
            continue
        argv = cmdline.rstrip("\0").split("\0")
        uid = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("Uid:")), "0")
        where = (system_cfg, DEFAULT_ROOT)
        if uid != "0":
            environ = _proc_text(host, pid, "environ") or ""
            env = dict(kv.split("=", 1) for kv in environ.split("\0") if "=" in kv)
            where = _rootless(None, env) or where
        roots.append(_root_of(host, argv, *where, problems))
    return list(dict.fromkeys(os.path.normpath(r) for r in roots if r.startswith("/")))


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


def _volume_device(host: Host, root: str, name: str, problems: list[Problem]) -> str | None:
    """The bind device of a local-driver volume (``docker volume create -o o=bind -o
    device=/data/x``), from ``volumes/NAME/opts.json``."""
    text, p = read_text(host, host.path(os.path.join(root, "volumes", name, "opts.json")))
    if p:
        problems.append(p)
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
    binds: list[list[str]] = []      # [path on the volume, path in the container, rw/ro]
    for typ, source, dest, rw, vname in _mounts(cfg, hostcfg):
        mode = "rw" if rw else "ro"
        h = on_volume(host, view, source)
        if h is not None:
            rel = "bind" if typ == "bind" else "volume"
            if root_on is not None and rel == "volume":
                continue   # already said by the data root
            relations.append(rel)
            paths.append(h)
            if rel == "bind":
                binds.append([h, dest, mode])
            what = f"volume {vname}" if vname else f"bind {source}"
            ev.append(Evidence("config-line", h, src, f"{what} -> {dest} ({mode})"))
        elif typ == "volume" and vname:
            dev = _volume_device(host, root, vname, problems)
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
            ev.append(Evidence("config-line", h, src, f"Env {shown_text(env)} names {tok}"))
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
    if binds:
        attrs["binds"] = binds
    if pid:
        attrs["pid"] = pid
    return Consumer(f"docker-container:{name}", "docker-container", name, False,
                    tuple(dict.fromkeys(paths)), tuple(ev), attrs)


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    consumers: list[Consumer] = []
    problems: list[Problem] = []
    for root in data_roots(host, problems):
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
