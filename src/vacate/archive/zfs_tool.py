"""The ``zfs`` command, as the native archive uses it: properties, snapshots, clones, and
the argv of ``send`` / ``receive``. Every short command has a deadline; a failure is a
:class:`ZfsError` that quotes zfs's own words."""

from __future__ import annotations

import subprocess

from vacate.observing.errors import VacateError

DEADLINE_S = 120.0
DESTROY_PATIENCE_S = 60.0


class ZfsError(VacateError):
    """A zfs command failed or did not answer in time."""


def zfs(*args: str, deadline_s: float = DEADLINE_S, check: bool = True
        ) -> subprocess.CompletedProcess:
    argv = ("zfs", *args)
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=deadline_s,
                           check=False)
    except FileNotFoundError:
        raise ZfsError("zfs is not installed here", hint="install ZFS (zfsutils-linux)") \
            from None
    except subprocess.TimeoutExpired:
        raise ZfsError(f"`{' '.join(argv)}` did not answer within {deadline_s:g} s") from None
    if check and r.returncode != 0:
        raise ZfsError(f"`{' '.join(argv)}` failed: {r.stderr.strip() or r.returncode}")
    return r


def exists(name: str) -> bool:
    return zfs("list", "-H", "-o", "name", "-t", "all", name, check=False).returncode == 0


def props(name: str, *names: str) -> dict[str, str]:
    """``zfs get -Hp`` of ``names``: property → value (``-`` where it does not apply)."""
    out = zfs("get", "-Hp", "-o", "property,value", ",".join(names), name).stdout
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


def local_props(name: str) -> tuple[str, ...]:
    """The properties set on ``name`` itself (``-p`` sends them, and a receive sets them)."""
    out = zfs("get", "-Hp", "-s", "local", "-o", "property", "all", name).stdout
    return tuple(sorted(line.strip() for line in out.splitlines() if line.strip()))


def snapshot(dataset: str, snap: str) -> bool:
    """Take ``dataset@snap`` unless it is there; returns whether it was taken now."""
    if exists(f"{dataset}@{snap}"):
        return False
    zfs("snapshot", f"{dataset}@{snap}")
    return True


def destroy_r(name: str, patience_s: float = DESTROY_PATIENCE_S) -> None:
    """``zfs destroy -r`` (a busy dataset is retried for up to ``patience_s``: zfs-fuse holds
    a mount for a while after its last use, seconds on a loaded machine)."""
    import time
    for _ in range(max(1, int(patience_s / 0.25))):
        r = zfs("destroy", "-r", name, check=False)
        if r.returncode == 0 or not exists(name):
            return
        time.sleep(0.25)
    raise ZfsError(f"`zfs destroy -r {name}` failed: {r.stderr.strip()}")


def send_argv(origin: str, flags: tuple[str, ...]) -> list[str]:
    return ["zfs", "send", *flags, origin]


def receive_argv(into: str) -> list[str]:
    return ["zfs", "receive", into]
