"""``vacate check --no-scan`` of a real volume with staged unit, default and cron files bound
over /etc in a private mount namespace."""

import json
import os
import subprocess
import sys

from harness.etc_files import write

STAGED = {"system": "/etc/systemd/system", "default": "/etc/default", "cron.d": "/etc/cron.d"}


def check_text(v, stage: str, *args: str, timeout: float = 60, files: tuple[str, ...] = ()
               ) -> subprocess.CompletedProcess:
    """``check --no-scan ARGS`` of the volume ``v`` with ``stage/system`` as
    /etc/systemd/system, ``stage/default`` as /etc/default and ``stage/cron.d`` as
    /etc/cron.d; ``files``: more of /etc (``fstab``) from ``stage``."""
    for d in STAGED:
        os.makedirs(os.path.join(stage, d), exist_ok=True)
    vol = v.mountpoint
    if os.path.ismount(vol):
        subprocess.run(["umount", vol], check=True)
    binds = [(os.path.join(stage, d), where) for d, where in STAGED.items()]
    binds += [(os.path.join(stage, f), f"/etc/{f}") for f in files]
    script = f"mount '{v.device}' '{vol}' && " + "".join(
        f"mount --bind '{src}' '{dst}' && " for src, dst in binds) + \
        f"exec '{sys.executable}' -m vacate check --no-scan {' '.join(args)} '{vol}'"
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          check=False, capture_output=True, text=True, timeout=timeout)


def check_with(v, stage: str, **kw) -> tuple[int, dict]:
    """``check --json --no-scan`` (see :func:`check_text`) and its document."""
    r = check_text(v, stage, "--json", **kw)
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


def unit(stage: str, name: str, text: str, enabled: bool = True) -> None:
    write(stage, f"/system/{name}", text)
    if enabled:
        wants = os.path.join(stage, "system/multi-user.target.wants")
        os.makedirs(wants, exist_ok=True)
        os.symlink(f"../{name}", os.path.join(wants, name))
