"""``vacate apply`` and ``vacate undo`` crashed for real on the cut filesystem
(:mod:`harness.lazyfs`), over and over, and what must hold after each crash.

A :class:`Rig` is a small volume (:func:`harness.retire.fill`) on one cut filesystem and,
on a second one, everything apply writes elsewhere: the archive destination, the plan and
its journal, the copy of a migrated item, and a copy of ``/etc`` (an fstab line and a
crontab line that name the volume; the run's ``Host(etc=...)``). A crash (:meth:`Rig.crash`)
is the apply's process group killed with ``SIGKILL`` and both filesystems cut: at a journal
point (the process kills itself right after its k-th journal record is fsynced), right after
the n-th changing request one filesystem gets (``arm``), or after a random delay.

After each crash, :meth:`Rig.broken_promises` checks what every ``ok`` in the journal
promised (an archive that restores with stock tools, a deleted item gone, a config line
edited with its backup whole, a copy equal to its source); a crash's *kind* is the kind of
the step in progress (its intent the journal's last record) or ``journal`` between two
steps (:class:`Tally` counts them). The chain ends with a whole rerun, compared with an
uninterrupted run (:meth:`Rig.end_state`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Self

import vacate
from harness.lazyfs import LazyFS
from harness.retire import fill, restore_with_stock_tools, tree_hashes
from vacate.observing.model.journal import path_for, read_records

SRC = os.path.dirname(os.path.dirname(vacate.__file__))
# the hundreds of runs compile vacate once (outside the checkout), not each time
RUN_ENV = {"PYTHONPATH": SRC, "PYTHONDONTWRITEBYTECODE": "",
           "PYTHONPYCACHEPREFIX": os.path.join(tempfile.gettempdir(), "vacate-powercut-pyc")}
SEED_ENV = "VACATE_CUT_SEED"

# apply or undo in a process of its own, with /etc read from the rig's copy; with
# KILL_AT=k it kills itself right after its k-th journal record is written and fsynced
DRIVER = """
import json, os, signal, sys
k = int(os.environ.get("KILL_AT", "0"))
new = os.environ.get("KILL_NEW")
pause = os.environ.get("PAUSE_FDS")
if k or new or pause:
    from vacate.act import journal
    real, n, seen = journal.Journal.write, [0], set(json.loads(new or "[]"))
    def write(self, rec):
        real(self, rec)
        n[0] += 1
        if n[0] == k or (new and "%s/%s" % (rec.get("step"), rec["event"]) not in seen):
            os.killpg(0, signal.SIGKILL)
        if pause:       # say which record is on the disk, and wait to be told to go on
            w, r = map(int, pause.split(","))
            os.write(w, ("%s %s\\n" % (rec.get("step"), rec["event"])).encode())
            os.read(r, 1)
    journal.Journal.write = write
from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.host import Host
sys.exit(main(sys.argv[3:], Env(host=Host(etc=sys.argv[1], run=sys.argv[2]))))
"""

MARK = re.compile(rb"\d{8}T\d{6}|\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d)?)?")


class Rig:
    """See the module's docstring. ``how``: ``retire`` (archive ``runs``, delete ``cache``
    and ``cuda.run``, keep ``notes.txt``) or ``migrate`` (``runs`` copied to the second
    filesystem and the crontab line repointed there; ``vacate undo`` puts it back)."""

    def __init__(self, tmp: str, how: str = "retire", cache_files: int = 24):
        self.tmp, self.how = tmp, how
        for d in ("vb", "vm", "db", "dm"):
            os.makedirs(os.path.join(tmp, d))
        fill(os.path.join(tmp, "vb"), cache_files=cache_files, weights_mb=1)
        self.before = tree_hashes(os.path.join(tmp, "vb"))
        self.vol = LazyFS(os.path.join(tmp, "vb"), os.path.join(tmp, "vm"))
        self.dst = LazyFS(os.path.join(tmp, "db"), os.path.join(tmp, "dm"))
        m, d = self.vol.mountpoint, self.dst.mountpoint
        self.m, self.d = m, d
        etc = os.path.join(tmp, "db", "etc")
        os.makedirs(etc)
        for name in ("passwd", "group"):
            shutil.copy2(f"/etc/{name}", etc)
        self.config = {
            "fstab": f"# a test's fstab\nlazyfs {m} fuse.lazyfs defaults,nofail 0 0\n".encode(),
            "crontab": f"SHELL=/bin/sh\n*/5 * * * * root {m}/runs/exp1/log.jsonl\n".encode(),
        }
        for name, text in self.config.items():
            with open(os.path.join(etc, name), "wb") as f:
                f.write(text)
        self.etc = os.path.join(d, "etc")
        self.run_dir = os.path.join(tmp, "run")
        os.makedirs(self.run_dir)
        self.backup = os.path.join(d, "backup")
        self.moved = os.path.join(d, "moved")
        self.plan = os.path.join(d, "retire.plan")
        # vacate runs in a box of its own (a pid and a mount namespace, one for the rig, made
        # once the two filesystems are mounted): it sees no process of a test beside this
        # one, and its unmount of the volume leaves the mount here, whose device number then
        # goes to no other filesystem while the rig lives and whose daemon stays to be cut
        # and read
        self.box: subprocess.Popen | None = None
        try:
            self.vol.start()
            self.dst.start()
            self.box, self.box_pid = start_box()
        except BaseException:
            self.close()
            raise
        self.steps: dict[str, str] = {}
        self.deletes: dict[str, str] = {}

    def close(self) -> None:
        if self.box is not None:
            self.box.kill()
            self.box.wait()
        for fs in (self.vol, self.dst):
            with contextlib.suppress(Exception):
                fs.close()
        subprocess.run(["chattr", "-i", self.m], capture_output=True, check=False)

    # -- running vacate ----------------------------------------------------------------
    def _argv(self, *args: str) -> list[str]:
        return ["nsenter", "-t", str(self.box_pid), "-m", "-p", sys.executable, "-c", DRIVER,
                self.etc, self.run_dir, *args]

    def vacate(self, *args: str, kill_at: int = 0, kill_new: list[str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess:
        env = {**os.environ, **RUN_ENV, "KILL_AT": str(kill_at),
               "KILL_NEW": "" if kill_new is None else json.dumps(["-"] + kill_new)}
        return subprocess.run(self._argv(*args), capture_output=True, text=True, env=env,
                              timeout=timeout, check=False, start_new_session=True)

    def make_plan(self) -> None:
        what = ["--archive-to", self.backup, "--delete", "cuda.run", "--delete", "cache",
                "--keep", "notes.txt"] if self.how == "retire" else \
            ["--migrate", f"runs={self.moved}", "--keep", "cache", "--keep", "cuda.run",
             "--keep", "notes.txt"]
        r = self.vacate("plan", self.m, *what, "--grace", "1", "-o", self.plan)
        assert r.returncode == 0, r.stderr
        from vacate.observing.model.plan import Plan
        with open(self.plan) as f:
            plan = Plan.loads(f.read())
        self.steps = {s.id: s.kind for s in plan.steps}
        self.deletes = {s.id: os.path.relpath(s.params.item, self.m) for s in plan.steps
                        if s.kind == "delete"}
        # the plan and its directory durable, as a person's saved plan is before apply
        for p in (self.plan, self.d):
            fd = os.open(p, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)

    def command(self, undo: bool = False) -> tuple[str, ...]:
        return ("undo", self.plan) if undo else ("apply", self.plan, "--yes")

    # -- crashes -----------------------------------------------------------------------
    def crash_at_record(self, k: int, undo: bool = False) -> bool:
        """Run until the k-th journal record is fsynced, then the crash; False when the run
        ended before it."""
        r = self.vacate(*self.command(undo), kill_at=k)
        if r.returncode != -signal.SIGKILL:
            return False
        self._cut(None)
        return True

    def crash_at_new_point(self, covered: set[str], undo: bool = False) -> str | None:
        """Run until a journal record is fsynced at a point ``covered`` does not name yet
        (``STEP/EVENT``), then the crash: that point (added to ``covered``), or None when the
        run ended first."""
        r = self.vacate(*self.command(undo), kill_new=sorted(covered))
        if r.returncode != -signal.SIGKILL:
            return None
        self._cut(None)
        recs = read_records(path_for(self.plan))
        # killed inside Journal.__enter__, after its first record and before the directory
        # fsync that names the journal (nothing was promised yet): no journal at all
        point = f"{recs[-1].get('step')}/{recs[-1]['event']}" if recs else "None/begin"
        assert point not in covered, f"the journal lost the record {point} was killed at"
        covered.add(point)
        return point

    def crash_after_request(self, fs: LazyFS, n: int, undo: bool = False) -> bool:
        """Run until ``fs`` has had n changing requests, then the crash; False when the run
        ended before it."""
        fs.arm(n)
        p = self._start(undo)
        end = time.monotonic() + 120
        while p.poll() is None and not fs.state()["cut"]:
            assert time.monotonic() < end, "the run neither ended nor reached its cut"
            time.sleep(0.003)
        cut = fs.state()["cut"]
        self._kill(p)
        if cut:
            self._cut(fs)
        fs.thaw()
        return cut

    def crash_after(self, seconds: float, undo: bool = False) -> bool:
        """Run for ``seconds``, then the crash; False when the run ended before it."""
        p = self._start(undo)
        try:
            p.wait(timeout=seconds)
            return False
        except subprocess.TimeoutExpired:
            pass
        self._kill(p)
        self._cut(None)
        return True

    def _start(self, undo: bool) -> subprocess.Popen:
        env = {**os.environ, **RUN_ENV}
        return subprocess.Popen(self._argv(*self.command(undo)), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env, start_new_session=True)

    @staticmethod
    def _kill(p: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)

    def _cut(self, done: LazyFS | None) -> None:
        """Every filesystem not cut yet (``done`` was) loses what was not durable."""
        for fs in (self.vol, self.dst):
            if fs is not done:
                fs.cut()

    def kind_in_progress(self) -> str:
        """The kind of the step the journal's last record started, or ``journal`` (between
        two steps, or before the first)."""
        recs = read_records(path_for(self.plan))
        last = recs[-1] if recs else {}
        if last.get("event") == "intent":
            return str(last.get("kind") or self.steps.get(last.get("step"), "?"))
        return "journal"

    # -- what must hold -----------------------------------------------------------------
    def vol_tree(self) -> dict[str, str]:
        """The volume's files (still mounted here when apply unmounted it in its box)."""
        return tree_hashes(self.m)

    def broken_promises(self) -> list[str]:
        """What an ``ok`` in the journal promised and no longer holds."""
        from vacate.observing.model.journal import states_of
        out = []
        states = states_of(read_records(path_for(self.plan)))
        ok = {s for s, st in states.items() if st.event == "outcome" and st.status == "ok"}
        kinds = {self.steps.get(s) for s in ok}
        if kinds & {"archive", "verify"}:
            out += self._archive_broken()
        gone = {self.deletes[s] for s in ok if s in self.deletes}
        if gone:
            out += [f"{p} is back after an ok delete" for p in self.vol_tree()
                    if p.split("/")[0] in gone]
        if kinds & {"edit-config", "repoint-config"}:
            out += self._config_broken(edited=True)
        if kinds & {"copy", "verify-copy"}:
            out += self._copy_broken()
        return out

    def _archive_broken(self) -> list[str]:
        into = tempfile.mkdtemp(dir=self.tmp, prefix="restored-")
        try:
            restore_with_stock_tools(os.path.join(self.backup, "runs"), into)
        except (subprocess.CalledProcessError, OSError) as e:
            return [f"the archive does not restore with stock tools: {e}"]
        finally:
            got = tree_hashes(os.path.join(into, "runs")) if os.path.isdir(
                os.path.join(into, "runs")) else {}
            shutil.rmtree(into, ignore_errors=True)
        want = {k[len("runs/"):]: v for k, v in self.before.items() if k.startswith("runs/")}
        return [] if got == want else [f"the archive restores other files: {sorted(got)}"]

    def _config_broken(self, edited: bool) -> list[str]:
        """Each config file and each backup beside it whole: each of its lines an original
        one, one commented out by vacate or one repointed to the copy, and every original
        line there, as it was or commented out."""
        out = []
        for name, orig in self.config.items():
            try:
                now = self._config_of(name)
            except OSError as e:
                out.append(f"/etc/{name}: {e.strerror}")
                continue
            if not self._whole(now, orig):
                out.append(f"/etc/{name} is not whole: {now!r}")
            for b in os.listdir(self.etc):
                if b.lstrip(".").startswith(name + ".vacate-backup-"):
                    with open(os.path.join(self.etc, b), "rb") as f:
                        got = f.read()
                    if not self._whole(got, orig):
                        out.append(f"the backup {b} is not whole: {got!r}")
        if edited and all(self._config_of(n) == o for n, o in self.config.items()):
            out.append("no config line is edited after an ok edit")
        return out

    def _whole(self, now: bytes, orig: bytes) -> bool:
        moves = (f"{self.m}/runs".encode(), f"{self.moved}/runs".encode())
        lines = orig.splitlines()
        allowed = set(lines) | {ln.replace(*moves) for ln in lines}

        def commented(ln: bytes, o: bytes) -> bool:
            return ln.startswith(b"# vacate ") and ln.endswith(o)

        got = now.splitlines()
        return now.endswith(b"\n") and \
            all(ln in allowed or any(commented(ln, o) for o in lines) for ln in got) and \
            all(any(ln == o or commented(ln, o) for ln in got) for o in lines)

    def _config_of(self, name: str) -> bytes:
        with open(os.path.join(self.etc, name), "rb") as f:
            return f.read()

    def _copy_broken(self) -> list[str]:
        want = {k[len("runs/"):]: v for k, v in self.before.items() if k.startswith("runs/")}
        copy = os.path.join(self.moved, "runs")
        got = tree_hashes(copy) if os.path.isdir(copy) else {}
        return [] if got == want else [f"the copy is not its source: {sorted(got)}"]

    def end_state(self) -> dict:
        """What a finished run leaves, timestamps masked: each step's status, the volume's
        files, the config files (and their backups' contents), the archive restored or the
        copy."""
        from vacate.observing.model.journal import states_of
        states = states_of(read_records(path_for(self.plan)))
        out: dict = {"steps": {s: st.status for s, st in sorted(states.items())}}
        out["volume"] = self.vol_tree()
        out["config"] = {n: MARK.sub(b"T", self._config_of(n)) for n in self.config}
        out["backups"] = sorted({self._config_of(b) for b in os.listdir(self.etc)
                                 if ".vacate-backup-" in b})
        if self.how == "retire":
            out["archive"] = self._archive_broken()
        else:
            out["copy"] = self._copy_broken()
        return out


def start_box() -> tuple[subprocess.Popen, int]:
    """A pid namespace with its own /proc, in a mount namespace copied from this one (its
    mounts then private): the process that holds it, and the pid (here) of its first
    process, to ``nsenter -t PID -m -p``."""
    p = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                          "sleep", "infinity"])
    end = time.monotonic() + 10
    mine = os.readlink("/proc/self/ns/pid")
    while True:
        try:
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                kids = f.read().split()
            if kids and os.readlink(f"/proc/{kids[0]}/ns/pid") != mine and \
                    os.readlink(f"/proc/{kids[0]}/exe").endswith("sleep"):
                return p, int(kids[0])
        except OSError:
            pass
        if p.poll() is not None or time.monotonic() > end:
            p.kill()
            raise RuntimeError("unshare --pid --fork --mount-proc did not start its box")
        time.sleep(0.005)


class Tally:
    """Crashes counted by the kind of step they cut, printed by :meth:`report`."""

    def __init__(self):
        self.by_kind: Counter = Counter()

    def add(self, kind: str) -> None:
        self.by_kind[kind] += 1

    def report(self, what: str) -> str:
        line = ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind.items()))
        text = f"{what}: {sum(self.by_kind.values())} cuts survived ({line})"
        print(text)
        return text


def seed() -> int:
    """The random runs' seed: ``VACATE_CUT_SEED`` replays one (printed by each run)."""
    got = os.environ.get(SEED_ENV)
    s = int(got) if got else int.from_bytes(os.urandom(4), "little")
    print(f"{SEED_ENV}={s}")
    return s


def reference(rig: Rig, undo: bool = False) -> tuple[dict, dict[str, tuple]]:
    """An uninterrupted run on ``rig``, paused at each journal record to count each
    filesystem's changing requests: its end state, and for each step (its id) how long it
    took and the filesystem with most changing requests in it, with their number."""
    steps: dict[str, tuple] = {}
    started: dict[str, tuple] = {}
    with Paused(rig, undo) as run:
        for step, event in run.records():
            now = (time.monotonic(), rig.vol.state()["steps"], rig.dst.state()["steps"])
            if event == "intent":
                started[step] = now
            elif event == "outcome" and step in started:
                t0, v0, d0 = started[step]
                v, d = now[1] - v0, now[2] - d0
                steps[step] = (now[0] - t0, "vol" if v > d else "dst", max(v, d))
            run.go(1)
        assert run.p.wait(timeout=120) == 0, "the uninterrupted run failed"
    return normal(rig, rig.end_state()), steps


def normal(rig: Rig, state: dict) -> dict:
    """``state`` with the rig's own directory named TMP."""
    t = rig.tmp.encode()
    return {**state, "config": {n: v.replace(t, b"TMP") for n, v in state["config"].items()},
            "backups": sorted({b.replace(t, b"TMP") for b in state["backups"]}),
            # a step a crash cut after it acted is found done by the rerun (skipped)
            "steps": {k: "done" if v in ("ok", "skipped") else v
                      for k, v in state["steps"].items()},
            "volume": {p: "as before" if rig.before.get(p) == h else h
                       for p, h in state["volume"].items()}}


def crash_in(rig: Rig, step: str, rng, calibrated: dict[str, tuple], undo: bool = False
             ) -> str | None:
    """A run of ``rig`` crashed inside ``step``: held right after the step's intent is on
    the disk, then let go with a cut armed after one of the changing requests the step made
    in the uninterrupted run (on the filesystem it changes most) or, a quarter of the time or
    where it changes nothing, killed at a random moment within the time the step took; the kind
    of step the crash cut, or None when the step is done already."""
    from vacate.observing.model.journal import states_of
    sid = f"undo:{step}" if undo else step
    st = states_of(read_records(path_for(rig.plan))).get(sid)
    if st is not None and st.event == "outcome" and st.status in ("ok", "skipped"):
        return None
    took, where, requests = calibrated.get(sid, (0.05, "dst", 0))
    fs = rig.vol if where == "vol" else rig.dst
    armed = requests > 2 and rng.random() < 0.75
    # the outcome's write and fsync left out, and a rerun may have less to do than the first
    n = rng.randint(1, max(1, (requests - 2) * 2 // 3)) if armed else 0
    delay = rng.uniform(0, took / 2)        # the kill itself takes a while
    with Paused(rig, undo) as run:
        if not run.until(sid):
            return None
        if armed:
            fs.arm(n)
        run.go()
        if armed:
            end = time.monotonic() + 120
            while run.p.poll() is None and not fs.state()["cut"]:
                assert time.monotonic() < end, "the run neither ended nor reached its cut"
                time.sleep(0.002)
            run.kill()
            if not fs.state()["cut"]:
                fs.thaw()
                return None
            fs.thaw()
            rig._cut(fs)
        else:
            time.sleep(delay)
            run.kill()
            rig._cut(None)
    return rig.kind_in_progress()


class Paused:
    """A run of ``rig`` that waits after each journal record until it is told to go on."""

    def __init__(self, rig: Rig, undo: bool = False):
        self.rig, self.undo = rig, undo

    def __enter__(self) -> Self:
        said_r, said_w = os.pipe()
        go_r, self.go_w = os.pipe()
        env = {**os.environ, **RUN_ENV, "PAUSE_FDS": f"{said_w},{go_r}"}
        self.p = subprocess.Popen(self.rig._argv(*self.rig.command(self.undo)), env=env,
                                  pass_fds=(said_w, go_r), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(said_w)
        os.close(go_r)
        self.said = os.fdopen(said_r, "rb")
        return self

    def records(self):
        """(step, event) of each record as it is on the disk, the run held there until
        :meth:`go`."""
        for line in self.said:
            step, event = line.decode().split()
            yield step, event

    def until(self, sid: str) -> bool:
        """Let the run go on record by record until the intent of ``sid`` is on the disk
        (held there); False when the run ends first."""
        for step, event in self.records():
            if step == sid and event == "intent":
                return True
            self.go(1)
        return False

    def go(self, records: int = 1000) -> None:
        """Let the run go on past this record and the next ``records - 1``."""
        with contextlib.suppress(BrokenPipeError):
            os.write(self.go_w, b"g" * records)

    def kill(self) -> None:
        self.rig._kill(self.p)

    def __exit__(self, *exc) -> None:
        if self.p.poll() is None:
            self.kill()
        self.said.close()
        os.close(self.go_w)
