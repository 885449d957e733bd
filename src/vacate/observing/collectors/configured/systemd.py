"""systemd units that name the volume: every unit file of the system and user search paths plus
drop-ins, with enabled and active state.

State comes from the manager (``systemctl show``; inside a container through ``nsenter -t PID
-a``) when one answers, otherwise from the unit-file symlinks in ``*.wants``/``*.requires``/
``*.upholds`` (enabled true/false) with active unknown (null). Masked units (linked to
/dev/null or empty) cannot start and are skipped. Standard library only.
"""

from __future__ import annotations

import functools
import os
import posixpath
import shutil
import subprocess
from dataclasses import dataclass, field

from vacate.observing.collectors.configured.cfgfiles import line_sha256, list_dir, read_text
from vacate.observing.collectors.configured.match import VolumeView
from vacate.observing.compat import SLOTS
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer, Evidence
from vacate.observing.parsers import envfile, passwd
from vacate.observing.parsers import systemd_unit as su
from vacate.observing.parsers.redact import redact_value, shown_text

SYSTEM_DIRS = (
    "/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
    "/run/systemd/generator.early", "/etc/systemd/system", "/etc/systemd/system.attached",
    "/run/systemd/system", "/run/systemd/system.attached", "/run/systemd/generator",
    "/usr/local/lib/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system",
    "/run/systemd/generator.late",
)
USER_GLOBAL_DIRS = (
    "/etc/systemd/user", "/run/systemd/user", "/usr/local/lib/systemd/user",
    "/usr/lib/systemd/user", "/lib/systemd/user",
)
UNIT_SUFFIXES = frozenset({"service", "socket", "mount", "automount", "swap", "path", "timer",
                           "target", "slice", "scope", "device"})
LINK_DIR_SUFFIXES = (".wants", ".requires", ".upholds")
ACTIVE = {"active": True, "reloading": True, "activating": True, "deactivating": True,
          "refreshing": True, "inactive": False, "failed": False, "maintenance": False}
SYSTEMCTL_TIMEOUT_S = 20


@dataclass
class Scope:
    """One manager's search path: the system's, all users' (global) or one user's."""

    kind: str                     # "system" or "user"
    dirs: tuple[str, ...]
    ctx: su.Context
    id_prefix: str = ""           # "" for the system, "user:" / "user:NAME:" for user units
    user: str | None = None
    files: dict[str, str] = field(default_factory=dict)       # unit name -> path (as spelled)
    real: dict[str, str] = field(default_factory=dict)        # unit name -> symlinks resolved
    masked: set[str] = field(default_factory=set)
    linked: dict[str, str] = field(default_factory=dict)      # unit name -> link path
    dropin_dirs: dict[str, list[str]] = field(default_factory=dict)
    homes: dict[str, str] = field(default_factory=dict)       # user -> home (for User= + ~)


def _is_unit_name(name: str) -> bool:
    stem, dot, suffix = name.rpartition(".")
    return bool(dot and stem and suffix in UNIT_SUFFIXES)


def resolve(host: Host, spelled: str) -> str:
    """``spelled`` with every symlink resolved inside ``host``'s root, as the host itself
    would resolve it (an absolute link in a container's tree stays in the container).
    Directories are resolved once per collect (cached), then only the last component."""
    d, base = posixpath.split(posixpath.normpath(spelled))
    if not base or base == "..":
        return _resolve_full(host, spelled)
    cand = posixpath.join(_resolve_dir(host, d), base)
    try:
        os.readlink(host.path(cand))
    except OSError:
        return cand
    return _resolve_full(host, cand)


@functools.lru_cache(maxsize=4096)
def _resolve_dir(host: Host, d: str) -> str:
    return _resolve_full(host, d)


def _resolve_full(host: Host, spelled: str, depth: int = 40) -> str:
    parts = [c for c in spelled.split("/") if c not in ("", ".")]
    resolved = "/"
    while parts:
        c = parts.pop(0)
        if c == "..":
            resolved = posixpath.dirname(resolved)
            continue
        cand = posixpath.join(resolved, c)
        try:
            t = os.readlink(host.path(cand))
        except OSError:
            resolved = cand
            continue
        depth -= 1
        if depth <= 0:
            return cand
        parts = [x for x in t.split("/") if x not in ("", ".")] + parts
        if t.startswith("/"):
            resolved = "/"
    return resolved


def local(host: Host, spelled: str) -> str:
    """Where a path of ``host`` lies from here, symlinks resolved inside its root."""
    return host.path(spelled) if host.root == "/" else host.path(resolve(host, spelled))


def _listdir(host: Host, d: str, problems: list[Problem]) -> list[str]:
    """Names in a unit directory (none when it does not exist; an unreadable one is a
    problem: the units in it are unknown)."""
    entries, p = list_dir(host, local(host, d))
    if p:
        problems.append(p)
    return [posixpath.basename(e) for e in entries]


def _index(host: Host, scope: Scope, problems: list[Problem]) -> None:
    """Which file each unit name loads from (first directory wins), masks, links, drop-ins."""
    seen_real: set[str] = set()
    for d in scope.dirs:
        real = resolve(host, d)
        if real in seen_real:        # /lib -> /usr/lib on merged-/usr systems
            continue
        seen_real.add(real)
        for name in _listdir(host, d, problems):
            spelled = posixpath.join(d, name)
            if name.endswith(".d") and os.path.isdir(local(host, spelled)):
                scope.dropin_dirs.setdefault(name[:-2], []).append(spelled)
                continue
            if name.endswith(LINK_DIR_SUFFIXES):
                for link in _listdir(host, spelled, problems):
                    if _is_unit_name(link):
                        scope.linked.setdefault(link, posixpath.join(spelled, link))
                continue
            if not _is_unit_name(name) or name in scope.files or name in scope.masked:
                continue
            target = resolve(host, spelled)
            try:
                empty = os.path.getsize(host.path(target)) == 0
            except OSError:
                empty = target == "/dev/null"
            if target == "/dev/null" or empty:
                scope.masked.add(name)
                continue
            tname = posixpath.basename(target)
            if tname != name and _is_unit_name(tname) and posixpath.dirname(target) in scope.dirs:
                # an alias (dbus-org.x.service -> x.service): enabled through it, loaded as x
                scope.linked.setdefault(tname, spelled)
                continue
            scope.files[name] = spelled
            scope.real[name] = target


def _dropins(host: Host, scope: Scope, name: str, problems: list[Problem]
             ) -> list[tuple[str, str]]:
    """Drop-in files for ``name`` in load order: ``name.d``, the template's, the prefix
    hierarchy's (``foo-.service.d``) and the type's (``service.d``); by file name, a
    higher-priority directory's file replacing a lower one's of the same name."""
    prefix, instance, suffix = su.split_name(name)
    keys = [suffix]
    parts = prefix.split("-")
    keys += ["-".join(parts[:i]) + "-." + suffix for i in range(1, len(parts))]
    if instance is not None:
        keys.append(f"{prefix}@.{suffix}")
    keys.append(name)
    by_file: dict[str, tuple[int, str]] = {}
    prio = {d: i for i, d in enumerate(scope.dirs)}
    for key in keys:
        for d in scope.dropin_dirs.get(key, ()):
            rank = prio.get(posixpath.dirname(d), 99)
            for f in _listdir(host, d, problems):
                if f.endswith(".conf"):
                    old = by_file.get(f)
                    if old is None or rank < old[0]:
                        by_file[f] = (rank, posixpath.join(d, f))
    out = []
    for f in sorted(by_file):
        path = by_file[f][1]
        text = _read(host, resolve(host, path), problems, path)
        if text is not None:
            out.append((path, text))
    return out


def _read(host: Host, real: str, problems: list[Problem], named: str | None = None
          ) -> str | None:
    """The text of ``real`` (a path of ``host`` with its links already resolved inside it;
    ``named``: as a unit or directory spells it): None when it does not exist; when it cannot
    be read whole, a problem (and None, or the part read)."""
    text, p = read_text(host, host.path(real), named=named)
    if p:
        problems.append(p)
    return text


def scopes(host: Host, problems: list[Problem]) -> list[Scope]:
    """The system manager's search path, the global user one, and each home's."""
    text = _read(host, resolve(host, "/etc/passwd"), problems)
    users = [(u.name, u.uid, u.home) for u in passwd.parse(text or "") if u.home.startswith("/")]
    out = [Scope("system", SYSTEM_DIRS, su.Context(), homes={u: h for u, _i, h in users})]
    out.append(Scope("user", USER_GLOBAL_DIRS, su.Context(user_manager=True, user="%u", uid=0,
                                                          home="%h"), id_prefix="user:"))
    for user, uid, home in users:
        if home in ("/", "/nonexistent"):
            continue
        d = posixpath.join(home, ".config/systemd/user")
        if os.path.isdir(local(host, d)):
            ctx = su.Context(user_manager=True, user=user, uid=uid, home=home)
            out.append(Scope("user", (d,), ctx,
                             id_prefix=f"user:{user}:", user=user))
    return out


def _instances(scope: Scope, template: str, running: set[str]) -> list[str]:
    prefix, _i, suffix = su.split_name(template)
    head = f"{prefix}@"
    names = {n for n in list(scope.linked) + list(running)
             if n.startswith(head) and n.endswith("." + suffix) and n != template}
    return sorted(names)


# Text that can make a path appear without it being written out: specifiers, ~, environment
# files, directories relative to a manager's base (StateDirectory=...).
_INDIRECT = ("%", "~", "EnvironmentFile", *(f"{k}=" for k in su.DIRECTORY_KEYS))


def may_name(view: VolumeView, name: str, texts: list[str]) -> bool:
    """Quick pre-check before parsing: can this unit name the volume at all? False only when
    no spelling of the volume, and nothing that could produce a path indirectly, occurs."""
    if name.endswith((".mount", ".automount")):
        return True                   # Where= may come from the unit name alone
    for t in texts:
        if any(pre in t for pre, _h in view.prefixes) or any(x in t for x in _INDIRECT):
            return True
    return False


def _one_path(text: str) -> bool:
    """A word that is one absolute path as a whole (``"/data/hf cache"``), not a list."""
    return text.startswith("/") and not any(c in text for c in ",:;=\n") and " /" not in text


@dataclass(frozen=True, **SLOTS)
class Hit:
    """A unit file setting that names a path on the volume."""
    key: str
    spelled: str
    host_path: str
    source: str
    line: int
    text: str


def unit_hits(host: Host, view: VolumeView, scope: Scope, unit: su.Unit,
              problems: list[Problem]) -> tuple[list[Hit], list[tuple[str, list[Hit]]]]:
    """Where the unit names the volume, and each EnvironmentFile that does (path, hits)."""
    ctx = scope.ctx
    env_texts: dict[str, str] = {}
    env_hits: list[tuple[str, list[Hit]]] = []
    for path, _optional, _a in su.environment_files(unit, ctx):
        if not path.startswith("/"):
            continue
        text = _read(host, resolve(host, path), problems, path)
        if text is None:
            continue
        env_texts[path] = text
        hits = []
        for a in envfile.parse(text)[0]:
            for spelled, hp in view.paths_in_text(a.value):
                hits.append(Hit(f"EnvironmentFile {a.key}", spelled, hp, path, a.line, a.text))
        if hits:
            env_hits.append((path, hits))
    env = su.environment(unit, ctx, env_texts)
    hits: list[Hit] = []
    for r in su.references(unit, ctx, env, scope.homes):
        a = r.assignment
        if r.is_path or _one_path(r.text):
            hp = view.to_host(r.text)
            found = [(r.text, hp)] if hp else []
        else:
            found = view.paths_in_text(r.text)
        for spelled, hp in found:
            hits.append(Hit(r.key, spelled, hp, a.source, a.line, a.text))
    if unit.fragment:
        real = resolve(host, unit.fragment)
        hp = view.to_host(real)
        if hp:
            hits.append(Hit("unit_file", real, hp, unit.fragment, 0, f"-> {real}"))
    return hits, env_hits


def _manager(host: Host, view: VolumeView) -> list[str] | None:
    """The systemctl command line that reaches this host's system manager, or None."""
    if shutil.which("systemctl") is None:
        return None
    if view.pid is not None:
        if shutil.which("nsenter") is None or not os.path.isdir(local(host, "/run/systemd/system")):
            return None
        return ["nsenter", "-t", str(view.pid), "-a", "systemctl"]
    if host.root != "/" or not host.live or not os.path.isdir("/run/systemd/system"):
        return None
    return ["systemctl"]


def _user_manager(host: Host, view: VolumeView, uid: int) -> list[str] | None:
    """The systemctl command line that reaches user ``uid``'s manager when it runs (its private
    socket exists), or None."""
    rt = f"/run/user/{uid}"
    if shutil.which("systemctl") is None or \
            not os.path.exists(local(host, f"{rt}/systemd/private")):
        return None
    base = ["env", f"XDG_RUNTIME_DIR={rt}", "systemctl", "--user"]
    if view.pid is not None:
        return ["nsenter", "-t", str(view.pid), "-a", *base] if shutil.which("nsenter") else None
    if host.root != "/" or not host.live:
        return None
    return base


def parse_show(text: str) -> dict[str, dict[str, str]]:
    """``systemctl show -p Id,...`` output: one block per unit, keyed by Id."""
    out: dict[str, dict[str, str]] = {}
    for block in text.split("\n\n"):
        props = dict(line.partition("=")[::2] for line in block.splitlines() if "=" in line)
        if props.get("Id"):
            out[props["Id"]] = props
    return out


def manager_state(cmd: list[str], names: list[str]) -> tuple[dict[str, dict[str, str]],
                                                               Problem | None]:
    if not names:
        return {}, None
    try:
        p = subprocess.run([*cmd, "show", "--no-pager",
                            "-p", "Id,LoadState,ActiveState,SubState,UnitFileState", "--", *names],
                           capture_output=True, text=True, timeout=SYSTEMCTL_TIMEOUT_S,
                           check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {}, Problem("systemctl-failed", f"{' '.join(cmd)} show failed: {e}")
    if p.returncode != 0 and not p.stdout:
        return {}, Problem("systemctl-failed",
                           f"{' '.join(cmd)} show: {p.stderr.strip()[:200]}")
    shown = parse_show(p.stdout)
    # show answers in the order asked; an alias's Id is the real name, so map by position too
    blocks = [b for b in p.stdout.split("\n\n") if b.strip()]
    if len(blocks) == len(names):
        for n, b in zip(names, blocks):
            shown.setdefault(n, dict(x.partition("=")[::2] for x in b.splitlines()))
    return shown, None


def running_units(cmd: list[str]) -> set[str]:
    try:
        p = subprocess.run([*cmd, "list-units", "--all", "--plain", "--no-legend", "--no-pager"],
                           capture_output=True, text=True, timeout=SYSTEMCTL_TIMEOUT_S,
                           check=False)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    names = set()
    for line in p.stdout.splitlines():
        words = [w for w in line.split() if w not in ("●", "*")]   # failed units get a bullet
        if words and _is_unit_name(words[0]):
            names.add(words[0])
    return names


def _fallback_state(scope: Scope, name: str, unit: su.Unit) -> tuple[bool, str]:
    template = su.template_of(name)
    link = scope.linked.get(name) or (scope.linked.get(template) if template else None)
    if link:
        return True, "generated" if "/generator" in link else "enabled"
    if not unit.has_section("Install"):
        if unit.fragment and "/generator" in unit.fragment:
            return False, "generated"
        return False, "static"
    return False, "disabled"


def _consumer(scope: Scope, name: str, unit: su.Unit, hits: list[Hit],
              state: dict[str, str] | None, fb: tuple[bool, str], target_path: str) -> Consumer:
    if state and state.get("LoadState") not in (None, "", "not-found"):
        ufs = state.get("UnitFileState", "")
        enabled: bool | None = ufs in ("enabled", "enabled-runtime", "linked", "linked-runtime",
                                       "alias", "generated", "indirect") or fb[0]
        active = ACTIVE.get(state.get("ActiveState", ""))
        attrs_state = {"unit_file_state": ufs or fb[1], "active_state": state.get("ActiveState"),
                       "sub_state": state.get("SubState"), "state_from": "systemctl"}
    else:
        enabled, active = fb[0], None
        attrs_state = {"unit_file_state": fb[1], "active_state": None, "sub_state": None,
                       "state_from": "unit-files"}
    fields: dict[str, list[str]] = {}
    for h in hits:
        k = h.key
        shown = h.spelled
        if k.startswith(("Environment ", "EnvironmentFile ")):
            shown = f"{k.split(' ', 1)[1]}={redact_value(k.split(' ', 1)[1], h.spelled)}"
        vals = fields.setdefault(k.split(" ", 1)[0], [])
        if shown not in vals:
            vals.append(shown)
    evidence = tuple(dict.fromkeys(
        Evidence("unit-file" if not h.key.startswith("EnvironmentFile ") else "environment-file",
                 h.host_path, f"{h.source}:{h.line}" if h.line else h.source,
                 shown_text(h.text))
        for h in hits))
    attrs = {"enabled": enabled, "active": active, "unit_file": unit.fragment,
             "dropins": list(unit.dropins), "scope": scope.kind, "fields": fields, **attrs_state}
    if scope.user:
        attrs["user"] = scope.user
    if unit.type in ("mount", "automount", "swap"):
        where = [h.host_path for h in hits if h.key in ("Where", "What")]
        if where:
            attrs["mounts"] = where[0]
            # Where= is the volume itself: this unit mounts it (and mounts it again if started)
            attrs["mounts_target"] = any(h.key == "Where" and h.host_path == target_path
                                         for h in hits)
    paths = tuple(sorted({h.host_path for h in hits}))
    return Consumer(id=f"systemd-unit:{scope.id_prefix}{name}", type="systemd-unit", name=name,
                    live=active is True, paths=paths, evidence=evidence, attrs=attrs)


def _env_consumer(path: str, hits: list[Hit], unit_ids: list[str]) -> Consumer:
    return Consumer(
        id=f"config-file:{path}", type="config-file", name=path, live=False,
        paths=tuple(sorted({h.host_path for h in hits})),
        evidence=tuple(dict.fromkeys(Evidence("config-line", h.host_path, f"{path}:{h.line}",
                                              shown_text(h.text)) for h in hits)),
        attrs={"file": path, "format": "environment-file", "used_by": unit_ids,
               # each line that names the volume with its sha256 (what a rewrite checks)
               "line_sha256s": [list(x) for x in sorted({(h.line, line_sha256(h.text))
                                                         for h in hits
                                                         if h.line and "\n" not in h.text})]})


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    problems: list[Problem] = []
    _resolve_dir.cache_clear()           # the trees may have changed since the last collect
    cmd = _manager(host, view)
    running: set[str] | None = None       # asked of the manager only when a template needs it
    found: list[tuple[Scope, str, su.Unit, list[Hit]]] = []
    env_users: dict[str, tuple[list[Hit], list[str]]] = {}
    for scope in scopes(host, problems):
        _index(host, scope, problems)
        names: list[str] = []
        for name in scope.files:
            prefix, instance, _suffix = su.split_name(name)
            if instance == "":                    # a template: its instances, or itself
                if running is None and cmd and scope.kind == "system" and (
                        may_name(view, name, [_read(host, scope.real[name], problems,
                                                    scope.files[name]) or ""])
                        or any(k.startswith(f"{prefix}@") and k != name
                               for k in scope.dropin_dirs)):
                    running = running_units(cmd)
                inst = _instances(scope, name, running or set() if scope.kind == "system"
                                  else set())
                names.extend(inst or [name])
            else:
                names.append(name)
        for name in names:
            if name in scope.masked:
                continue
            fname = name if name in scope.files else su.template_of(name)
            spelled, real = scope.files[fname], scope.real[fname]
            text = _read(host, real, problems, spelled)
            if text is None:
                continue
            dropins = tuple(_dropins(host, scope, name, problems))
            if not may_name(view, name, [text, *(t for _p, t in dropins)]) and \
                    view.to_host(real) is None:
                continue
            unit = su.load(name, (spelled, text), dropins)
            hits, env_hits = unit_hits(host, view, scope, unit, problems)
            for p, eh in env_hits:
                entry = env_users.setdefault(p, (eh, []))
                entry[1].append(f"systemd-unit:{scope.id_prefix}{name}")
            if hits or env_hits:
                all_hits = hits + [h for _p, eh in env_hits for h in eh]
                found.append((scope, name, unit, all_hits))
    states: dict[str, dict[str, dict[str, str]]] = {}      # scope id prefix -> unit -> props
    for scope in {s.id_prefix: s for s, _n, _u, _h in found}.values():
        if scope.kind == "system":
            scmd = cmd
        elif scope.user is not None:
            scmd = _user_manager(host, view, scope.ctx.uid)
        else:
            scmd = None                   # global user units: one state per user, not asked
        if scmd:
            names = [n for s, n, _u, _h in found if s is scope]
            states[scope.id_prefix], prob = manager_state(scmd, names)
            if prob:
                problems.append(prob)
    consumers = []
    for scope, name, unit, hits in found:
        st = states.get(scope.id_prefix, {}).get(name)
        c = _consumer(scope, name, unit, hits, st, _fallback_state(scope, name, unit),
                      target.path)
        consumers.append(c)
    for path, (hits, ids) in env_users.items():
        consumers.append(_env_consumer(path, hits, ids))
    # a template's file is read once per instance: its problem is said once
    return tuple(consumers), tuple(dict.fromkeys(problems))
