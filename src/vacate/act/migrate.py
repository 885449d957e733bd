"""Migrate: an item copied to another volume and read back, the units that use it repointed
by a drop-in of vacate's own, and started again from the new place.

- ``copy``: one pass of :func:`vacate.act.copy_tree.copy_pass` (the first while the service
  still runs; the ``final`` one after it stopped copies only what changed since). Done: the
  state file records the source exactly as it is now.
- ``verify-copy``: every copied file not read back yet is read back from the disk and its
  hash compared with the source's; a mismatch fails the step, naming the file, before
  anything is repointed. Done: every file of the copy was read back since it last changed.
- ``repoint-unit``: a drop-in ``UNIT.d/zz-vacate-migrate.conf`` (more ``z`` while another
  drop-in would sort after it) in the unit's own manager (none where no setting of the
  unit's own names the item: an environment file, repointed before, did), reached the way its stop step
  reaches it: under ``/etc/systemd/system`` for a system's manager (the host's, a
  container's); for a user's manager in that user's own unit directory
  (``~/.config/systemd/user``, as the manager's ``UnitPath`` says), written as that user,
  never in ``/etc/systemd/user``, which every user's manager reads. A template's instance
  gets it in its own directory (``name@inst.service.d``), not the template's. A user's
  manager refuses ``systemctl cat`` through ``-M``: the unit's files are read where it runs
  (:meth:`vacate.act.units._Manager.cat`). Each setting whose effective value names the
  item is written whole with the path replaced: a list setting (``ExecStart=``,
  ``Environment=``) cleared with an empty assignment first, then every value of it again
  (clearing ``Environment=`` alone would drop the admin's variables); then
  ``daemon-reload``. Done:
  the drop-in is there and ``systemctl show`` reports the new paths and none of the old.
- ``start-unit``: ``systemctl start``; done: the unit is active and its processes hold
  files under the new place and nothing on the old volume.

A failure between a unit's stop and its start brings it back from the old path
(:func:`bring_back`: vacate's drop-in removed, ``daemon-reload``, start): apply calls it.
``vacate undo PLAN`` removes exactly the drop-ins this apply wrote (:func:`undo`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import time

from vacate.act import copy_tree
from vacate.act.base import CommandFailed, Context, Outcome
from vacate.act.kind import Kind, params
from vacate.observing.compat import cut_suffix
from vacate.observing.fsio import makedirs_durable
from vacate.observing.model.plan import Step
from vacate.observing.model.window import window_of
from vacate.observing.parsers.paths import is_under

DROPIN = "vacate-migrate.conf"
MARK = "# written by vacate (migrate): remove this file to undo\n"
LIST_KEYS = ("ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop",
             "ExecStopPost", "ExecCondition", "Environment", "EnvironmentFile",
             "ReadWritePaths", "ReadOnlyPaths", "BindPaths", "BindReadOnlyPaths",
             "RequiresMountsFor")
SINGLE_KEYS = ("WorkingDirectory", "RootDirectory", "RootImage")
UNIT_SECTION = frozenset({"RequiresMountsFor"})
START_WAIT_S = 60.0
# sh -c AS_USER sh USER SCRIPT: SCRIPT run as USER (a name or a uid), with USER's groups
AS_USER = ('exec setpriv --reuid="$(id -u -- "$1")" --regid="$(id -g -- "$1")" --init-groups '
           'sh -c "$2"')


KINDS = (Kind("copy"),
         Kind("verify-copy", proves_itself=True, after_earlier=True),
         Kind("repoint-unit", after_earlier=True),
         Kind("start-unit", after_earlier=True))


# -- copy, verify-copy ------------------------------------------------------------------------
def _finished_and_gone(step: Step, ctx: Context) -> bool:
    """An earlier run finished the step and the source is gone since (the volume was
    unmounted after it): nothing can have changed it."""
    return ctx.finished_earlier(step) is not None and \
        not os.path.lexists(ctx.host.path(params(step).item))


def _copy_done(step: Step, ctx: Context) -> bool:
    p = params(step)
    if _finished_and_gone(step, ctx):
        return True
    return not copy_tree.unchanged(ctx.host.path(p.item), ctx.host.path(p.to))


def _verify_done(step: Step, ctx: Context) -> bool:
    p = params(step)
    if _finished_and_gone(step, ctx):
        return True
    src, dst = ctx.host.path(p.item), ctx.host.path(p.to)
    return ctx.finished_earlier(step) is not None and not copy_tree.unchanged(src, dst) and \
        copy_tree.all_read_back(src, dst)


def _copy_ready(step: Step, ctx: Context) -> str | None:
    p = params(step)
    if not os.path.lexists(ctx.host.path(p.item)):
        return f"{p.item} is not there to copy"
    parent = os.path.dirname(p.to.rstrip("/"))
    if not os.access(ctx.host.path(parent) if os.path.isdir(ctx.host.path(parent))
                     else _existing(ctx.host.path(parent)), os.W_OK):
        return f"{parent}: not writable"
    return None


def _existing(path: str) -> str:
    while not os.path.isdir(path):
        path = os.path.dirname(path)
    return path


def _copy(step: Step, ctx: Context) -> Outcome:
    p = params(step)
    total = next((i.apparent_bytes for i in ctx.plan.items if i.path == p.item), 0) or 1
    done = [0]

    def tell(n: int) -> None:
        done[0] += n
        ctx.tell(step, done[0], total, "copying")

    makedirs_durable(ctx.host.path(os.path.dirname(p.to.rstrip("/"))))
    r = copy_tree.copy_pass(ctx.host.path(p.item), ctx.host.path(p.to), tell=tell)
    data = {"files": r.files, "copied": r.copied, "bytes": r.bytes_copied,
            "reflinked": r.reflinked, "hardlinked": r.linked, "removed": r.removed,
            "warnings": r.warnings[:20], "to": p.to}
    what = "the pass after the stop" if p.final else "copied"
    return Outcome("ok", f"{what}: {r.copied} of {r.files} files, {r.bytes_copied} bytes to "
                         f"{p.to}" + (f" ({r.reflinked} reflinked)" if r.reflinked else ""),
                   data)


def read_back_hook(dest: str) -> None:
    """Called just before a copy is read back (tests flip a byte on the disk here)."""


def _verify(step: Step, ctx: Context) -> Outcome:
    p = params(step)
    src, dst = ctx.host.path(p.item), ctx.host.path(p.to)
    stale = copy_tree.unchanged(src, dst)
    if stale:
        return Outcome("failed", f"the copy at {p.to} is not of {p.item} as it is now: "
                                 + ", ".join(stale[:5]))
    r = copy_tree.read_back(src, dst, hook=read_back_hook)
    data = {"files": r.files, "bytes": r.bytes_read,
            "mismatches": [{"path": a, "why": b} for a, b in r.mismatches[:20]]}
    if r.mismatches:
        return Outcome("failed", "the copy read back from the disk differs from the source: "
                       + "; ".join(f"{a}: {b}" for a, b in r.mismatches[:5]), data)
    return Outcome("ok", f"{r.files} files ({r.bytes_read} bytes) read back from the disk "
                         f"at {p.to}: each as the source was read", data)


# -- the unit's manager -----------------------------------------------------------------------
def _stop_step(step: Step, ctx: Context) -> Step:
    sid = params(step).stop_step
    got = next((s for s in ctx.plan.steps if s.id == sid), None)
    if got is None or got.kind != "stop-unit":
        raise CommandFailed(("plan",), 2, f"step {sid} is not the unit's stop")
    return got


def _manager(step: Step, ctx: Context):
    from vacate.act import units

    return units._Manager(units.place(_stop_step(step, ctx), ctx), ctx)


def _in_manager(m, argv, input: str | None = None, check: bool = True):
    return m.ctx.run(m.where.wrap(tuple(argv)), input=input, check=check)


def _dropin_dir(m, unit: str) -> str:
    """The directory of vacate's drop-in for ``unit`` (an instance's name for an instance)
    in the manager ``m``."""
    if m.where.user is None:
        return f"/etc/systemd/system/{unit}.d"
    return f"{_user_unit_dir(m)}/{unit}.d"


def _user_unit_dir(m) -> str:
    """The user's own unit directory, as that user's manager reads it: in its ``UnitPath``
    the persistent ``$XDG_CONFIG_HOME/systemd/user``, the first there with its ``.control``
    twin (``~/.config/systemd/user``)."""
    argv = ("systemctl", "show", "-p", "UnitPath", "--value")
    paths = _in_manager(m, argv).stdout.split()
    for p in paths:
        if p.endswith("/systemd/user") and p + ".control" in paths:
            return p
    raise CommandFailed(m.where.wrap(argv), 1, f"the manager ({m.where.manager_words()}) "
                        "reports no unit directory of the user's own: "
                        f"{' '.join(paths)[:300]}")


def _as_owner(m, script: str) -> tuple[str, ...]:
    """``sh -c script`` for the manager's place, run as the user whose manager it is for a
    user's manager (what vacate writes in the user's directory is the user's, as
    ``systemctl --user edit`` leaves it)."""
    if m.where.user is None:
        return ("sh", "-c", script)
    return ("sh", "-c", AS_USER, "sh", m.where.user, script)


def _dropin_name(existing: list[str]) -> str:
    """A name that sorts after every drop-in there (systemd reads them in name order, the
    last setting wins)."""
    name = "zz-" + DROPIN
    others = [os.path.basename(x) for x in existing if not x.endswith(DROPIN)]
    while any(o >= name for o in others):
        name = "z" + name
    return name


def dropin_write_script(path: str) -> str:
    """The shell script (``sh -c``, in the unit's manager) that writes the drop-in ``path``
    from its stdin so that it is on the disk, whole, before it returns 0: a temporary file
    beside it, fsync'd (``sync FILE...`` fsyncs each), renamed over it, then its directory
    fsync'd, and with it every directory ``mkdir -p`` made and the one that names the topmost
    of them (a cut before the end leaves no drop-in or the one before, never half of one;
    ``tests/act/test_dropin_cuts.py`` cuts it at every step)."""
    d = os.path.dirname(path)
    tmp = f"{d}/.{os.path.basename(path)}.tmp"
    q = shlex.quote
    return (f"d={q(d)}; t={q(tmp)}; p={q(path)}; "
            # the deepest directory there already: what mkdir -p makes is below it
            'top=$d; while [ ! -d "$top" ]; do top=${top%/*}; top=${top:-/}; done; '
            'mkdir -p "$d" && cat > "$t" && sync "$t" && mv -f "$t" "$p" && '
            # $d, its parent, and up to (with) the deepest one that was there
            'set -- "$d" && s=$d && while :; do s=${s%/*}; s=${s:-/}; set -- "$@" "$s"; '
            '[ "${#s}" -le "${#top}" ] && break; done && sync "$@"')


def dropin_remove_script(path: str) -> str:
    """The shell script that removes the drop-in ``path`` (there or not; its directory
    there) and fsyncs its directory: gone for good when it returns 0, not back after a
    power cut."""
    return f"rm -f {shlex.quote(path)} && sync {shlex.quote(os.path.dirname(path))}"


def _ours(props: dict) -> str | None:
    return next((x for x in props.get("DropInPaths", "").split() if x.endswith(DROPIN)), None)


def effective(lines: list[tuple[str, int, str]]) -> dict[str, list[str]]:
    """Each setting's effective values from the unit's files in the order systemd reads
    them (``systemctl cat``): an empty assignment clears a list."""
    out: dict[str, list[str]] = {}
    cont = ""
    for _path, _n, text in lines:
        t = text.rstrip()
        if t.endswith("\\"):
            cont += t[:-1] + " "
            continue
        t, cont = cont + t, ""
        s = t.strip()
        if not s or s[0] in "#;[":
            continue
        k, sep, v = s.partition("=")
        if not sep:
            continue
        k, v = k.strip(), v.strip()
        if k in LIST_KEYS:
            if v == "":
                out[k] = []
            else:
                out.setdefault(k, []).append(v)
        elif k in SINGLE_KEYS:
            out[k] = [v]
    return out


_EDGE = "\\s\"':;,="      # what may stand either side of a path named in a setting


def _pattern(old: str) -> re.Pattern:
    """``old`` where it is a whole path or the start of one (followed by ``/``), never
    the inside of a longer one (``/x/data/m`` does not name ``/data/m``)."""
    return re.compile(f"(?<![^{_EDGE}])" + re.escape(old.rstrip("/")) + f"(?=$|[/{_EDGE}])")


def replaced(value: str, moves) -> str:
    """``value`` with each old path replaced by its new one (taken as it is: a backslash in
    it is no escape)."""
    for old, new in moves:
        to = new.rstrip("/")
        value = _pattern(old).sub(lambda _m, to=to: to, value)
    return value


def dropin_text(eff: dict[str, list[str]], moves) -> tuple[str, list[str]]:
    """The drop-in, and the settings it rewrites."""
    keys = [k for k, vs in eff.items() if any(replaced(v, moves) != v for v in vs)]
    sections: dict[str, list[str]] = {"Unit": [], "Service": []}
    for k in keys:
        sec = sections["Unit" if k in UNIT_SECTION else "Service"]
        if k in LIST_KEYS:
            sec.append(f"{k}=")
        sec += [f"{k}={replaced(v, moves)}" for v in eff[k]]
    text = MARK
    for name, lines in sections.items():
        if lines:
            text += f"[{name}]\n" + "\n".join(lines) + "\n"
    return text, keys


def _show(m, unit: str, keys) -> dict[str, str]:
    r = _in_manager(m, ("systemctl", "show", "-p", ",".join(keys), "--", unit))
    out = {}
    for line in r.stdout.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out.setdefault(k, "")
            out[k] += v
    return out


def _repoint_missing(step: Step, ctx: Context) -> list[str]:
    p = params(step)
    m = _manager(step, ctx)
    props = m.show(p.unit)
    ours = _ours(props)
    eff = effective(m.cat(p.unit))
    if ours is None:
        if not dropin_text(eff, p.moves)[1]:
            return []        # none of its own settings names them (an environment file did)
        return ["no drop-in of vacate's"]
    out = []
    shown = _show(m, p.unit, [k for k in eff if k in LIST_KEYS + SINGLE_KEYS] or ["Id"])
    for k, v in shown.items():
        if any(_pattern(old).search(v) for old, _new in p.moves):
            out.append(f"systemctl show reports {k} still naming the old path")
    if not any(any(_pattern(new).search(v) for _o, new in p.moves) for v in shown.values()):
        out.append("systemctl show reports none of the new paths")
    return out


def _none_missing(missing, step: Step, ctx: Context) -> bool:
    """A postcondition: ``missing(step, ctx)`` names nothing (False where it cannot tell)."""
    try:
        return not missing(step, ctx)
    except CommandFailed:
        return False


def _loaded(step: Step, ctx: Context) -> tuple[dict | None, str | None]:
    """The unit's properties from its manager, or why they cannot be had (no manager, or
    the unit not loaded there)."""
    from vacate.act import units

    unit = params(step).unit
    try:
        m = _manager(step, ctx)
        props = m.show(unit)
    except (units._NoManager, CommandFailed) as e:
        return None, str(e)
    if props.get("LoadState") != "loaded":
        return None, f"the manager ({m.where.manager_words()}) has no unit {unit} loaded"
    return props, None


def _repoint_done(step: Step, ctx: Context) -> bool:
    return _none_missing(_repoint_missing, step, ctx)


def _repoint_ready(step: Step, ctx: Context) -> str | None:
    from vacate.act import units

    props, why = _loaded(step, ctx)
    if why:
        return why
    if props.get("ActiveState") not in units.ACTIVE_NOT:
        return f"{params(step).unit} is {props.get('ActiveState')}: it is repointed only " \
               "while stopped"
    return None


def _repoint(step: Step, ctx: Context) -> Outcome:
    p = params(step)
    m = _manager(step, ctx)
    props = m.show(p.unit)
    eff = effective([x for x in m.cat(p.unit) if not x[0].endswith(DROPIN)])
    text, keys = dropin_text(eff, p.moves)
    if not keys:
        return Outcome("failed", f"no setting of {p.unit} names {', '.join(o for o, _ in p.moves)}"
                                 " any more")
    d = _dropin_dir(m, p.unit)
    existing = [x for x in props.get("DropInPaths", "").split()]
    old = _ours(props)
    name = os.path.basename(old) if old and os.path.dirname(old) == d else \
        _dropin_name(existing)
    path = f"{d}/{name}"
    _in_manager(m, _as_owner(m, dropin_write_script(path)), input=text)
    _in_manager(m, ("systemctl", "daemon-reload"))
    sha = hashlib.sha256(text.encode()).hexdigest()
    data = {"unit": p.unit, "manager": m.where.manager_words(), "dropin": path, "sha256": sha,
            "settings": keys, "before": {k: eff[k] for k in keys},
            "after": {k: [replaced(v, p.moves) for v in eff[k]] for k in keys},
            "undo": shlex.join(m.where.wrap(("rm", path))) + " && " +
            shlex.join(m.where.wrap(("systemctl", "daemon-reload")))}
    return Outcome("ok", f"{p.unit} repointed by {path} ({', '.join(keys)})", data)


# -- start-unit -------------------------------------------------------------------------------
def _unit_pids(m, unit: str, ctx: Context) -> list[int]:
    shown = _show(m, unit, ("MainPID", "ControlGroup"))
    cg = shown.get("ControlGroup", "")
    if cg and m.where.kind != "host":
        cg = _cgroup_base(m, ctx) + cg
    pids: list[int] = []
    for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup", "/sys/fs/cgroup/systemd"):
        try:
            with open(ctx.host.path(root + cg + "/cgroup.procs")) as f:
                pids = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            continue
        if pids:
            break
    if not pids and shown.get("MainPID", "0") not in ("", "0") and m.where.kind == "host":
        pids = [int(shown["MainPID"])]
    return pids


def _cgroup_base(m, ctx: Context) -> str:
    """Where the host has the cgroup root a container's manager names its units' cgroups
    from: "" without a cgroup namespace of its own; else what the host reads of the
    container init's cgroup less what the container reads of it (``/lxc/129/ns`` on
    Proxmox)."""
    from vacate.observing.collectors.cgroups import pick_path

    init = None
    if m.where.kind == "pct":
        from vacate.observing.ct import find_init

        init = find_init(ctx.host, str(m.where.name))
    elif m.where.kind == "pid-namespace":
        init = m.where.pid
    if init is None:
        return ""
    try:
        with open(ctx.host.proc_path(init, "cgroup"), errors="replace") as f:
            outside = pick_path(f.read()) or ""
        inside = pick_path(_in_manager(m, ("cat", "/proc/1/cgroup")).stdout) or ""
    except (OSError, CommandFailed):
        return ""
    inside = inside.rstrip("/")
    if not outside or outside == inside or not outside.endswith(inside):
        return ""
    return outside[:len(outside) - len(inside)].rstrip("/")


def _files_of(pid: int, ctx: Context) -> set[str]:
    out = set()
    try:
        with open(ctx.host.proc_path(pid, "maps"), "rb") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith(b"/"):
                    out.add(cut_suffix(parts[5].rstrip(b"\n").decode("utf-8",
                                                                       "surrogateescape"),
                                       " (deleted)"))
    except OSError:
        pass
    try:
        fds = ctx.host.proc_path(pid, "fd")
        for n in os.listdir(fds):
            try:
                out.add(os.readlink(os.path.join(fds, n)))
            except OSError:
                continue
        out.add(os.readlink(ctx.host.proc_path(pid, "cwd")))
    except OSError:
        pass
    return out


def _start_missing(step: Step, ctx: Context) -> list[str]:
    p = params(step)
    m = _manager(step, ctx)
    props = m.show(p.unit)
    if props.get("ActiveState") != "active":
        return [f"{p.unit} is {props.get('ActiveState')} ({props.get('SubState')})"]
    pids = _unit_pids(m, p.unit, ctx)
    if not pids:
        return [f"{p.unit} is active with no process found"]
    files = set()
    for pid in pids:
        files |= _files_of(pid, ctx)
    out = []
    old = sorted(f for f in files if is_under(f, p.away))
    if old:
        out.append(f"its processes still hold {', '.join(old[:3])} on {p.away}")
    if not any(is_under(f, new) for f in files for new in p.into):
        out.append(f"its processes hold nothing under {', '.join(p.into)} yet")
    return out


def _start_done(step: Step, ctx: Context) -> bool:
    return _none_missing(_start_missing, step, ctx)


def _start_ready(step: Step, ctx: Context) -> str | None:
    return _loaded(step, ctx)[1]


def _start(step: Step, ctx: Context) -> Outcome:
    p = params(step)
    m = _manager(step, ctx)
    cmd = m.command("start", p.unit)
    ctx.run(cmd)
    deadline = time.monotonic() + START_WAIT_S
    missing = _start_missing(step, ctx)
    while missing and time.monotonic() < deadline:
        time.sleep(0.2)
        missing = _start_missing(step, ctx)
    data = {"unit": p.unit, "manager": m.where.manager_words(), "commands": [list(cmd)]}
    if missing:
        return Outcome("failed", f"{shlex.join(cmd)} ran, and " + "; ".join(missing), data)
    return Outcome("ok", f"{p.unit} runs again, from {', '.join(p.into)}", data)


# -- the interface ----------------------------------------------------------------------------
_DONE = {"copy": _copy_done, "verify-copy": _verify_done, "repoint-unit": _repoint_done,
         "start-unit": _start_done}
_READY = {"copy": _copy_ready, "verify-copy": lambda s, c: None, "repoint-unit": _repoint_ready,
          "start-unit": _start_ready}
_RUN = {"copy": _copy, "verify-copy": _verify, "repoint-unit": _repoint, "start-unit": _start}


def done(step: Step, ctx: Context) -> bool:
    return _DONE[step.kind](step, ctx)


def ready(step: Step, ctx: Context) -> str | None:
    return _READY[step.kind](step, ctx)


def skipped(step: Step, ctx: Context) -> Outcome:
    """Done already; for a unit, the drop-in that repoints it, or that none was needed."""
    if step.kind != "repoint-unit":
        return Outcome("skipped", "already done")
    from vacate.act import units

    p = params(step)
    try:
        m = _manager(step, ctx)
        ours = _ours(m.show(p.unit))
    except (units._NoManager, CommandFailed, OSError):
        return Outcome("skipped", "already done")
    data = {"unit": p.unit, "manager": m.where.manager_words(), "dropin": ours, "settings": []}
    if ours is None:
        return Outcome("skipped", f"none of {p.unit}'s own settings names "
                                  f"{', '.join(o for o, _n in p.moves)}: no drop-in needed",
                       data)
    return Outcome("skipped", f"{p.unit} is repointed already by {ours}", data)


def run(step: Step, ctx: Context) -> Outcome:
    return _RUN[step.kind](step, ctx)


# -- before a migrated item's source is deleted -----------------------------------------------
def not_moved_yet(item, ctx: Context) -> str | None:
    """Why the source of the migrate item ``item`` (a PlanItem) may not be deleted yet, or
    None: its copy must be of the source as it is now and read back whole, and every unit
    repointed to it must run from it (active, its processes holding files under the copy
    and nothing on the volume)."""
    src, dst = ctx.host.path(item.path), ctx.host.path(item.migrate_to)
    stale = copy_tree.unchanged(src, dst)
    if stale:
        return (f"the copy at {item.migrate_to} is not of {item.path} as it is now "
                f"({', '.join(stale[:3])}): its source is kept")
    if not copy_tree.all_read_back(src, dst):
        return (f"not every file of the copy at {item.migrate_to} was read back from the "
                f"disk: {item.path} is kept")
    for s in ctx.plan.steps:
        if s.kind == "start-unit" and item.migrate_to in s.params.into:
            try:
                missing = _start_missing(s, ctx)
            except CommandFailed as e:
                missing = [str(e)]
            if missing:
                return (f"{params(s).unit} does not run from {item.migrate_to} ("
                        f"{'; '.join(missing)}): {item.path} is kept")
    return None


# -- when a step fails between a stop and its start; undo --------------------------------------
def bring_back(step: Step, ctx: Context) -> str:
    """The unit of ``step`` started again from the old path: vacate's drop-in removed,
    ``daemon-reload``, start. What was done, in words."""
    p = params(step)
    m = _manager(step, ctx)
    props = m.show(p.unit)
    ours = _ours(props)
    said = []
    if ours:
        _in_manager(m, ("sh", "-c", dropin_remove_script(ours)))
        said.append(f"removed {ours}")
    _in_manager(m, ("systemctl", "daemon-reload"))
    _in_manager(m, ("systemctl", "start", p.unit))
    said.append(f"started {p.unit} from the old path")
    return ", ".join(said)


def undo_dropin(plan, step: Step, data: dict, ctx: Context) -> str:
    """Remove the drop-in a ``repoint-unit`` step wrote (refused, named, when it was edited
    since); ``daemon-reload``. Nothing else is touched."""
    m = _manager(step, ctx)
    path = data.get("dropin")
    if not path or not path.endswith(DROPIN):
        return f"{step.id}: no drop-in recorded"
    r = _in_manager(m, ("cat", path), check=False)
    if r.returncode != 0:
        return f"{path} is not there (removed already)"
    if hashlib.sha256(r.stdout.encode()).hexdigest() != data.get("sha256"):
        raise CommandFailed(("cat", path), 1, f"{path} was edited since vacate wrote it: "
                                              "left as it is")
    _in_manager(m, ("sh", "-c", dropin_remove_script(path)))
    _in_manager(m, ("systemctl", "daemon-reload"))
    return f"removed {path} ({params(step).unit}: back to its own settings)"


def bring_back_after(plan, failed_index: int, ctx: Context) -> list[str]:
    """Every unit of :func:`window_of` brought back from the old path; what was done, or
    that it could not be, one sentence each."""
    from vacate.observing.errors import VacateError

    said = []
    for s in window_of(plan, failed_index):
        try:
            said.append(bring_back(s, ctx))
        except (OSError, VacateError, CommandFailed) as e:
            said.append(f"{s.params.unit} could NOT be brought back: {e}")
    return said

