"""Filesystem bookkeeping (lost+found, .zfs, .snapshot, trash), empty directories, core
dumps and logs."""

from __future__ import annotations

import re

from vacate.observing.model.inventory import Classification
from vacate.observing.recognise.base import Ctx, cls, dirs, files

FS_ARTIFACTS = {
    "lost+found": "fsck's lost+found",
    ".zfs": "ZFS snapshot directory (.zfs)",
    ".snapshot": "NetApp/NFS snapshot directory (.snapshot)",
    ".snapshots": "snapper snapshots (.snapshots)",
}
LOG_NAME = re.compile(r"(\.log(\.\d+)?(\.gz)?|\.out|\.err)$")


@dirs
def fs_artifact(ctx: Ctx) -> Classification | None:
    what = FS_ARTIFACTS.get(ctx.name)
    if what is None and re.match(r"^\.Trash(-\d+)?$", ctx.name):
        what = "desktop trash (.Trash)"
    if what is None:
        return None
    empty = ctx.stats.files == 0
    return cls("filesystem-artifact", f"filesystem artifact ({what})" + (
        ", empty" if empty and ctx.name == "lost+found" else ""),
        recoverable="regenerable" if ctx.name == "lost+found" and empty else None,
        confidence=0.95, evidence=(f"name {ctx.name}",), files_inside=ctx.stats.files)


@dirs
def empty_dir(ctx: Ctx) -> Classification | None:
    if ctx.stats.files:
        return None
    label = "empty directory" if ctx.stats.dirs <= 1 else "empty directory tree"
    return cls("directory", label, recoverable="regenerable", confidence=0.9,
               evidence=("no files below",), empty=True)


@files
def core_dump(ctx: Ctx) -> Classification | None:
    if not re.match(r"^(core(\.[\w.-]+)?|.*\.core)$", ctx.name):
        return None
    head = ctx.head(64) or b""
    if head[:4] != b"\x7fELF" or len(head) < 18:
        return None
    e_type = int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")
    if e_type != 4:
        return None
    return cls("core-dump", "core dump (ELF core file)", recoverable="unique", confidence=0.95,
               evidence=("ELF header e_type=CORE",))


@files
def log_file(ctx: Ctx) -> Classification | None:
    if ctx.name.startswith("events.out.tfevents."):
        return cls("logs", "TensorBoard event file", recoverable="unique", confidence=0.9,
                   evidence=("name events.out.tfevents.*",), tool="tensorboard")
    if LOG_NAME.search(ctx.name):
        return cls("logs", "log file", recoverable="unique", confidence=0.6, guess=True,
                   evidence=("name",))
    return None


@dirs
def log_dir(ctx: Ctx) -> Classification | None:
    lst = ctx.listing()
    if ctx.name == "wandb" and any(d.startswith(("run-", "offline-run-")) for d in lst.dirs):
        runs = sum(d.startswith(("run-", "offline-run-")) for d in lst.dirs)
        return cls("logs", f"Weights & Biases runs ({runs})", recoverable="unique",
                   confidence=0.9, evidence=("wandb/run-*",), tool="wandb", runs=runs)
    if ctx.name.startswith(("run-", "offline-run-")) and lst.has("run-" + ctx.name.split("-")[-1]
                                                               + ".wandb") or (
            lst.has("files") and any(n.endswith(".wandb") for n in lst.files)):
        return cls("logs", "Weights & Biases run", recoverable="unique", confidence=0.85,
                   evidence=("*.wandb",), tool="wandb")
    ev = [n for n in lst.files if n.startswith("events.out.tfevents.")]
    if ev:
        return cls("logs", f"TensorBoard run ({len(ev)} event files)", recoverable="unique",
                   confidence=0.85, evidence=("events.out.tfevents.*",), tool="tensorboard")
    if lst.files and not lst.dirs and all(LOG_NAME.search(n) for n in lst.files):
        n = len(lst.files)
        return cls("logs", f"logs ({n} file{'s' if n > 1 else ''})", recoverable="unique",
                   confidence=0.7, evidence=("*.log names",))
    return None
