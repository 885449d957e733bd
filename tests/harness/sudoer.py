"""A throwaway unprivileged user who may ``sudo`` anything without a password, for the
``become`` tests: ``useradd`` with a home of its own, a drop-in
``/etc/sudoers.d/vacate-test-<random>`` (checked by ``visudo -c`` before it is trusted), both
removed when the ``with`` block ends, however it ends."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

SUDO = "/usr/bin/sudo"


def available() -> bool:
    return os.geteuid() == 0 and os.path.exists(SUDO) and shutil.which("useradd") is not None \
        and shutil.which("userdel") is not None and shutil.which("visudo") is not None


@dataclass(frozen=True)
class User:
    name: str
    home: str
    uid: int


@contextlib.contextmanager
def sudoer() -> Iterator[User]:
    tag = secrets.token_hex(4)
    name, dropin = f"vt{tag}", f"/etc/sudoers.d/vacate-test-{tag}"
    base = tempfile.mkdtemp(prefix="vacate-sudoer-")
    os.chmod(base, 0o755)
    home = os.path.join(base, "home")
    added = False
    try:
        subprocess.run(["useradd", "-m", "-d", home, "-s", "/bin/sh", "-U", name],
                       check=True, capture_output=True, timeout=60)
        added = True
        # sshd without PAM refuses an account whose password is locked ("!"): "*" is no
        # password at all, and no lock
        subprocess.run(["usermod", "-p", "*", name], check=True, capture_output=True,
                       timeout=60)
        with open(dropin + ".tmp", "w") as f:
            f.write(f"{name} ALL=(ALL:ALL) NOPASSWD: ALL\n")
        os.chmod(dropin + ".tmp", 0o440)
        subprocess.run(["visudo", "-c", "-q", "-f", dropin + ".tmp"], check=True,
                       capture_output=True, timeout=60)
        os.rename(dropin + ".tmp", dropin)
        yield User(name, home, int(subprocess.run(["id", "-u", name], check=True,
                                                  capture_output=True, text=True,
                                                  timeout=60).stdout))
    finally:
        for p in (dropin, dropin + ".tmp"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
        if added:
            subprocess.run(["userdel", "-f", name], capture_output=True, timeout=60,
                           check=False)
        shutil.rmtree(base, ignore_errors=True)
