"""Writing the plan the marks make, through the planner ``vacate plan`` uses (browse is a
front end to it, never a second planner), and the ``vacate plan ...`` command line that
makes the same plan in a script.

From an observation: :func:`vacate.flow.plan.plan` with the marks as overrides, which looks
at the volume again (here, or ``--host``); what changed since the observation is said
before anything is written. From a loaded plan: its items' actions edited, the steps made
again as ``vacate plan --from`` makes them (:func:`vacate.flow.replan.replan`); a plan that
has a journal is never rewritten."""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
from dataclasses import dataclass

from vacate.observing.errors import UsageError

_PLAIN = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def quote(arg: str) -> str:
    """``arg`` quoted as a POSIX shell (bash, zsh) needs it: plain, in single quotes, or as
    ``$'...'`` with ``\\xNN`` escapes where it holds bytes that are not printable UTF-8
    (kept as ``\\udcNN`` by surrogateescape), control characters or bidi controls."""
    if _PLAIN.match(arg):
        return arg
    raw = os.fsencode(arg)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable() and not re.search(
            "[\u200e\u200f\u202a-\u202e\u2066-\u2069]", text):
        return shlex.quote(text)
    out = []
    for ch in arg:
        o = ord(ch)
        if 0xdc80 <= o <= 0xdcff:
            out.append(f"\\x{o - 0xdc00:02x}")
        elif ch in "\\'":
            out.append("\\" + ch)
        elif ch.isprintable() and not re.match("[\u200e\u200f\u202a-\u202e\u2066-\u2069]", ch):
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape"))
    return "$'" + "".join(out) + "'"


def command_line(volume, output: str | None, *, remote: str | None = None,
                 ct: str | None = None, source: str | None = None) -> str:
    """The command that makes the plan the marks make: ``vacate plan MOUNT ... --keep P``,
    or for a loaded plan ``vacate plan --from EDITED -o NEW`` after the items' actions it
    edits (``source``: the plan file)."""
    if volume.loaded_plan is not None:
        edits = [f"{os.path.relpath(p, volume.root)}: {a}" for p, a in sorted(volume.marks.items())]
        line = "vacate plan --from " + quote(source or "EDITED") + " -o " + quote(output or "NEW")
        return ("edit the items' actions (" + "; ".join(edits) + "), then " + line) if edits \
            else line
    argv = ["vacate", "plan", volume.root]
    if remote:
        argv += ["--host", remote]
    if ct:
        argv += ["--ct", ct]
    if volume.archive_to:
        argv += ["--archive-to", volume.archive_to]
    for action, rel in volume.overrides():
        argv += [f"--{action}", rel]
    if output:
        argv += ["-o", output]
    return " ".join(quote(a) for a in argv)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A plan made and not yet written, with what changed on the volume since it was
    observed (one line each; empty when nothing did) and what was looked at again."""

    plan: object
    changes: tuple[str, ...]
    looked_again: tuple[str, ...] = ()


def _has_journal(path: str) -> bool:
    from vacate.observing.model.journal import path_for

    try:
        return os.path.getsize(path_for(path)) > 0
    except OSError:
        return False


class Writer:
    """What ``w`` does. ``reach()``: a context manager giving the :mod:`vacate.remote`
    reach the plan is made through (here, or ``--host``); ``output``: the plan file;
    ``source``: the plan file browsed, when it is one."""

    def __init__(self, reach, output: str | None, *, source: str | None = None,
                 remote: str | None = None, ct: str | None = None):
        self.reach = reach
        self.output = output
        self.source = source
        self.remote = remote
        self.ct = ct

    def where(self) -> str:
        return f"{self.remote}" if self.remote else "this machine"

    def command(self, volume) -> str:
        return command_line(volume, self.output, remote=self.remote, ct=self.ct,
                            source=self.source)

    def prepare(self, volume) -> Prepared:
        """The plan, made as ``vacate plan`` makes it; raises UsageError when it cannot be."""
        if not self.output:
            raise UsageError("no plan file to write: start browse with -o PLAN")
        if volume.loaded_plan is not None:
            return self._prepare_edit(volume)
        from vacate.flow.plan import plan

        with self.reach() as reach:
            made = plan(volume.root, reach=reach, archive_to=volume.archive_to,
                        overrides=volume.overrides(), outputs=(self.output,))
        return Prepared(made, tuple(changes(volume.obs, made.observation)))

    def _prepare_edit(self, volume) -> Prepared:
        from vacate.flow.replan import replan

        for p in (self.source, self.output):
            if p and _has_journal(p):
                raise UsageError(f"{p} has a journal ({p}.journal): an apply of it began, and "
                                 "a plan that was applied is never rewritten")
        with open(self.source, "rb") as f:
            doc = json.loads(f.read().decode("ascii", "surrogateescape"))
        for it in doc.get("items", ()):
            if it.get("path") in volume.marks:
                it["action"] = volume.marks[it["path"]]
        d = os.path.dirname(os.path.abspath(self.output))
        fd, tmp = tempfile.mkstemp(prefix=".browse-edited-", suffix=".plan", dir=d)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                json.dump(doc, f, indent=1, ensure_ascii=True)
            got = replan(tmp, outputs=(self.output,))
        finally:
            os.unlink(tmp)
        return Prepared(got.plan, (), tuple(got.looked_again) + tuple(got.changes))

    def commit(self, prepared: Prepared) -> str:
        from vacate.observing.fsio import write_atomic

        write_atomic(self.output, prepared.plan.dumps().encode("ascii"))
        return self.output


def changes(before, after) -> list[str]:
    """What differs between two observations of the volume, for a person: items come or
    gone or changed (files, size, newest mtime), users come or gone."""
    out = []
    old = {it.path: it for it in before.inventory.items if it.parent is None}
    new = {it.path: it for it in after.inventory.items if it.parent is None}
    for p in sorted(new.keys() - old.keys()):
        out.append(f"new: {p}")
    for p in sorted(old.keys() - new.keys()):
        out.append(f"gone: {p}")
    for p in sorted(old.keys() & new.keys()):
        a, b = old[p].stats, new[p].stats
        what = []
        if a.files != b.files:
            what.append(f"{a.files} -> {b.files} files")
        if a.apparent_bytes != b.apparent_bytes:
            what.append(f"{a.apparent_bytes} -> {b.apparent_bytes} bytes")
        if (a.newest_mtime or 0) != (b.newest_mtime or 0) and not what:
            what.append("modified")
        if what:
            out.append(f"changed: {p}: " + ", ".join(what))
    was = {c.id: c for c in before.consumers}
    now = {c.id: c for c in after.consumers}
    for i in sorted(now.keys() - was.keys()):
        out.append(f"new user: {now[i].type} {now[i].name}")
    for i in sorted(was.keys() - now.keys()):
        out.append(f"no longer a user: {was[i].type} {was[i].name}")
    return out
