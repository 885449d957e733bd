"""Configuration that would mount or use the volume again, disarmed: an fstab line, a crontab
line, an ``/etc/exports`` entry or an LXC ``lxc.mount.entry`` commented out with a dated marker
(``# vacate 2026-12-01: `` and the line as it was). Proxmox container mount points are
deleted by ``pct`` instead (:mod:`vacate.act.pve_set`).

The file is read again as it is now, byte for byte, and the edit is refused when line N is
not the line planned (its sha256, taken when it was observed, differs: the file changed
since). The edit is made from those bytes, never from collected (redacted) text: only the
marker is added, every other byte stays. Before it, a backup of the file is written beside
it (``FILE.vacate-backup-YYYYmmddTHHMMSS``; in a directory cron reads whole, such as
``/etc/cron.d`` or a spool, with a leading dot, so that cron never runs the backup); both
are written crash-safe with the file's mode, owner and group. Then what reads the file is
told: ``systemctl daemon-reload`` for fstab where systemd runs the host (its generator
makes ``.mount`` units from fstab), the spool directory's mtime for a user's crontab,
``exportfs -ra`` for an export where ``exportfs`` is installed. An LXC container that runs
keeps the mount until it restarts: the outcome says so.

A line is counted as bytes up to ``\\n`` (a ``\\r`` before it stays the line end's).

A repointed line (``repoint-config``) names the new place as the plan spells both paths,
the way the file writes them (fstab's and ``lxc.mount.entry``'s octal escapes: ``\\040``);
a planned line the rewrite would leave as it was (the path written some other way) is
refused, never reported repointed.

A file inside a Proxmox container (``ct``: an environment file or a crontab there, named as
the container spells it) is read and written from the container's root by descriptor
(:mod:`vacate.act.inroot`: ``openat2`` with ``RESOLVE_IN_ROOT``), its symlinks followed as
the container follows them, never through ``/proc/PID/root``; the backup lies beside the
file it names.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
import stat
import time
from dataclasses import dataclass

from vacate.act import pve_set
from vacate.act.base import CommandFailed, Context, Outcome
from vacate.act.kernel import consumer_of
from vacate.act.kind import Kind
from vacate.observing.collectors.configured.cron import RUN_PARTS, SPOOLS
from vacate.observing.compat import SLOTS
from vacate.observing.fsio import file_kind, read_bounded, write_atomic
from vacate.observing.model.action import Where
from vacate.observing.model.plan import Step
from vacate.observing.parsers.redact import shown_text

KINDS = (Kind("edit-config"), Kind("repoint-config"))

MAX_BYTES = 16 << 20
MARK = re.compile(rb"# vacate \d{4}-\d{2}-\d{2}: (.*)", re.DOTALL)
BACKUP = ".vacate-backup-"
# directories whose every file cron reads (or runs): a backup there is hidden
CRON_DIRS = frozenset({"/etc/cron.d", *SPOOLS, *(f"/etc/cron.{p}" for p in RUN_PARTS)})


@dataclass(frozen=True, **SLOTS)
class _File:
    """A config file as read now: where it is, its stat, its bytes split at ``\\n``."""

    name: str          # as the host spells it (/etc/fstab), or the container for one in it
    at: int            # its directory, held open while the file is worked on
    base: str          # its name there
    shown_dir: str     # that directory as spelled (a link's target's, for a link inside a CT)
    st: os.stat_result
    data: bytes
    lines: list[bytes]


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _content(seg: bytes) -> tuple[bytes, bytes]:
    """A line without its end's ``\\r``, and that ``\\r`` (or nothing)."""
    return (seg[:-1], b"\r") if seg.endswith(b"\r") else (seg, b"")


def _targets(step: Step) -> list[tuple[int, str]]:
    """The lines the step comments out, each with the sha256 the plan took of it: one line,
    or (a Samba share) every line of a section."""
    p = step.params
    if p.lines:
        return list(p.lines)
    return [(p.line, p.line_sha256)]


def _directory(step: Step, ctx: Context, name: str) -> tuple[int, str, str]:
    """(the open directory that holds the file ``name``, its name there, the directory as
    spelled): the host's, or inside the step's container from its root."""
    ct = step.params.ct
    if ct is None:
        local = ctx.host.path(name)
        d = os.open(os.path.dirname(local) or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return d, os.path.basename(local), os.path.dirname(name)
    from vacate.act.inroot import Root
    from vacate.observing.ct import find_init

    init = find_init(ctx.host, str(ct))
    if init is None:
        raise OSError(f"CT {ct} is not running: its files are not reached")
    with Root(ctx.host.proc_path(init, "root")) as r:
        d, base, spelled = r.parent(name)
    return d, base, os.path.dirname(spelled)


@contextlib.contextmanager
def _loaded(step: Step, ctx: Context):
    """The file the step edits, read now, as (a _File, "") or (None, why it cannot be
    edited); its directory is closed after."""
    p = step.params
    name, n, sha = p.file, p.line, p.line_sha256
    if not name or not isinstance(n, int) or n < 1:
        yield None, "the step names no file and line"
        return
    if not sha:
        yield None, (f"the plan has no sha256 of {name}:{n}, so the line cannot be "
                     "checked before it is edited")
        return
    try:
        d, base, shown_dir = _directory(step, ctx, name)
    except OSError as e:
        yield None, f"{name}: {e.strerror or e}"
        return
    try:
        yield _read(step, name, d, base, shown_dir)
    finally:
        os.close(d)


def _read(step: Step, name: str, d: int, base: str, shown_dir: str
          ) -> tuple[_File | None, str]:
    try:
        st = os.stat(base, dir_fd=d, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            return None, f"{name} is a symbolic link: edit the file it names by hand"
        if not stat.S_ISREG(st.st_mode):
            return None, f"{name} is a {file_kind(st.st_mode)}, not a regular file"
        data, more = read_bounded(base, MAX_BYTES, follow=False, dir_fd=d)
    except OSError as e:
        return None, f"{name}: {e.strerror or e}"
    if more:
        return None, f"{name} is larger than {MAX_BYTES} bytes: not edited"
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    last = max(k for k, _h in _targets(step))
    if last > len(lines):
        return None, (f"{name} has no line {last} now ({len(lines)} lines): it changed "
                      "since the plan")
    return _File(name, d, base, shown_dir, st, data, lines), ""


def _line_state(f: _File, n: int, planned: str) -> str:
    """``planned``: line N is the planned line; ``marked``: it is that line commented out
    by vacate; ``changed``: anything else."""
    line, _cr = _content(f.lines[n - 1])
    if _sha(line) == planned:
        return "planned"
    m = MARK.fullmatch(line)
    return "marked" if m and _sha(m.group(1)) == planned else "changed"


def _state(step: Step, f: _File) -> str:
    """``marked`` when every line is commented out by vacate, ``changed`` when one is
    neither what was planned nor that, else ``planned``."""
    states = [_line_state(f, n, h) for n, h in _targets(step)]
    if "changed" in states:
        return "changed"
    return "marked" if all(x == "marked" for x in states) else "planned"


def _pve(step: Step) -> bool:
    return step.params.do == "delete-disks"


# -- repoint-config: each planned line kept behind the marker, the line with the migrated
#    paths written after it ---------------------------------------------------------------------
def _moves(step: Step) -> list[tuple[str, str]]:
    return list(step.params.moves)


def repointed(line: bytes, moves) -> bytes:
    """``line`` with each migrated path replaced by its new one."""
    from vacate.act.migrate import replaced

    return replaced(line.decode("utf-8", "surrogateescape"), moves).encode(
        "utf-8", "surrogateescape")


def _repoint_places(step: Step, f: _File) -> list[tuple[int, str]]:
    """Each planned line where it is now (0-based) and its state: ``planned``, ``marked``
    (behind the marker, the repointed line after it) or ``changed``. A line repointed
    already is two lines, so those after it moved down by one."""
    out, shift = [], 0
    for n, h in sorted(_targets(step)):
        i = n - 1 + shift
        state = _line_state(f, i + 1, h) if i < len(f.lines) else "changed"
        if state == "marked":
            old = MARK.fullmatch(_content(f.lines[i])[0]).group(1)
            nxt = _content(f.lines[i + 1])[0] if i + 1 < len(f.lines) else None
            if nxt != repointed(old, _moves(step)):
                state = "changed"
            shift += 1
        out.append((i, state))
    return out


def _repoint_state(step: Step, f: _File) -> str:
    states = [st for _i, st in _repoint_places(step, f)]
    if "changed" in states:
        return "changed"
    return "marked" if all(x == "marked" for x in states) else "planned"


def _edited(step: Step, f: _File, marker: bytes) -> tuple[list[bytes], list[dict]]:
    """The file's lines with every planned line behind the marker (commented out), and the
    line with the migrated paths after it for a repoint; what changed, line by line."""
    lines = list(f.lines)
    said = []
    if step.kind == "edit-config":
        for k, h in _targets(step):
            if _line_state(f, k, h) == "planned":
                line, cr = _content(lines[k - 1])
                lines[k - 1] = marker + line + cr
        return lines, said
    for i, state in reversed(_repoint_places(step, f)):
        if state != "planned":
            continue
        line, cr = _content(lines[i])
        new = repointed(line, _moves(step))
        lines[i:i + 1] = [marker + line + cr, new + cr]
        said.append({"line": i + 1, "before": _shown(line), "after": _shown(new)})
    return lines, said[::-1]


def _shown(line: bytes) -> str:
    from vacate.observing.parsers.redact import redact_text

    return shown_text(redact_text(line.decode("utf-8", "surrogateescape")), 300)


def _now_state(step: Step, f: _File) -> str:
    return _repoint_state(step, f) if step.kind == "repoint-config" else _state(step, f)


def done(step: Step, ctx: Context) -> bool:
    """Line N is the planned line behind vacate's marker (repointing: with the repointed
    line after it)."""
    if _pve(step):
        return pve_set.done(step, ctx)
    with _loaded(step, ctx) as (f, _why):
        return f is not None and _now_state(step, f) == "marked"


def ready(step: Step, ctx: Context) -> str | None:
    """None when line N of the file, read now, is the line planned (same sha256)."""
    if _pve(step):
        return pve_set.ready(step, ctx)
    with _loaded(step, ctx) as (f, why):
        return why if f is None else _changed(step, f)


def _changed(step: Step, f: _File) -> str | None:
    if _now_state(step, f) == "changed":
        n = next((k for k, h in _targets(step) if _line_state(f, k, h) == "changed"),
                 _targets(step)[0][0])
        now = shown_text(_content(f.lines[n - 1])[0].decode("utf-8", "surrogateescape"), 120)
        return f"line {n} of {f.name} is not the line planned: it changed since the plan " \
               f"(now: {now!r})"
    if step.kind == "repoint-config":
        moves = _moves(step)
        for i, state in _repoint_places(step, f):
            line = _content(f.lines[i])[0]
            if state == "planned" and repointed(line, moves) == line:
                return f"line {i + 1} of {f.name} does not spell " \
                       f"{', '.join(o for o, _n in moves)} as the plan does: it would stay " \
                       "as it is; repoint it by hand"
    return None


def _backup_name(f: _File, stamp: str) -> str:
    """A free name beside the file for its backup (hidden in a directory cron reads), in
    its directory."""
    hide = "." if f.shown_dir in CRON_DIRS else ""
    name = f"{hide}{f.base}{BACKUP}{stamp}"
    n = 1
    while _lexists(f.at, name):
        n += 1
        name = f"{hide}{f.base}{BACKUP}{stamp}-{n}"
    return name


def _lexists(d: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=d, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _kind(step: Step, ctx: Context) -> str | None:
    """The type of the consumer the line is (fstab, cron, nfs-export, lxc-container)."""
    c = consumer_of(step, ctx)
    if c is not None:
        return c.type
    name = step.params.file or ""
    if name == "/etc/fstab":
        return "fstab"
    return "nfs-export" if name == "/etc/exports" or name.startswith("/etc/exports.d/") \
        else None


def _tell(step: Step, ctx: Context, f: _File) -> str:
    """Tell what reads the file that it changed; what was told, or raises CommandFailed."""
    if os.path.dirname(f.name) in SPOOLS:
        os.utime(f.at)                        # cron looks again at a touched spool
        return "; cron's spool touched"
    if step.params.ct is not None:
        return ""                             # an environment file: read when the unit starts
    kind = _kind(step, ctx)
    if kind == "nfs-export":
        if shutil.which("exportfs") is None:
            return ""
        ctx.run(["exportfs", "-ra"])
        return "; exports re-read (exportfs -ra)"
    if kind == "lxc-container":
        c = consumer_of(step, ctx)
        if c is not None and c.attrs.running is False:
            return ""
        return "; a running container keeps the mount until it restarts"
    if kind == "smb-share":
        if shutil.which("smbcontrol") is None:
            return ""
        ctx.run(["smbcontrol", "all", "reload-config"], check=False)
        return "; Samba told to read its config again"
    if kind == "fstab":
        if not os.path.isdir(ctx.host.run_path("systemd", "system")):
            return ""
        ctx.run(["systemctl", "daemon-reload"])
        return "; systemd reloaded"
    return ""


def skipped(step: Step, ctx: Context) -> Outcome:
    """Done already: what reads the file is told again, in case a crash came between the
    edit and that."""
    if _pve(step):
        return pve_set.skipped(step, ctx)
    name, n = step.params.file, step.params.line
    try:
        with _loaded(step, ctx) as (f, why):
            if f is None:
                raise OSError(why)
            told = _tell(step, ctx, f)
    except (CommandFailed, OSError) as e:
        return Outcome("failed", f"{name}:{n} is commented out already, but: {e}")
    what = "repointed" if step.kind == "repoint-config" else "commented out"
    return Outcome("skipped", f"{name}:{n} is {what} already{told}")


def run(step: Step, ctx: Context) -> Outcome:
    """Back up the file, comment line N out, tell what reads it."""
    if _pve(step):
        return pve_set.run(step, ctx)
    with _loaded(step, ctx) as (f, why):
        if f is None:
            return Outcome("failed", why)
        return _rewrite(step, ctx, f)


def _rewrite(step: Step, ctx: Context, f: _File) -> Outcome:
    name, n = f.name, step.params.line
    now = time.localtime()
    backup = _backup_name(f, time.strftime("%Y%m%dT%H%M%S", now))
    marker = b"# vacate " + time.strftime("%Y-%m-%d", now).encode() + b": "
    lines, changes = _edited(step, f, marker)
    new = b"\n".join(lines) + (b"\n" if f.data.endswith(b"\n") else b"")
    shown_backup = os.path.join(f.shown_dir, backup)
    try:
        write_atomic(backup, f.data, like=f.st, dir_fd=f.at)
        st = os.stat(f.base, dir_fd=f.at, follow_symlinks=False)
        if (st.st_ino, st.st_size, st.st_mtime_ns) != (f.st.st_ino, f.st.st_size,
                                                        f.st.st_mtime_ns):
            return Outcome("failed", f"{name} changed while it was being edited: not edited "
                                     f"(the backup {shown_backup} is of it as it was read)")
        write_atomic(f.base, new, like=f.st, dir_fd=f.at)
    except OSError as e:
        return Outcome("failed", f"{name}: {e.strerror or e}")
    data = {"file": name, "line": n, "backup": shown_backup}
    what = "commented out"
    if step.kind == "repoint-config":
        what = "repointed"
        undo = ("cp", "-p", shown_backup, os.path.join(f.shown_dir, f.base))
        ct = step.params.ct
        data.update(changes=changes, sha256=_sha(new),
                    undo=shlex.join(Where("pct", name=str(ct)).wrap(undo) if ct else undo))
    try:
        told = _tell(step, ctx, f)
    except (CommandFailed, OSError) as e:
        return Outcome("failed", f"{name}:{n} {what} (backup {shown_backup}), but: {e}", data)
    return Outcome("ok", f"{name}:{n} {what} (backup {shown_backup}){told}", data)


def undo_repoint(step: Step, data: dict, ctx: Context) -> str:
    """Put back each line a ``repoint-config`` step rewrote (the marker and the repointed
    line become the line as it was), after a backup; refused, named, where a line was edited
    since. What was done, in words."""
    with _loaded(step, ctx) as (f, why):
        if f is None:
            raise CommandFailed(("undo", step.params.file or "?"), 1, why)
        return _put_back(step, ctx, f)


def _put_back(step: Step, ctx: Context, f: _File) -> str:
    places = _repoint_places(step, f)
    if all(st == "planned" for _i, st in places):
        return f"{f.name}: its lines are as they were (put back already)"
    if any(st == "changed" for _i, st in places):
        raise CommandFailed(("undo", f.name), 1, f"{f.name} was edited where vacate repointed "
                                                 "it: left as it is")
    lines = list(f.lines)
    for i, st in reversed(places):
        if st == "marked":
            old = MARK.fullmatch(_content(lines[i])[0]).group(1)
            lines[i:i + 2] = [old + _content(lines[i])[1]]
    backup = _backup_name(f, time.strftime("%Y%m%dT%H%M%S"))
    write_atomic(backup, f.data, like=f.st, dir_fd=f.at)
    write_atomic(f.base, b"\n".join(lines) + (b"\n" if f.data.endswith(b"\n") else b""),
                 like=f.st, dir_fd=f.at)
    told = _tell(step, ctx, f)
    shown_backup = os.path.join(f.shown_dir, backup)
    return f"{f.name}: {len(places)} line(s) put back as they were (backup {shown_backup}){told}"
