"""A real OpenSSH server on 127.0.0.1 for the ``--host`` tests: throwaway host and client
keys, root's login by key only, and a client config (``ssh -F``) that trusts exactly this
server's key (``StrictHostKeyChecking yes``: a changed key fails, nothing is ever added).

``banner`` is printed on stdout and stderr before every command (an sshd ``ForceCommand``
wrapper, as site policies install); ``client`` adds lines to the client's config for this
host (``RequestTTY force`` for a pty).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass

SSHD = "/usr/sbin/sshd"


def available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh") is not None and \
        shutil.which("ssh-keygen") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: str) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True)
    with open(path + ".pub") as f:
        return f.read().strip()


@dataclass
class Server:
    dir: str
    port: int
    proc: subprocess.Popen
    host_pub: str
    alias: str = "vacate-test"

    @property
    def config(self) -> str:
        return os.path.join(self.dir, "ssh_config")

    def environ(self, **more) -> dict:
        """The environment a vacate run uses to reach this server (``--host vacate-test``)."""
        env = dict(os.environ, VACATE_SSH_ARGS=f"-F {self.config}")
        env.update(more)
        return env

    def trust(self, host_pub: str) -> None:
        """Make the client's known_hosts name ``host_pub`` for this server."""
        with open(os.path.join(self.dir, "known_hosts"), "w") as f:
            f.write(f"[127.0.0.1]:{self.port} {host_pub}\n")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start(dir: str, *, banner: str | None = None, client: tuple[str, ...] = ()) -> Server:
    os.makedirs(dir, exist_ok=True)
    os.makedirs("/run/sshd", exist_ok=True)          # sshd's privilege-separation directory
    host_pub = keygen(os.path.join(dir, "host_key"))
    user_pub = keygen(os.path.join(dir, "id"))
    with open(os.path.join(dir, "authorized_keys"), "w") as f:
        f.write(user_pub + "\n")
    port = free_port()
    lines = [f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {dir}/host_key",
             f"AuthorizedKeysFile {dir}/authorized_keys", "PermitRootLogin prohibit-password",
             "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
             "StrictModes no", f"PidFile {dir}/sshd.pid", "LogLevel ERROR",
             "PermitUserEnvironment no", "PrintMotd no", "PrintLastLog no",
             # bash reads ~/.bashrc for a command sent over ssh only at shell level 1; this
             # machine's root .bashrc starts pyenv (about 150 processes, 0.5 s a session), and
             # the suite's far host stands for a plain server, its python3 the system's
             "SetEnv SHLVL=1"]
    if banner is not None:
        wrapper = os.path.join(dir, "force.sh")
        with open(wrapper, "w") as f:
            f.write(f"#!/bin/sh\ncat <<'EOF'\n{banner}\nEOF\necho \"{banner}\" >&2\n"
                    'exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n')
        os.chmod(wrapper, 0o755)
        lines.append(f"ForceCommand {wrapper}")
    with open(os.path.join(dir, "sshd_config"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(dir, "ssh_config"), "w") as f:
        f.write("\n".join([
            "Host vacate-test", "  HostName 127.0.0.1", f"  Port {port}", "  User root",
            f"  IdentityFile {dir}/id", "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {dir}/known_hosts", "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes", "  UpdateHostKeys no", *[f"  {c}" for c in client],
            "Host *", "  IdentitiesOnly yes", f"  IdentityFile {dir}/id",
            f"  UserKnownHostsFile {dir}/known_hosts", "  GlobalKnownHostsFile /dev/null",
        ]) + "\n")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", os.path.join(dir, "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(dir, "log"), "w"))  # noqa: SIM115 (sshd's lifetime)
    server = Server(dir, port, proc, host_pub)
    server.trust(host_pub)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    server.stop()
    with open(os.path.join(dir, "log")) as f:
        raise RuntimeError(f"sshd did not start: {f.read()}")
