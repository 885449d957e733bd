"""The far side of ``vacate apply`` on a plan made over ssh: the operations the worker there
answers (added to the observing layer's by the stage), with the acting modules shipped beside
it. The side where the operator sits keeps the journal and asks for one step at a time; this
side holds the plan it was sent, runs each step's ``done`` / ``ready`` / ``run`` here, and
answers with the outcome. Nothing is written here but what the steps themselves write, a
lock, and the plan's entries files (sent, checked by sha256, kept in a directory of their
own until the apply ends).

One apply of a plan at a time here too: :func:`begin` takes a lock under ``/run/vacate``
named by the plan's sha256 and holds it for the life of this process, which ends with its
connection (:mod:`vacate.observing.worker`). A rerun after a dropped connection therefore
waits for the survivor to be gone, or is refused naming it: never two workers at once.

Standard library only, CPython 3.8.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import hashlib
import os
import shutil
import time

from vacate.observing.errors import VacateError
from vacate.observing.fsio import fsync_dir
from vacate.observing.host import Host

LOCK_DIRS = ("/run/vacate", "/run/lock/vacate")
WORK_DIR = "/var/tmp/vacate"
LOCK_WAIT_S = 15.0
NOTE_EVERY_S = 0.25
LEASE_S = 900.0         # an apply by module runs (Ansible) holds the plan this long between runs

_session: dict = {}


class Busy(VacateError):
    """Another apply of the same plan is running on this host."""


def _lock(sha: str) -> int:
    """The plan's lock here, held (its file says which process holds it)."""
    last = None
    for d in LOCK_DIRS:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            fd = os.open(os.path.join(d, f"apply-{sha[:32]}.lock"),
                         os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            _session["lease_path"] = os.path.join(d, f"apply-{sha[:32]}.lease")
            break
        except OSError as e:
            last = e
    else:
        raise VacateError(f"cannot make a lock for the apply under {' or '.join(LOCK_DIRS)}: "
                          f"{last}", hint="apply needs root there (--become)")
    end = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > end:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
                os.close(fd)
                raise Busy(f"another vacate apply of this plan is running there (pid "
                           f"{holder}); nothing was done",
                           hint="it ends when its connection is seen to have dropped; run "
                                "the apply again then") from None
            time.sleep(0.2)
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
    return fd


def begin(host: Host, plan: str, sha256: str, files: dict, token: str | None = None) -> dict:
    """Take the plan (its text, checked against ``sha256``) and its lock; ``files``: the
    entries files it names (name -> sha256). Answers which of them are still to be sent.
    ``token``: an apply carried out by one short process a call (Ansible's modules, each
    then :func:`resume`): the lease it holds on the plan here between its calls."""
    raw = plan.encode("ascii", "surrogateescape")
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise VacateError("the plan arrived damaged (its sha256 is not the one approved)")
    if _session.get("sha256") not in (None, sha256):
        raise VacateError("this worker holds another plan")
    if "lock" not in _session:
        _session["lock"] = _lock(sha256)
    if token is not None:
        _lease(sha256, token)
    work = os.path.join(host.path(WORK_DIR), f"apply-{sha256[:32]}")
    os.makedirs(work, mode=0o700, exist_ok=True)
    plan_path = os.path.join(work, "plan.json")
    with open(plan_path, "wb") as f:
        f.write(raw)
    _take(host, raw, sha256, work, plan_path, files)
    need = [n for n, sha in sorted(files.items()) if _sha_of(_safe_name(work, n)) != sha]
    return {"pid": os.getpid(), "need": need, "work": work}


def resume(host: Host, sha256: str, token: str) -> None:
    """In a new process, the apply :func:`begin` began with ``token``: its lock taken
    again, its lease renewed (another apply's live lease is refused), the plan read back
    from the work directory and checked against ``sha256``."""
    _session["lock"] = _lock(sha256)
    _lease(sha256, token)
    work = os.path.join(host.path(WORK_DIR), f"apply-{sha256[:32]}")
    plan_path = os.path.join(work, "plan.json")
    try:
        with open(plan_path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise VacateError(f"the apply's plan is not here ({e}): begin it again") from None
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise VacateError("the plan kept here is not the one approved: begin it again")
    with open(os.path.join(work, "files.json"), encoding="utf-8") as f:
        import json

        files = json.load(f)
    _take(host, raw, sha256, work, plan_path, files)


def _take(host: Host, raw: bytes, sha256: str, work: str, plan_path: str, files: dict) -> None:
    import json

    from vacate.act.base import Context
    from vacate.observing.fsio import write_atomic
    from vacate.observing.model.plan import Plan

    write_atomic(os.path.join(work, "files.json"), json.dumps(files).encode("ascii"))
    value = Plan.loads(raw.decode("ascii", "surrogateescape"))
    _session.update(sha256=sha256, work=work, files=dict(files),
                    ctx=Context(plan=value, host=host, plan_path=plan_path,
                                progress=_noter()))


def _lease(sha: str, token: str) -> None:
    """Hold the plan here for the apply named ``token`` (taken under its lock): refused while
    another apply's lease is younger than :data:`LEASE_S`; :func:`end` gives it back."""
    import json

    path = _session["lease_path"]
    try:
        with open(path, encoding="utf-8") as f:
            held = json.load(f)
    except (OSError, ValueError):
        held = None
    if isinstance(held, dict) and held.get("token") != token and \
            time.time() - float(held.get("at") or 0) < LEASE_S:
        raise Busy(f"another vacate apply of this plan is under way there (from "
                   f"{held.get('by') or '?'}, last heard {time.time() - held['at']:.0f} s ago);"
                   " nothing was done", hint="run the apply again once it is over")
    from vacate.observing.fsio import write_atomic

    write_atomic(path, json.dumps({"token": token, "at": time.time(),
                                   "by": token.split(":", 1)[0]}).encode("ascii"))
    _session["lease"] = path


def _safe_name(work: str, name: str) -> str:
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise VacateError(f"not an entries file's name: {name!r}")
    return os.path.join(work, name)


def _sha_of(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            h = hashlib.sha256()
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
            return h.hexdigest()
    except OSError:
        return None


def put(host: Host, name: str, offset: int, data: str, last: bool = False) -> int:
    """Write a piece of entries file ``name`` at ``offset``; with ``last``, check the whole
    file's sha256 against the one :func:`begin` was told and put it in place."""
    _ctx()
    path = _safe_name(_session["work"], name)
    expected = _session["files"].get(name)
    if expected is None:
        raise VacateError(f"the plan names no entries file {name}")
    fd = os.open(path + ".part", os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if offset == 0 else 0),
                 0o600)
    try:
        os.pwrite(fd, base64.b64decode(data), offset)
        if last:
            os.fsync(fd)
    finally:
        os.close(fd)
    if last:
        if _sha_of(path + ".part") != expected:
            os.unlink(path + ".part")
            raise VacateError(f"the entries file {name} arrived damaged")
        os.replace(path + ".part", path)
        fsync_dir(_session["work"])  # in place after a crash too (begin would ask for it again)
    return offset


def _ctx():
    ctx = _session.get("ctx")
    if ctx is None:
        raise VacateError("no plan was begun in this worker")
    return ctx


def _step(step_id: str):
    step = next((s for s in _ctx().plan.steps if s.id == step_id), None)
    if step is None:
        raise VacateError(f"the plan has no step {step_id!r}")
    return step


def _noter():
    """Progress of the step in progress, sent back at most every :data:`NOTE_EVERY_S`."""
    from vacate.observing import worker

    last = [0.0]

    def progress(step, done, total, what=""):
        now = time.monotonic()
        if now - last[0] >= NOTE_EVERY_S or done >= total:
            last[0] = now
            worker.note({"step": step.id, "done": done, "total": total, "what": what})
    return progress


def _told(step_id: str, earlier: dict | None):
    """The step, with what the journal (kept on the asking side) says of its earlier run
    put where its module looks for it (``Context.finished_earlier``)."""
    from vacate.observing.model.journal import StepState

    ctx, s = _ctx(), _step(step_id)
    if earlier and earlier.get("event") == "intent":      # begun, never said how it ended
        ctx.earlier[s.id] = StepState(s.id, "intent", None, "", None, None, {})
    elif earlier:
        ctx.earlier[s.id] = StepState(s.id, "outcome", earlier.get("status"), "", None, None,
                                      earlier.get("data") or {})
    else:
        ctx.earlier.pop(s.id, None)
    return s, ctx


def done(host: Host, step: str, earlier: dict | None = None) -> bool:
    """:func:`vacate.act.kind.still_done` of the step (``earlier``: as for :func:`step`)."""
    from vacate.act.kind import still_done

    s, ctx = _told(step, earlier)
    return still_done(s, ctx)


def ready(host: Host, step: str) -> str | None:
    """:func:`vacate.act.kind.precondition` of the step (a dry run's question)."""
    from vacate.act.kind import precondition

    return precondition(_step(step), _ctx())


def step(host: Host, step: str, earlier: dict | None = None,
         witnesses: dict | None = None) -> dict:
    """Carry the step out here (:func:`vacate.act.kind.attempt`); ``earlier``: what the
    journal says of it from an earlier run (``status``, ``data``); ``witnesses``: what it
    says now of the steps it relies on (``Context.witnesses``), the same way. The outcome,
    with the commands it ran."""
    from vacate.act.kind import attempt
    from vacate.observing import beat
    from vacate.observing.model.journal import StepState

    s, ctx = _told(step, earlier)
    ctx.witnesses = {sid: StepState(sid, "outcome", w.get("status"), "", None, None,
                                    w.get("data") or {})
                     for sid, w in (witnesses or {}).items() if isinstance(w, dict)}
    beat.doing(f"step {s.id} ({s.kind})")
    first = len(ctx.commands)
    out = attempt(s, ctx)
    return {"status": out.status, "detail": out.detail, "data": out.data,
            "commands": [list(c) for c in ctx.commands[first:]]}


def bring_back(host: Host, index: int) -> list:
    """:func:`vacate.act.migrate.bring_back_after` the step at ``index`` failed."""
    from vacate.act.migrate import bring_back_after

    ctx = _ctx()
    return bring_back_after(ctx.plan, index, ctx)


def end(host: Host, complete: bool = False) -> bool:
    """The apply is over for now; with ``complete`` its entries files are removed here."""
    work = _session.get("work")
    if complete and work:
        shutil.rmtree(work, ignore_errors=True)
    if _session.get("lease"):
        try:
            os.unlink(_session["lease"])
        except OSError:
            pass
    return True


OPS = {"apply_begin": begin, "apply_put": put, "apply_done": done, "apply_ready": ready,
       "apply_step": step, "apply_bring_back": bring_back, "apply_end": end}
