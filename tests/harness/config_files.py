"""Config files put under a staged root, read back, and the backups vacate leaves beside an
edited one (``MARK``: the comment it writes on a line it edits)."""

import os
import re

MARK = re.compile(rb"# vacate \d{4}-\d{2}-\d{2}: ")


def put(root, path, data: bytes, mode=0o644, owner=(0, 0)):
    local = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(local), exist_ok=True)
    with open(local, "wb") as f:
        f.write(data)
    os.chmod(local, mode)
    os.chown(local, *owner)
    return local


def read(path):
    with open(path, "rb") as f:
        return f.read()


def backups(local):
    d, base = os.path.split(local)
    return sorted(os.path.join(d, n) for n in os.listdir(d)
                  if n.lstrip(".").startswith(base + ".vacate-backup-"))
