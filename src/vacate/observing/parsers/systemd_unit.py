"""systemd unit files, parsed the way systemd parses them (systemd.syntax(7), systemd.unit(5),
systemd.service(5), systemd.exec(5)).

- ``parse``: sections, ``#``/``;`` comments, ``\\`` line continuation (the backslash becomes a
  space; comment lines inside a continuation are skipped), ``Key=Value`` assignments with their
  file and line.
- ``Unit``: the fragment plus its drop-ins in load order; ``values`` applies systemd's rules
  (an empty assignment resets a list, a later assignment of a single-value setting wins).
- ``expand_specifiers``: ``%n %N %p %P %i %I %f %j %J %y %Y %d %h %u %U %t %S %C %L %E %T %V
  %%`` and friends (those with no meaning here are left as written).
- ``split_words`` / ``cunescape``: systemd's quoting (``"..."``, ``'...'``, C escapes).
- ``parse_exec``: ``ExecStart=`` and friends: prefixes ``-@+!:|`` and ``!!``, several
  commands split by a lone ``;``, ``$VAR``/``${VAR}``/``$$`` expansion.
- ``references``: every value of a unit that may name a path, as (key, text, is_path, line).

Pure: text in, values out; reading files is the collector's job. Standard library only.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from vacate.observing.compat import SLOTS
from vacate.observing.parsers import envfile
from vacate.observing.parsers.redact import shown_text

COMMENTS = "#;"

# Settings that hold one value: a later assignment replaces an earlier one.
SINGLE = frozenset({
    "WorkingDirectory", "RootDirectory", "RootImage", "PIDFile", "What", "Where", "Type",
    "StandardInput", "StandardOutput", "StandardError", "User", "Group", "Options",
    "DirectoryMode", "SourcePath", "Description", "RootHash", "RootVerity", "MountImages",
    "BusName", "USBFunctionDescriptors", "USBFunctionStrings", "Unit", "UtmpIdentifier",
})
# Commands: ExecStart=, ExecStartPre=, ...
EXEC_KEYS = frozenset({
    "ExecStart", "ExecStartPre", "ExecStartPost", "ExecCondition", "ExecReload", "ExecStop",
    "ExecStopPost", "ExecStopPre",
})
# Space-separated lists of absolute paths, each maybe prefixed by - or +.
PATH_LISTS = frozenset({
    "RequiresMountsFor", "WantsMountsFor", "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths",
    "ExecPaths", "NoExecPaths", "ConditionPathExists", "ConditionPathIsDirectory",
    "ConditionPathIsSymbolicLink", "ConditionPathIsMountPoint", "ConditionPathIsReadWrite",
    "ConditionDirectoryNotEmpty", "ConditionFileNotEmpty", "ConditionFileIsExecutable",
    "ConditionPathExistsGlob", "AssertPathExists", "AssertPathIsDirectory",
    "AssertPathIsMountPoint", "AssertFileNotEmpty", "AssertDirectoryNotEmpty",
    "PathExists", "PathExistsGlob", "PathChanged", "PathModified", "DirectoryNotEmpty",
    "ListenStream", "ListenDatagram", "ListenSequentialPacket", "ListenFIFO", "ListenSpecial",
    "ListenMessageQueue", "SupplementaryPaths",
})
# Space-separated SRC[:DST[:OPTS]] bind specifications.
BIND_LISTS = frozenset({"BindPaths", "BindReadOnlyPaths"})
# Free text for people (and identifiers): a path written there names nothing systemd opens.
FREE_TEXT = frozenset({"Description", "Documentation", "SyslogIdentifier", "LogExtraFields"})
# Relative directory names below a manager's base directory.
DIRECTORY_KEYS = {
    "StateDirectory": ("/var/lib", "state"), "CacheDirectory": ("/var/cache", "cache"),
    "LogsDirectory": ("/var/log", "logs"), "RuntimeDirectory": ("/run", "runtime"),
    "ConfigurationDirectory": ("/etc", "config"),
}
_SECTION = re.compile(r"^\[([^\]]+)\]\s*$")


@dataclass(frozen=True, **SLOTS)
class Assignment:
    """One ``Key=value`` of a unit file, with where it was written."""
    section: str
    key: str
    value: str
    source: str    # the file it was read from
    line: int      # 1-based line where it starts
    text: str      # the physical line(s) as written (redact before showing)


@dataclass(frozen=True, **SLOTS)
class Context:
    """What specifiers expand to for one manager: the system manager (defaults), or a user's."""

    user_manager: bool = False
    user: str = "root"
    uid: int = 0
    home: str = "/root"
    hostname: str | None = None

    def base(self, kind: str) -> str:
        if not self.user_manager:
            return {"runtime": "/run", "state": "/var/lib", "cache": "/var/cache",
                    "logs": "/var/log", "config": "/etc"}[kind]
        return {"runtime": f"/run/user/{self.uid}", "state": f"{self.home}/.local/state",
                "cache": f"{self.home}/.cache", "logs": f"{self.home}/.local/state/log",
                "config": f"{self.home}/.config"}[kind]


def parse(text: str, source: str) -> tuple[tuple[Assignment, ...], tuple[str, ...]]:
    """One unit file or drop-in: its assignments in order, and warnings for lines that are
    neither (with their line numbers)."""
    out: list[Assignment] = []
    warnings: list[str] = []
    section: str | None = None
    cont: list[str] | None = None     # logical line being continued
    cont_raw: list[str] = []
    start = 0
    lines = text.split("\n")
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if cont is not None:
            if line[:1] in tuple(COMMENTS) and line:
                cont_raw.append(raw)
                continue
        elif not line or line[0] in COMMENTS:
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            piece = line[:-1] + " "
            if cont is None:
                cont, cont_raw, start = [piece], [raw], n
            else:
                cont.append(piece)
                cont_raw.append(raw)
            if n < len(lines):
                continue
            line = ""
        if cont is not None:
            if line:
                cont.append(line)
                cont_raw.append(raw)
            logical, phys, lineno = "".join(cont), "\n".join(cont_raw), start
            cont, cont_raw = None, []
        else:
            logical, phys, lineno = line, raw, n
        m = _SECTION.match(logical)
        if m:
            section = m.group(1)
            continue
        key, eq, value = logical.partition("=")
        if not eq:
            warnings.append(f"{source}:{lineno}: not an assignment: {shown_text(logical, 80)!r}")
            continue
        if section is None:
            warnings.append(f"{source}:{lineno}: assignment outside a section")
            continue
        out.append(Assignment(section, key.strip(), value.strip(), source, lineno, phys.strip()))
    return tuple(out), tuple(warnings)


@dataclass(frozen=True, **SLOTS)
class Unit:
    """A unit as loaded: the fragment's assignments then each drop-in's, in load order."""

    name: str
    fragment: str | None
    dropins: tuple[str, ...] = ()
    assignments: tuple[Assignment, ...] = ()
    warnings: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)

    @property
    def type(self) -> str:
        return self.name.rsplit(".", 1)[-1] if "." in self.name else ""

    def values(self, section: str | None, key: str) -> tuple[Assignment, ...]:
        """The effective assignments of ``key``: for lists, those after the last empty one; for
        single-value settings, the last non-empty one."""
        vals: list[Assignment] = []
        for a in self.assignments:
            if a.key != key or (section is not None and a.section != section):
                continue
            if a.value == "":
                vals = []
            elif key in SINGLE:
                vals = [a]
            else:
                vals.append(a)
        return tuple(vals)

    def settings(self) -> tuple[tuple[str, str], ...]:
        """(section, key) of every setting, in first-seen order."""
        return tuple(dict.fromkeys((a.section, a.key) for a in self.assignments))

    def has_section(self, section: str) -> bool:
        return any(a.section == section for a in self.assignments)


def load(name: str, fragment: tuple[str, str] | None,
         dropins: tuple[tuple[str, str], ...] = ()) -> Unit:
    """A unit from its fragment ``(path, text)`` and drop-ins ``(path, text)`` (already in
    load order: sorted by file name, a higher-priority directory's file replacing a lower's)."""
    assigns: list[Assignment] = []
    warns: list[str] = []
    for path, text in ((fragment,) if fragment else ()) + tuple(dropins):
        a, w = parse(text, path)
        assigns.extend(a)
        warns.extend(w)
    return Unit(name, fragment[0] if fragment else None, tuple(p for p, _ in dropins),
                tuple(assigns), tuple(warns))


# --- unit names -----------------------------------------------------------------------------

def split_name(name: str) -> tuple[str, str | None, str]:
    """``foo@bar.service`` -> (``foo``, ``bar``, ``service``); no instance -> None."""
    stem, _, suffix = name.rpartition(".")
    prefix, at, instance = stem.partition("@")
    return prefix, (instance if at else None), suffix


def template_of(name: str) -> str | None:
    prefix, instance, suffix = split_name(name)
    if instance is None:
        return None
    return f"{prefix}@.{suffix}"


def unescape(s: str) -> str:
    """systemd's unit_name_unescape: ``-`` -> ``/``, ``\\xNN`` -> the byte."""
    out = re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: "\0" + chr(int(m.group(1), 16)), s)
    res: list[str] = []
    i = 0
    while i < len(out):
        c = out[i]
        if c == "\0":
            res.append(out[i + 1])
            i += 2
            continue
        res.append("/" if c == "-" else c)
        i += 1
    return "".join(res)


def path_unescape(s: str) -> str:
    """systemd's unit_name_path_unescape: ``data-models`` -> ``/data/models``, ``-`` -> ``/``."""
    if s in ("", "-"):
        return "/"
    return posixpath.normpath("/" + unescape(s))


def path_escape(path: str) -> str:
    """systemd-escape --path: ``/data/my-x`` -> ``data-my\\x2dx``."""
    p = posixpath.normpath(path).strip("/")
    if not p:
        return "-"
    out = []
    for i, ch in enumerate(p):
        if ch == "/":
            out.append("-")
        elif ch.isalnum() and ch.isascii() or ch in ":_" or (ch == "." and i > 0):
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape"))
    return "".join(out)


# --- specifiers -----------------------------------------------------------------------------

def expand_specifiers(value: str, name: str, ctx: Context, fragment: str | None = None) -> str:
    """Expand ``%x`` specifiers with a meaning for paths; others are left as written."""
    if "%" not in value:
        return value
    prefix, instance, _suffix = split_name(name)
    stem = name.rpartition(".")[0]
    table = {
        "n": name, "N": stem, "p": prefix, "P": unescape(prefix),
        "i": instance or "", "I": unescape(instance or ""),
        "f": path_unescape(instance if instance else prefix),
        "j": prefix.rsplit("-", 1)[-1], "J": unescape(prefix.rsplit("-", 1)[-1]),
        "h": ctx.home, "u": ctx.user, "U": str(ctx.uid),
        "t": ctx.base("runtime"), "S": ctx.base("state"), "C": ctx.base("cache"),
        "L": ctx.base("logs"), "E": ctx.base("config"), "T": "/tmp", "V": "/var/tmp",
        "d": f"{ctx.base('runtime')}/credentials/{name}", "%": "%",
    }
    if fragment:
        table["y"] = fragment
        table["Y"] = posixpath.dirname(fragment)
    if ctx.hostname:
        table["H"] = ctx.hostname
        table["l"] = ctx.hostname.split(".")[0]

    def sub(m: re.Match) -> str:
        return table.get(m.group(1), m.group(0))

    return re.sub(r"%(.)", sub, value)


# --- quoting --------------------------------------------------------------------------------

_SIMPLE_ESC = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
               "\\": "\\", '"': '"', "'": "'", "s": " ", ";": ";"}


def _escape_at(s: str, i: int) -> tuple[str, int]:
    """The C escape starting after the backslash at ``s[i-1]``: its text and the next index.
    Unknown escapes are kept as written (systemd's relaxed mode)."""
    if i >= len(s):
        return "\\", i
    c = s[i]
    if c in _SIMPLE_ESC:
        return _SIMPLE_ESC[c], i + 1
    if c == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", s[i + 1:i + 3] or ""):
        return chr(int(s[i + 1:i + 3], 16)), i + 3
    if c in "01234567" and re.fullmatch(r"[0-7]{3}", s[i:i + 3] or ""):
        return chr(int(s[i:i + 3], 8)), i + 3
    if c == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 1:i + 5] or ""):
        return chr(int(s[i + 1:i + 5], 16)), i + 5
    if c == "U" and re.fullmatch(r"[0-9a-fA-F]{8}", s[i + 1:i + 9] or ""):
        return chr(int(s[i + 1:i + 9], 16)), i + 9
    return "\\" + c, i + 1


def cunescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        if s[i] == "\\":
            t, i = _escape_at(s, i + 1)
            out.append(t)
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def split_words(value: str, *, unescape_c: bool = True) -> list[tuple[str, bool]]:
    """Split like systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE): words with
    ``"..."`` or ``'...'`` parts and C escapes. Each word comes with whether it was written as
    a bare ``;`` (the command separator)."""
    words: list[tuple[str, bool]] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] in " \t\n":
            i += 1
        if i >= n:
            break
        buf: list[str] = []
        bare = True
        quote: str | None = None
        while i < n:
            c = value[i]
            if quote:
                if c == quote:
                    quote = None
                    i += 1
                elif c == "\\" and unescape_c:
                    t, i = _escape_at(value, i + 1)
                    buf.append(t)
                else:
                    buf.append(c)
                    i += 1
                continue
            if c in " \t\n":
                break
            if c in "\"'":
                quote, bare = c, False
                i += 1
            elif c == "\\":
                bare = False
                t, i = _escape_at(value, i + 1)
                buf.append(t)
            else:
                buf.append(c)
                i += 1
        w = "".join(buf)
        words.append((w, bare and w == ";"))
    return words


# --- environment ----------------------------------------------------------------------------

_VAR = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)\})")


def expand_env(s: str, env: dict[str, str]) -> str:
    """``${VAR}`` replaced (unset -> empty), ``$$`` -> ``$``; a ``$VAR`` inside a word stays
    as written (systemd expands braceless variables only as whole words)."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), "")
    return _VAR.sub(sub, s)


def environment_assignments(value: str) -> list[tuple[str, str]]:
    """``Environment="A=1 2" B=3`` -> [(A, "1 2"), (B, "3")] (invalid words skipped)."""
    out = []
    for w, _ in split_words(value):
        k, eq, v = w.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            out.append((k, v))
    return out


# --- commands -------------------------------------------------------------------------------

@dataclass(frozen=True, **SLOTS)
class Command:
    """One command line of an ``Exec*=`` setting: its prefixes, executable and argv."""
    prefixes: str                  # "-", "@", "+", "!", "!!", ":", "|" as written
    path: str                      # the executable
    argv: tuple[str, ...]          # argv[0] included

    @property
    def ignore_failure(self) -> bool:
        return "-" in self.prefixes


def parse_exec(value: str, env: dict[str, str] | None = None) -> list[Command]:
    """One ``Exec*=`` value (specifiers already expanded) into its commands."""
    env = env or {}
    cmds: list[Command] = []
    cur: list[str] = []
    for w, sep in split_words(value) + [(";", True)]:
        if not sep:
            cur.append(w)
            continue
        if cur:
            cmds.append(_command(cur, env))
        cur = []
    return cmds


def _command(words: list[str], env: dict[str, str]) -> Command:
    first = words[0]
    i = 0
    while i < len(first) and first[i] in "-@+!:|":
        i += 1
    prefixes, path = first[:i], first[i:]
    rest = words[1:]
    if not path and rest:           # "- /bin/true" is not allowed by systemd, but be lenient
        path, rest = rest[0], rest[1:]
    if "@" in prefixes and rest:
        argv = rest                 # @/bin/x argv0 args...
    else:
        argv = [path, *rest]
    if ":" not in prefixes:
        expanded: list[str] = []
        for a in argv:
            m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", a)
            if m:                   # a bare $VAR word splits into words
                expanded.extend(w for w, _ in split_words(env.get(m.group(1), ""),
                                                          unescape_c=False))
            else:
                expanded.append(expand_env(a, env))
        argv = expanded
        path = expand_env(path, env)
    return Command(prefixes, path, tuple(argv))


# --- references to paths --------------------------------------------------------------------

@dataclass(frozen=True, **SLOTS)
class Reference:
    """A value of a unit that may name a path: ``is_path`` when it is one (absolute), otherwise
    free text to search for paths."""

    key: str
    text: str
    is_path: bool
    assignment: Assignment


def environment(unit: Unit, ctx: Context, env_files: dict[str, str] | None = None
                ) -> dict[str, str]:
    """The environment the unit's commands see from Environment= then EnvironmentFile= (whose
    settings override; ``env_files`` maps each file path to its text, missing ones absent)."""
    env: dict[str, str] = {}
    for a in unit.values("Service", "Environment") + unit.values("Socket", "Environment"):
        for k, v in environment_assignments(expand_specifiers(a.value, unit.name, ctx,
                                                              unit.fragment)):
            env[k] = v
    for path, _optional, _a in environment_files(unit, ctx):
        text = (env_files or {}).get(path)
        if text is not None:
            env.update(envfile.as_dict(envfile.parse(text)[0]))
    return env


def environment_files(unit: Unit, ctx: Context) -> list[tuple[str, bool, Assignment]]:
    """(path, optional, assignment) for every EnvironmentFile=."""
    out = []
    for section in ("Service", "Socket", "Mount", "Swap"):
        for a in unit.values(section, "EnvironmentFile"):
            v = expand_specifiers(a.value, unit.name, ctx, unit.fragment)
            optional = v.startswith("-")
            out.append((v.lstrip("-").strip(), optional, a))
    return out


def _strip_path_prefix(p: str) -> str:
    return p.lstrip("-+~") if p[:1] in "-+" else p


def references(unit: Unit, ctx: Context, env: dict[str, str] | None = None,
               homes: dict[str, str] | None = None) -> list[Reference]:
    """Every value of the unit that may name a path, with the setting it came from.
    ``homes`` (user -> home) resolves ``WorkingDirectory=~`` for a ``User=`` of the system
    manager; otherwise ``~`` is the manager's own home."""
    env = env or {}
    refs: list[Reference] = []
    name = unit.name
    tilde = ctx.home
    users = unit.values("Service", "User")
    if users and not ctx.user_manager:
        tilde = (homes or {}).get(expand_specifiers(users[-1].value, name, ctx), tilde)

    def spec(a: Assignment) -> str:
        return expand_specifiers(a.value, name, ctx, unit.fragment)

    for section, key in unit.settings():
        if key in FREE_TEXT:
            continue
        for a in unit.values(section, key):
            v = spec(a)
            if key in EXEC_KEYS:
                for cmd in parse_exec(v, env):
                    refs.append(Reference(key, cmd.path, cmd.path.startswith("/"), a))
                    refs.extend(Reference(key, arg, False, a) for arg in cmd.argv[1:])
            elif key in ("WorkingDirectory", "RootDirectory", "RootImage", "PIDFile", "What",
                         "Where", "SourcePath"):
                p = v.lstrip("-")
                if p.startswith("~"):
                    p = tilde + p[1:]
                if p.startswith("/"):
                    refs.append(Reference(key, p, True, a))
            elif key == "EnvironmentFile":
                p = v.lstrip("-").strip()
                refs.append(Reference(key, p, p.startswith("/"), a))
            elif key == "Environment":
                for k, val in environment_assignments(v):
                    refs.append(Reference(f"Environment {k}", val, False, a))
            elif key in PATH_LISTS:
                for w, _ in split_words(v):
                    p = _strip_path_prefix(w.lstrip("!|"))
                    refs.append(Reference(key, p, p.startswith("/"), a))
            elif key in BIND_LISTS:
                for w, _ in split_words(v):
                    parts = w.lstrip("-").split(":")
                    for p in parts[:2]:
                        refs.append(Reference(key, p, p.startswith("/"), a))
            elif key in DIRECTORY_KEYS:
                base = ctx.base(DIRECTORY_KEYS[key][1])
                for w, _ in split_words(v):
                    for rel in w.split(":"):
                        if rel:
                            refs.append(Reference(key, posixpath.join(base, rel), True, a))
            elif key in ("StandardInput", "StandardOutput", "StandardError"):
                for pre in ("file:", "append:", "truncate:"):
                    if v.startswith(pre):
                        refs.append(Reference(key, v[len(pre):], True, a))
            else:
                refs.append(Reference(key, v, False, a))
    if unit.type in ("mount", "automount") and not unit.values(None, "Where"):
        stem = name.rsplit(".", 1)[0]
        refs.append(Reference("Where", path_unescape(stem), True,
                              Assignment(unit.type.capitalize(), "Where", "", unit.fragment or
                                         name, 0, f"(unit name {name})")))
    return refs
