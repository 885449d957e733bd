"""Hosts from an Ansible inventory, read the way testinfra's ansible backend reads them:
``ansible-inventory -i SOURCE --list [--limit PATTERN]`` (ansible-core's Python API is
documented as internal; its command line is not). So every form Ansible reads works: INI, YAML,
directories, dynamic inventory scripts and plugins, ``group_vars`` / ``host_vars``, vaulted
files and values (with the vault options the user gives, as to Ansible).

Each host's variables become an :class:`~vacate.remote.ssh.SshTarget`. They are data: they
go into ssh's argument vector (never through a shell), extra arguments are split as a shell
would split them (:func:`shlex.split`), and a host, user or port that ssh would take for an
option is refused for that host. What cannot be honoured (a connection other than ssh, a
``become_method`` other than sudo, a Jinja2 template vacate cannot evaluate) is an error for
that host, by name, never a silent skip.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass

from vacate.observing import tools
from vacate.observing.errors import UsageError, VacateError
from vacate.remote.ssh import ARGS_ENV, SshTarget, check_name

INVENTORY_TIMEOUT_S = 300
SSH_CONNECTIONS = {"ssh", "smart", "ansible.builtin.ssh", "ansible.legacy.ssh"}
BECOME_METHODS = {"sudo", "ansible.builtin.sudo"}
VAULTED = "__ansible_vault"


@dataclass(frozen=True)
class InventoryHost:
    """One host of the inventory: its ``name`` there (``inventory_hostname``) and where to
    go, or why it cannot be looked at (``error``, with ``target`` None)."""

    name: str
    target: SshTarget | None = None
    error: str | None = None
    kind: str | None = None         # unsupported / refused, with error


@dataclass(frozen=True)
class VaultArgs:
    """The vault options the user gave, passed to ``ansible-inventory`` and, for an inline
    ``!vault`` value vacate needs, to ``ansible-vault decrypt`` (the password itself never
    passes through vacate)."""

    argv: tuple[str, ...] = ()


def _tool(name: str) -> str:
    found = tools.which(name)
    if found is None:
        raise UsageError(f"--inventory needs {tools.looked(name)} (it comes with ansible-core)",
                         hint="pip install 'vacate[ansible]' (or ansible-core >= 2.15)")
    return found


def read(source: str, limit: str | None = None,
         vault: VaultArgs = VaultArgs()) -> tuple[dict, list[str]]:
    """``ansible-inventory --list`` for ``source`` (``--limit`` as Ansible's patterns): the
    parsed JSON, and the sources Ansible could not parse (it warns and goes on without them:
    the hosts there, if any, are missing from the list)."""
    if not os.path.exists(source) and "," not in source:
        raise UsageError(f"--inventory {source}: no such file or directory")
    argv = [_tool("ansible-inventory"), "-i", source, "--list", *vault.argv]
    if limit is not None:
        argv += ["--limit", limit]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=INVENTORY_TIMEOUT_S,
                           stdin=subprocess.DEVNULL if not _prompts(vault) else None,
                           env=_quiet_env(), check=False)
    except subprocess.TimeoutExpired:
        raise VacateError(f"ansible-inventory -i {source} gave no answer in "
                          f"{INVENTORY_TIMEOUT_S} s") from None
    if r.returncode != 0:
        raise VacateError(f"ansible-inventory -i {source} failed (exit {r.returncode}): "
                          + _last_lines(r.stderr),
                          hint="pass --vault-password-file or --vault-id as to Ansible"
                          if "vault" in r.stderr.lower() else None)
    try:
        data = json.loads(r.stdout)
    except ValueError as e:
        raise VacateError(f"ansible-inventory -i {source}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise VacateError(f"ansible-inventory -i {source}: expected an object")
    unparsed = UNPARSED.findall(r.stderr)
    if not host_names(data) and (unparsed or "No inventory was parsed" in r.stderr):
        raise UsageError(f"--inventory {source}: Ansible could not read it: "
                         + _last_lines(r.stderr))
    return data, unparsed


UNPARSED = re.compile(r"Unable to parse (.+?) as an inventory source")


def _prompts(vault: VaultArgs) -> bool:
    return any(a in ("-J", "--ask-vault-pass", "--ask-vault-password") or "@prompt" in a
               for a in vault.argv)


def _quiet_env() -> dict:
    # no colour codes in what we quote, no "cowsay"; the user's ANSIBLE_* settings stay
    return dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1",
                ANSIBLE_NOCOWS="1")


def _last_lines(text: str, n: int = 3) -> str:
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return " / ".join(lines[-n:]) or "(nothing on stderr)"


def host_names(data: dict) -> list[str]:
    """Every host, in the inventory's order: the groups from ``all`` down (children after
    a group's own hosts), each host once. Hosts with no variables appear only in groups."""
    seen: dict[str, None] = {}
    done: set[str] = set()

    def walk(group: str) -> None:
        if group in done:
            return
        done.add(group)
        g = data.get(group)
        if not isinstance(g, dict):
            return
        for h in g.get("hosts") or ():
            seen.setdefault(str(h), None)
        for child in g.get("children") or ():
            walk(str(child))

    walk("all")
    for group in data:                  # a dynamic script may not nest under "all"
        if group != "_meta":
            walk(group)
    for h in (data.get("_meta") or {}).get("hostvars") or {}:
        seen.setdefault(str(h), None)
    return list(seen)


def hosts(data: dict, *, vault: VaultArgs = VaultArgs(), python: str | None = None,
          become: bool = False) -> list[InventoryHost]:
    """Each host of ``ansible-inventory --list`` output, mapped to where to go.
    ``python`` / ``become``: defaults for hosts whose variables do not say."""
    hostvars = (data.get("_meta") or {}).get("hostvars") or {}
    base = tuple(shlex.split(os.environ.get(ARGS_ENV, "")))
    out = []
    for name in host_names(data):
        try:
            target = to_target(name, hostvars.get(name) or {}, base=base, vault=vault,
                               python=python, become=become)
        except Unsupported as e:
            out.append(InventoryHost(name, error=str(e), kind="unsupported"))
        except Refused as e:
            out.append(InventoryHost(name, error=str(e), kind="refused"))
        else:
            out.append(InventoryHost(name, target=target))
    return out


class Unsupported(Exception):
    """What the host's variables ask for is not something vacate does (yet)."""


class Refused(Exception):
    """A variable vacate will not use as given (it would become an ssh option, it is not a
    port, it is a template)."""


def _first(v: dict, *names: str):
    for n in names:
        if v.get(n) is not None:
            return n, v[n]
    return names[0], None


def _text(name: str, var: str, value, vault: VaultArgs) -> str | None:
    """A variable's value as text: a vaulted value decrypted, a template refused."""
    if value is None:
        return None
    if isinstance(value, dict) and VAULTED in value:
        value = _decrypt(name, var, value[VAULTED], vault)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise Refused(f"{name}: {var} is {type(value).__name__}, not text")
    value = str(value)
    if "{{" in value or "{%" in value:
        raise Refused(f"{name}: {var} is a template ({value!r}); vacate does not evaluate "
                      "Jinja2: set the value itself")
    return value


def _decrypt(name: str, var: str, ciphertext: str, vault: VaultArgs) -> str:
    """An inline ``!vault`` value, through ``ansible-vault decrypt`` (ciphertext on stdin,
    plaintext on stdout: nothing is written to disk)."""
    if not vault.argv and not os.environ.get("ANSIBLE_VAULT_PASSWORD_FILE"):
        raise Refused(f"{name}: {var} is vault-encrypted: pass --vault-password-file or "
                      "--vault-id as to Ansible")
    argv = [_tool("ansible-vault"), "decrypt", "--output", "-", *vault.argv]
    r = subprocess.run(argv, input=ciphertext, capture_output=True, text=True,
                       timeout=INVENTORY_TIMEOUT_S, env=_quiet_env(), check=False)
    if r.returncode != 0:
        raise Refused(f"{name}: {var} could not be decrypted: {_last_lines(r.stderr, 1)}")
    return r.stdout


def _truth(name: str, var: str, value, vault: VaultArgs) -> bool:
    if isinstance(value, bool) or value is None:
        return bool(value)
    text = _text(name, var, value, vault).strip().lower()
    if text in ("yes", "true", "on", "1", "y", "t"):
        return True
    if text in ("no", "false", "off", "0", "n", "f", ""):
        return False
    raise Refused(f"{name}: {var}={text!r} is neither true nor false")


def to_target(name: str, v: dict, *, base: tuple[str, ...] = (),
              vault: VaultArgs = VaultArgs(), python: str | None = None,
              become: bool = False) -> SshTarget:
    """The ssh target the host's variables describe (Ansible's names and precedence):
    ``ansible_host``, ``ansible_port``, ``ansible_user``, ``ansible_ssh_private_key_file``,
    ``ansible_ssh_common_args``, ``ansible_ssh_extra_args``, ``ansible_python_interpreter``,
    ``ansible_become`` / ``ansible_become_user``. ``base``: the options every host gets first
    (``$VACATE_SSH_ARGS``, as Ansible's ``ssh_args``)."""
    conn = _text(name, "ansible_connection", v.get("ansible_connection"), vault) or "ssh"
    if conn not in SSH_CONNECTIONS:
        raise Unsupported(f"{name}: ansible_connection={conn} is not supported yet (vacate "
                          "reaches hosts through ssh only)")
    _, host = _first(v, "ansible_host", "ansible_ssh_host")
    host = _text(name, "ansible_host", host, vault) or name
    var, port = _first(v, "ansible_port", "ansible_ssh_port")
    port = _text(name, var, port, vault)
    if port is not None:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise Refused(f"{name}: {var}={port!r} is not a port")
        port = int(port)
    var, user = _first(v, "ansible_user", "ansible_ssh_user")
    user = _text(name, var, user, vault)
    try:
        check_name(name, host, user)
    except UsageError as e:      # its message names --host: say which variable instead
        why = e.message.split(": ", 1)[-1]
        raise Refused(f"{name}: {why} (ansible_host={host!r}, ansible_user={user!r})") \
            from None
    options = list(base)
    var, key = _first(v, "ansible_ssh_private_key_file", "ansible_private_key_file")
    key = _text(name, var, key, vault)
    if key:
        options += ["-i", os.path.expanduser(key)]
    for var in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        text = _text(name, var, v.get(var), vault)
        if text:
            try:
                options += shlex.split(text)
            except ValueError as e:
                raise Refused(f"{name}: {var} does not split as a shell would ({e})") from None
    interp = _text(name, "ansible_python_interpreter", v.get("ansible_python_interpreter"),
                   vault)
    if interp is None or interp.startswith("auto"):   # auto, auto_silent, auto_legacy...
        interp = python or "python3"
    if interp.startswith("-"):
        raise Refused(f"{name}: ansible_python_interpreter may not begin with '-'")
    do_become = become
    if v.get("ansible_become") is not None:
        do_become = _truth(name, "ansible_become", v["ansible_become"], vault)
    become_user = None
    if do_become:
        method = _text(name, "ansible_become_method", v.get("ansible_become_method"), vault)
        if method is not None and method not in BECOME_METHODS:
            raise Unsupported(f"{name}: ansible_become_method={method} is not supported yet "
                              "(vacate becomes root through sudo -n only)")
        become_user = _text(name, "ansible_become_user", v.get("ansible_become_user"), vault)
        if become_user is not None and (become_user.startswith("-") or not become_user):
            raise Refused(f"{name}: ansible_become_user={become_user!r} is not a user name")
    return SshTarget(host=host, user=user or None, port=port, options=tuple(options),
                     python=interp, become=do_become, become_user=become_user)
