"""The systemd drop-in of a ``repoint-unit`` step cut at every step (harness/lazyfs.py): the
very shell scripts vacate runs in the unit's manager to write the drop-in
(:func:`vacate.act.migrate.dropin_write_script`, ``migrate._repoint``) and to remove it
(:func:`vacate.act.migrate.dropin_remove_script`, ``undo_dropin`` and ``bring_back``), run
with ``sh -c`` against unit directories on the cut filesystem, the machine going down right
after the script's 1st, 2nd, ... change to it (no booted systemd: what systemd reads is the
file and its names, and those are what a cut can take).

The promises: the step's journal says ok only once the script returned 0, so a script that
returned 0 leaves the drop-in whole with its exact contents (written) or gone (removed) after
the cut; one cut before it returned leaves the drop-in as it was before or as the script
meant it, whole, never half, and no other file beside it (the temporary file included). The
drop-in directory may be new (``UNIT.service.d`` made by the script), and so may directories
above it (a user's ``~/.config/systemd/user`` the user never made).

The same cuts catch the scripts without one of their fsyncs: the directories synced without
the parent of a new ``UNIT.service.d`` (``sync DIR``), the script as it was before the
directories ``mkdir -p`` makes above the drop-in's own were synced (a drop-in in a new
``~/.config/systemd/user`` was gone after a cut), and the removal as it was before (``rm -f``
alone: a removed drop-in was back after a cut, the unit repointed again while undo's journal
said it was not)."""

from __future__ import annotations

import os
import shlex
import subprocess
import time

import pytest
from harness.lazyfs import can_fuse

from vacate.act.migrate import dropin_remove_script, dropin_write_script

pytestmark = [pytest.mark.root, pytest.mark.powercut,
              pytest.mark.skipif(not can_fuse(), reason="needs root, /dev/fuse and mfusepy")]

NAME = "zz-vacate-migrate.conf"
OLD = "[Service]\nWorkingDirectory=\nWorkingDirectory=/data/models/v1\n"
# larger than a drop-in is (cat writes it in more than one request: a half-written one
# could be seen)
NEW = ("# written by vacate migrate\n[Service]\nWorkingDirectory=\n"
       "WorkingDirectory=/shared/models\n" + "".join(f"Environment=MODEL_{i}=/shared/m{i}\n"
                                                   for i in range(6000)))
# (the unit directory that is there and durable, the drop-in's path below it, whether an
# earlier drop-in of vacate's is there to be rewritten)
SCENES = {"new-dir": ("etc/systemd/system", "etc/systemd/system/app.service.d", False),
          "dir-there": ("etc/systemd/system/app.service.d", "etc/systemd/system/app.service.d",
                        False),
          "rewrite": ("etc/systemd/system/app.service.d", "etc/systemd/system/app.service.d",
                      True),
          "new-user-dirs": ("home/ann/.config", "home/ann/.config/systemd/user/app.service.d",
                            False)}


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _durable_tree(root: str, there: str, dropin: str | None) -> None:
    """``root/there`` made and durable, with the drop-in ``dropin`` (its contents OLD) in
    it when given."""
    parts = there.split("/")
    for i in range(1, len(parts) + 1):
        os.mkdir(os.path.join(root, *parts[:i]))
    if dropin:
        with open(dropin, "w") as f:
            f.write(OLD)
            f.flush()
            os.fsync(f.fileno())
    for i in range(len(parts), 0, -1):
        _fsync(os.path.join(root, *parts[:i]))
    _fsync(root)
    _fsync(os.path.dirname(root))


def _write_script(path: str, how: str) -> str:
    real = dropin_write_script(path)
    if how == "real":
        return real
    if how == "sync-dir-only":          # sync DIR PARENT changed to sync DIR
        assert 'sync "$@"' in real
        return real.replace('sync "$@"', 'sync "$d"')
    assert how == "before-fix"          # the script as migrate._repoint ran it before
    d = os.path.dirname(path)
    tmp = f"{d}/.{NAME}.tmp"
    q = shlex.quote
    return (f"mkdir -p {q(d)} && cat > {q(tmp)} && sync {q(tmp)} && mv -f {q(tmp)} {q(path)} "
            f"&& sync {q(d)} {q(os.path.dirname(d))}")


def _remove_script(path: str, how: str) -> str:
    if how == "real":
        return dropin_remove_script(path)
    assert how == "rm-only"             # undo_dropin before: rm -f, the directory not synced
    return f"rm -f {shlex.quote(path)}"


def _run(script: str, stdin: str) -> int:
    """``sh -c script`` with ``stdin`` (a file, not a pipe: cat then writes it in the same
    chunks every run, and the n-th step is the same step in each)."""
    with open(stdin) as f:
        return subprocess.run(["sh", "-c", script], stdin=f, capture_output=True,
                              check=False, cwd="/", timeout=60).returncode


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def _broken(path: str, finished: bool, before: str | None, after: str | None) -> list[str]:
    """What the state after a cut breaks of the promise: the drop-in at ``path`` is
    ``after`` once the script returned 0, else ``before`` or ``after`` (None: no drop-in);
    nothing else beside it."""
    out = []
    got = _read(path)
    allowed = [after] if finished else [before, after]
    if got not in allowed:
        words = {None: "no drop-in", OLD: "the earlier drop-in", NEW: "the new drop-in"}
        said = words.get(got, f"a drop-in of {len(got or '')} bytes, no whole one")
        out.append(f"{said} "
                   f"{'after the script returned 0' if finished else 'before it returned'}"
                   f" (it had {words[before]}, meant {words[after]})")
    d = os.path.dirname(path)
    others = sorted(set(os.listdir(d)) - {NAME}) if os.path.isdir(d) else []
    if others:
        out.append(f"left beside it: {others}")
    return out


def _cut_everywhere(lazyfs, op: str, scene: str, how: str) -> tuple[int, dict]:
    """The script of ``op`` ("write" or "remove") run whole and cut after it, then cut
    after each of its changing requests in turn: how many there are, and the promises
    broken at each cut that broke one (0: the cut after the whole run)."""
    there, dropin_dir, earlier = SCENES[scene]
    if op == "remove":
        earlier = True
    n_runs = [0]

    def fresh() -> tuple[str, str]:
        n_runs[0] += 1
        root = os.path.join(lazyfs.mountpoint, f"{op}-{scene}-{how}-{n_runs[0]}")
        os.mkdir(root)
        path = os.path.join(root, dropin_dir, NAME)
        _durable_tree(root, there, path if earlier else None)
        return root, path

    before = OLD if earlier else None
    text = os.path.join(os.path.dirname(lazyfs.backing), "dropin.conf")
    with open(text, "w") as f:
        f.write(NEW)
    after = None if op == "remove" else NEW

    def script(path: str) -> str:
        return _write_script(path, how) if op == "write" else _remove_script(path, how)

    broken = {}
    _, path = fresh()
    lazyfs.arm(0)
    rc = _run(script(path), text)
    steps = lazyfs.thaw()["steps"]
    assert rc == 0 and steps > 0
    assert _read(path) == after
    lazyfs.cut()
    if why := _broken(path, True, before, after):
        broken[0] = why
    for n in range(1, steps + 1):
        _, path = fresh()
        lazyfs.arm(n)
        rc = _run(script(path), text)
        got = lazyfs.thaw()
        assert got["cut"], f"{op} {scene} {how}: step {n} of {steps}: no cut was made ({got})"
        assert rc != 0 or n == steps, f"step {n} of {steps}: the script did not see the cut"
        if why := _broken(path, rc == 0, before, after):
            broken[n] = why
    return steps, broken


def _say(op, scene, how, steps, broken) -> str:
    return "\n".join(f"{op} {scene} ({how}), cut after step {n} of {steps}"
                     f"{' (the whole run)' if n == 0 else ''}: {'; '.join(w)}"
                     for n, w in broken.items())


@pytest.mark.slow                   # 1 s or more (41 cuts); the test below cuts the same
def test_the_dropin_is_whole_or_as_before_at_every_cut_and_kept_once_written_or_removed(
        lazyfs):
    t0 = time.monotonic()
    cuts, counts = 0, []
    failures = []
    for op, scenes in (("write", list(SCENES)), ("remove", ["dir-there"])):
        for scene in scenes:
            steps, broken = _cut_everywhere(lazyfs, op, scene, "real")
            cuts += steps + 1
            counts.append(f"{op} {scene}: {steps} + 1")
            if broken:
                failures.append(_say(op, scene, "real", steps, broken))
    print(f"\ndrop-in cuts: {cuts} ({', '.join(counts)}), none broke a promise, "
          f"{time.monotonic() - t0:.1f} s")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(("op", "scene", "how", "why"), [
    ("write", "new-dir", "sync-dir-only", "no drop-in after the script returned 0"),
    ("write", "new-user-dirs", "before-fix", "no drop-in after the script returned 0"),
    ("remove", "dir-there", "rm-only", "the earlier drop-in after the script returned 0")])
def test_the_cuts_catch_the_dropin_scripts_without_their_directory_fsyncs(
        lazyfs, op, scene, how, why):
    steps, broken = _cut_everywhere(lazyfs, op, scene, how)
    print(f"\n{op} {scene} ({how}): {steps + 1} cuts, broken at {sorted(broken)}")
    assert 0 in broken and any(w.startswith(why) for w in broken[0]), \
        _say(op, scene, how, steps, broken) or "no promise broken"
    # the same scene keeps every promise with the script vacate runs
    assert not _cut_everywhere(lazyfs, op, scene, "real")[1]
