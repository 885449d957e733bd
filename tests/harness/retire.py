"""A small volume to retire for real, and what a person checks afterwards: the planned holder
gone, the volume unmounted and its mount point locked, every archived item restorable with
stock zstd, tar and sha256sum, every deleted item gone, every kept one still there."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from harness.holders import Holders
from harness.volumes import Volume, make_volume
from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.model.journal import path_for, read_records

VACATE = [sys.executable, "-m", "vacate"]


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), Env(stdout=out, stderr=err, stdin=None))
    return rc, out.getvalue(), err.getvalue()


def tree_hashes(root: str) -> dict[str, str]:
    """Relative path -> sha256 (files) or the link text or 'dir', for everything below."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = "link:" + os.readlink(p) if os.path.islink(p) \
                else "dir"
        for n in files:
            p = os.path.join(d, n)
            if os.path.islink(p):
                out[os.path.relpath(p, root)] = "link:" + os.readlink(p)
                continue
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def restore_with_stock_tools(archive: str, into: str) -> None:
    """What a person does without vacate: check the archive's parts, unpack them with zstd
    and tar, check the files with sha256sum (each raises when it fails)."""
    subprocess.run(["sh", "-c", "sha256sum -c PARTS.SHA256SUMS >/dev/null"], cwd=archive,
                   check=True)
    for p in sorted(os.listdir(archive)):
        if p.endswith(".tar.zst"):
            subprocess.run(["sh", "-c", f"zstd -qdc '{archive}/{p}' | tar -xpf - -C '{into}'"],
                           check=True)
    subprocess.run(["sh", "-c", f"sha256sum -c '{archive}/SHA256SUMS' >/dev/null"], cwd=into,
                   check=True)


def receive_with_stock_tools(archive: str, into: str) -> str:
    """What a person does with a native archive, without vacate: ``cat`` its parts through
    ``zstd -dc`` into ``zfs receive INTO``; where it is mounted."""
    with open(os.path.join(archive, "ZFS-MANIFEST.json")) as f:
        name = json.load(f)["name"]
    subprocess.run(["sh", "-c", f'cat {name}.zfs.zst.* | zstd -dc | zfs receive "$1"', "sh",
                    into], cwd=archive, check=True, capture_output=True)
    return subprocess.run(["zfs", "get", "-Hp", "-o", "value", "mountpoint", into], check=True,
                          capture_output=True, text=True).stdout.strip()


def fill(m: str, *, cache_files: int = 400, weights_mb: int = 8) -> None:
    """The story's files on the volume at ``m``: ``runs/exp1`` (a checkpoint ``ckpt/w.bin``,
    its log and a link ``latest`` to it), ``cache/a`` (``cache_files`` small files),
    ``cuda.run`` and ``notes.txt``."""
    os.makedirs(f"{m}/runs/exp1/ckpt")
    with open(f"{m}/runs/exp1/ckpt/w.bin", "wb") as f:
        f.write(os.urandom(weights_mb << 20))
    with open(f"{m}/runs/exp1/log.jsonl", "w") as f:
        f.write('{"step": 1, "loss": 2.5}\n' * 500)
    os.symlink("ckpt/w.bin", f"{m}/runs/exp1/latest")
    os.makedirs(f"{m}/cache/a")
    for i in range(cache_files):
        with open(f"{m}/cache/a/{i:05d}.bin", "wb") as f:
            f.write(os.urandom(512))
    with open(f"{m}/cuda.run", "wb") as f:
        f.write(os.urandom(1 << 20))
    with open(f"{m}/notes.txt", "w") as f:
        f.write("keep me\n")


class Story:
    """The volume: ``runs/`` (archived: a holder has a file of it open), ``cache/`` (deleted:
    many small files), ``cuda.run`` (deleted), ``notes.txt`` (kept), ``lost+found`` (kept)."""

    def __init__(self, tmp: str, *, cache_files: int = 400, weights_mb: int = 8,
                 size_mb: int = 128, fstype: str = "ext4"):
        self.tmp = tmp
        os.makedirs(tmp, exist_ok=True)
        self.vol: Volume = make_volume(fstype, size_mb=size_mb)
        self.m = m = self.vol.mountpoint
        self.holders = Holders(m)
        fill(m, cache_files=cache_files, weights_mb=weights_mb)
        self.before = tree_hashes(m)
        self.holder = self.holders.fd(f"{m}/runs/exp1/log.jsonl")
        self.backup = os.path.join(tmp, "backup")
        self.plan = os.path.join(tmp, "retire.plan")

    def make_plan(self, *extra: str) -> dict:
        rc, out, err = cli("plan", self.m, "--archive-to", self.backup, "--delete", "cuda.run",
                           "--delete", "cache", "--keep", "notes.txt", "--grace", "2",
                           "-o", self.plan, "--json", *extra)
        assert rc == 0, err
        return json.loads(out)

    def close(self) -> None:
        self.holders.close()
        self.vol.close()

    # -- what a person checks afterwards --------------------------------------------------
    def assert_retired(self) -> None:
        m = self.m
        assert not os.path.ismount(m), f"{m} is still mounted"
        attrs = subprocess.run(["lsattr", "-d", m], capture_output=True, text=True,
                               check=True).stdout
        assert "i" in attrs.split()[0], f"{m} is not locked: {attrs}"
        assert not os.path.exists(f"/proc/{self.holder}") or \
            _state(self.holder) in ("Z", "X"), "the holder still runs"
        # stock tools restore the archive, and sha256sum -c passes
        arch = os.path.join(self.backup, "runs")
        out = tempfile.mkdtemp(dir=self.tmp, prefix="restored-")
        restore_with_stock_tools(arch, out)
        restored = tree_hashes(os.path.join(out, "runs"))
        planned_runs = {k[len("runs/"):]: v for k, v in self.before.items()
                        if k.startswith("runs/")}
        assert restored == planned_runs
        # what is left on the volume: mounted read-only elsewhere to look
        look = tempfile.mkdtemp(dir=self.tmp, prefix="look-")
        subprocess.run(["mount", "-o", "ro", self.vol.device, look], check=True)
        try:
            left = tree_hashes(look)
        finally:
            subprocess.run(["umount", look], check=True)
        for path, h in self.before.items():
            top = path.split("/", 1)[0]
            if top in ("cuda.run", "cache"):
                assert path not in left, f"{path} was to be deleted"
            else:       # archived (and left in place) or kept: still there, unchanged
                assert left.get(path) == h, f"{path} changed or went missing"
        assert "cache" not in left and "cuda.run" not in left


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


def intents(plan: str) -> int:
    """How many steps the plan's journal says were begun (intents written)."""
    return sum(1 for r in read_records(path_for(plan)) if r.get("event") == "intent")


def kill_during(plan: str, *, intents_seen: int, delay: float = 0.0,
                timeout: float = 120) -> bool:
    """Start `vacate apply PLAN --yes` and kill -9 it once the journal holds
    ``intents_seen`` intents (and ``delay`` more seconds); False when it finished first."""
    p = subprocess.Popen([sys.executable, "-m", "vacate", "apply", plan, "--yes"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end and p.poll() is None:
            if intents(plan) >= intents_seen:
                if delay:
                    time.sleep(delay)
                break
            time.sleep(0.002)
        if p.poll() is not None:
            return False
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        return True
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
