"""The snapshot taken before the first delete, so that a delete can be undone while the
snapshot is kept (and its space is not freed until it is destroyed).

- ZFS: ``zfs snapshot DATASET@vacate-NAME`` of the target's dataset.
- btrfs: a read-only snapshot of each subvolume the deletes touch: the subvolume holding each
  item, and each writable subvolume inside an item (a snapshot of a subvolume does not hold
  the subvolumes nested in it; read-only ones are not deleted). Each is placed in
  ``TARGET/.vacate-snapshots/NAME/``, outside every item: ``root`` for the subvolume mounted
  at the target, ``nested/REL`` for the one at ``TARGET/REL``.
- anything else: an explicit ``unsupported`` result.

Idempotent: a snapshot of that name that exists already is success, once ``zfs list -t
snapshot`` or ``btrfs subvolume show`` confirms it (on btrfs: a read-only snapshot of that
very subvolume); a created one is confirmed the same way.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.entries import join, normal_path, open_dir, read_only_subvolume
from vacate.observing.fsio import mount_id
from vacate.observing.model.mount import Target

SNAPSHOT_DIR = ".vacate-snapshots"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,200}")
_SUBVOL_ROOT_INO = 256          # BTRFS_FIRST_FREE_OBJECTID: every subvolume's root directory
TIMEOUT_S = 300


@dataclass(frozen=True, **SLOTS)
class Snapshot:
    """One snapshot: of what (a dataset, a subvolume's path), its name or path, and whether
    this call made it (False: it was there already)."""

    source: str
    snapshot: str
    created: bool

    def as_json(self) -> dict:
        return {"source": self.source, "snapshot": self.snapshot, "created": self.created}


@dataclass(frozen=True, **SLOTS)
class SnapshotResult:
    """``outcome``: ``ok`` (every snapshot there, confirmed), ``unsupported`` (the
    filesystem has none) or ``failed`` (``message`` says why; the snapshots made before the
    failure are listed). ``commands``: what was run, in order."""

    fstype: str
    name: str
    outcome: str
    snapshots: tuple[Snapshot, ...]
    message: str
    commands: tuple[tuple[str, ...], ...] = ()

    def to_json(self) -> dict:
        return {"fstype": self.fstype, "name": self.name, "outcome": self.outcome,
                "snapshots": [s.as_json() for s in self.snapshots], "message": self.message,
                "commands": [list(c) for c in self.commands],
                "destroy": destroy_command(self)}

    as_json = to_json

    @classmethod
    def from_json(cls, d: dict) -> SnapshotResult:
        """The result ``to_json`` wrote (a journal's outcome record)."""
        return cls(d["fstype"], d["name"], d["outcome"],
                   tuple(Snapshot(s["source"], s["snapshot"], s["created"])
                         for s in d["snapshots"]),
                   d["message"], tuple(tuple(c) for c in d.get("commands", ())))


def destroy_command(result: SnapshotResult) -> list[str]:
    """The command that destroys the snapshots of ``result`` (and frees what they hold);
    empty when there are none."""
    if not result.snapshots:
        return []
    if result.fstype == "btrfs":
        return ["btrfs", "subvolume", "delete", *(s.snapshot for s in result.snapshots)]
    return ["zfs", "destroy", *(s.snapshot for s in result.snapshots)]


def plan_snapshot_name(plan) -> str:
    """The name of the snapshot a plan takes before its deletes: named for the plan (its
    text's sha256), so a rerun finds its own."""
    import hashlib

    return hashlib.sha256(plan.dumps().encode()).hexdigest()[:12]


class _Failed(Exception):
    pass


class _Runner:
    def __init__(self) -> None:
        self.commands: list[tuple[str, ...]] = []

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        self.commands.append(argv)
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                               check=False, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise _Failed(f"{' '.join(argv)}: {e}") from None
        if check and p.returncode != 0:
            raise _Failed(f"{' '.join(argv)}: {(p.stderr or p.stdout).strip()}")
        return p


def snapshot(target: Target, items_paths: list[str] | tuple[str, ...], name: str
             ) -> SnapshotResult:
    """Snapshot what deleting ``items_paths`` (absolute, inside ``target``) would remove,
    under ``name`` (letters, digits, ``_.:-``)."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name!r}: a snapshot name is letters, digits and _.:- "
                         "(beginning with a letter or digit)")
    fstype = target.mount.fstype
    runner = _Runner()
    done: list[Snapshot] = []
    try:
        if target.zfs_dataset:
            _zfs(runner, target.zfs_dataset, name, done)
        elif fstype == "btrfs":
            _btrfs(runner, target, [normal_path(p) for p in items_paths], name, done)
        else:
            return SnapshotResult(fstype, name, "unsupported", (),
                                  f"{fstype} has no snapshots (vacate takes them on ZFS "
                                  "and btrfs); nothing was snapshotted")
    except (_Failed, OSError) as e:
        return SnapshotResult(fstype, name, "failed", tuple(done), str(e),
                              tuple(runner.commands))
    what = ", ".join(s.snapshot for s in done)
    return SnapshotResult(fstype, name, "ok", tuple(done), f"snapshot: {what}",
                          tuple(runner.commands))


# -- ZFS ---------------------------------------------------------------------------------
def _zfs_has(runner: _Runner, snap: str) -> bool:
    p = runner.run("zfs", "list", "-H", "-t", "snapshot", "-o", "name", snap, check=False)
    return p.returncode == 0 and snap in p.stdout.splitlines()


def zfs_name(name: str) -> str:
    """The name after ``@`` of the ZFS snapshot taken under ``name``."""
    return f"vacate-{name}"


def _zfs(runner: _Runner, dataset: str, name: str, done: list[Snapshot]) -> None:
    snap = f"{dataset}@{zfs_name(name)}"
    if _zfs_has(runner, snap):
        done.append(Snapshot(dataset, snap, False))
        return
    runner.run("zfs", "snapshot", snap)
    if not _zfs_has(runner, snap):
        raise _Failed(f"zfs snapshot {snap} succeeded, but zfs list -t snapshot does not "
                      "show it")
    done.append(Snapshot(dataset, snap, True))


# -- btrfs -------------------------------------------------------------------------------
def _holding(path: str, top: str) -> str:
    """The subvolume that holds ``path``: the nearest directory above it that is a
    subvolume's root, ``top`` (the target's mount point) at the highest."""
    p = os.path.dirname(path)
    while len(p) > len(top) and os.lstat(p).st_ino != _SUBVOL_ROOT_INO:
        p = os.path.dirname(p)
    return p if len(p) > len(top) else top


def _writable_below(item: str, mnt: int) -> list[str]:
    """The writable subvolumes at or below ``item`` on the mount ``mnt``, depth first: each
    directory opened relative to its parent (never through a symlink), one fd per level,
    none on another mount entered."""
    try:
        top = open_dir(item)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as e:
        if e.errno == errno.ELOOP:      # a symlink: removed as itself, holds nothing
            return []
        raise
    out: list[str] = []
    stack: list[tuple[int, str, list[str]]] = []      # (fd, rel, subdirectories left)

    def enter(fd: int, rel: str) -> None:
        """Look at the open directory ``fd``: pushed to be descended, or closed."""
        try:
            if mount_id(fd) != mnt:
                os.close(fd)
                return
            if os.fstat(fd).st_ino == _SUBVOL_ROOT_INO and not read_only_subvolume(fd):
                out.append(join(item, rel) if rel else item)
            with os.scandir(fd) as it:
                names = [e.name for e in it if e.is_dir(follow_symlinks=False)]
        except BaseException:
            os.close(fd)
            raise
        stack.append((fd, rel, names))

    try:
        enter(top, "")
        while stack:
            fd, rel, names = stack[-1]
            if not names:
                stack.pop()
                os.close(fd)
                continue
            name = names.pop()
            try:
                cfd = open_dir(name, fd)
            except FileNotFoundError:
                continue
            enter(cfd, join(rel, name))
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return out


def _btrfs_show(runner: _Runner, path: str) -> dict[str, str] | None:
    p = runner.run("btrfs", "subvolume", "show", path, check=False)
    if p.returncode != 0:
        return None
    fields = {}
    for line in p.stdout.splitlines()[1:]:
        key, sep, value = line.strip().partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def _btrfs(runner: _Runner, target: Target, items: list[str], name: str,
           done: list[Snapshot]) -> None:
    top = target.path
    base = os.path.join(top, SNAPSHOT_DIR, name)
    mountpoint = target.mountpoint
    for item in items:
        if not item.startswith(top.rstrip("/") + "/"):
            raise _Failed(f"{item}: not inside the target {top}")
        if os.path.join(top, SNAPSHOT_DIR).startswith(item + "/") or \
                (item + "/").startswith(os.path.join(top, SNAPSHOT_DIR) + "/"):
            raise _Failed(f"{item}: holds or is in {SNAPSHOT_DIR}, where the snapshots go")
    fd = open_dir(top)
    try:
        mnt = mount_id(fd)
    finally:
        os.close(fd)
    subvols: list[str] = []
    for item in items:
        for sv in (_holding(item, mountpoint), *_writable_below(item, mnt)):
            if sv not in subvols:
                subvols.append(sv)
    for sv in subvols:
        below = sv.startswith(top.rstrip("/") + "/")
        dest = os.path.join(base, "nested", sv[len(top.rstrip("/")) + 1:]) if below \
            else os.path.join(base, "root")
        _btrfs_one(runner, sv, dest, done)


def _btrfs_one(runner: _Runner, sv: str, dest: str, done: list[Snapshot]) -> None:
    src = _btrfs_show(runner, sv)
    if src is None:
        raise _Failed(f"{sv}: btrfs subvolume show does not know it")
    created = False
    if not os.path.lexists(dest):
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        runner.run("btrfs", "subvolume", "snapshot", "-r", sv, dest)
        created = True
    snap = _btrfs_show(runner, dest)
    if snap is None:
        raise _Failed(f"{dest}: there, but not a btrfs subvolume")
    if snap.get("Parent UUID") != src.get("UUID") or "readonly" not in snap.get("Flags", ""):
        raise _Failed(f"{dest}: there, but not a read-only snapshot of {sv}")
    done.append(Snapshot(sv, dest, created))
