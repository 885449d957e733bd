"""Volumes at the sizes people have, for the ``--host`` and ``vacate.volume`` tests: 200,000
entries and more on a real ext4 loop volume (past the walk's in-process start,
``INLINE_ENTRIES``, the recognisers' 20,000 and the delete's 10,000 batch)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess

import pytest

from harness.holders import Holders
from harness.volumes import can_loop_mount, make_volume

DIRS, FILES, SUBFILES = 400, 250, 248          # 400 * (1 + 250 + 1 + 248) = 200,000 entries
ENTRIES = DIRS * (2 + FILES + SUBFILES)


def fill(root: str, dirs: int = DIRS, data_every: int = 0) -> int:
    """``dirs`` * 500 entries under ``root`` (200,000 by default): directories of empty files,
    each with a subdirectory of more (the walk's pool gets the subdirectories); with
    ``data_every``, every such file of a directory's own holds a line (``d/i``)."""
    for d in range(dirs):
        base = os.path.join(root, f"d{d:03d}")
        os.makedirs(os.path.join(base, "s"))
        for i in range(FILES):
            fd = os.open(os.path.join(base, f"f{i:03d}"), os.O_CREAT | os.O_WRONLY, 0o644)
            if data_every and i % data_every == 0:
                os.write(fd, b"%d/%d\n" % (d, i))
            os.close(fd)
        for i in range(SUBFILES):
            os.close(os.open(os.path.join(base, "s", f"g{i:03d}"), os.O_CREAT | os.O_WRONLY,
                             0o644))
    return dirs * (2 + FILES + SUBFILES)


def big_volume():
    """An ext4 loop volume with room for 200,000 entries and more (skipped without root)."""
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    return make_volume("ext4", size_mb=400, inodes=ENTRIES + 30_000)


@contextlib.contextmanager
def in_use():
    """A big volume holding 200,000 entries of data (``data``), a model's config
    (``models/q``) and a file a process holds open (``notes.txt``); yields (the volume, the
    holder's pid)."""
    v = big_volume()
    h = Holders(v.mountpoint)
    try:
        m = v.mountpoint
        fill(os.path.join(m, "data"))
        os.makedirs(f"{m}/models/q")
        with open(f"{m}/models/q/config.json", "w") as f:
            json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, f)
        with open(f"{m}/notes.txt", "w") as f:
            f.write("in use\n")
        yield v, h.fd(f"{m}/notes.txt")
    finally:
        h.close()
        v.close()


def left_on(vol, where: str) -> dict:
    """What is left at the top of ``vol`` once an apply unmounted it, looked at read-only at
    ``where`` (made, mounted and unmounted here): each name, with a file's text (None for
    anything else)."""
    os.makedirs(where, exist_ok=True)
    subprocess.run(["mount", "-o", "ro", vol.device, where], check=True)
    try:
        out = {}
        for name in sorted(os.listdir(where)):
            path = os.path.join(where, name)
            out[name] = None
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    out[name] = f.read()
        return out
    finally:
        subprocess.run(["umount", where], check=True)
