"""A real docker daemon for tests (apt package ``docker.io``), started by hand in a temp dir.

``dockerd --bridge=none --iptables=false`` (host networking untouched) with its own data root,
exec root, pidfile and socket, so it never meets the host's default daemon or another test's.
The image is imported offline from the cached Debian rootfs tarball (tests/harness/rootfs.py).
``DockerBox.close`` removes the containers it made, stops the daemon by its pid (and the
containerd it started, by pid, if it lingers) and deletes the temp dir. Needs root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from harness import rootfs

IMAGE = "vacate-test/bookworm:latest"


def docker_available() -> bool:
    return os.geteuid() == 0 and shutil.which("dockerd") is not None and \
        _client() is not None


def why_not() -> str | None:
    """Why a real docker daemon with the test image cannot be had here, or None."""
    if not docker_available():
        return "needs root and docker.io"
    why = rootfs.unavailable()
    return f"no container rootfs: {why}" if why else None


def _client() -> str | None:
    # the client that ships with the daemon (a newer one elsewhere on PATH may refuse its API)
    for c in ("/usr/bin/docker", shutil.which("docker")):
        if c and os.path.exists(c):
            return c
    return None


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


@dataclass
class DockerBox:
    workdir: str
    data_root: str
    sock: str
    proc: subprocess.Popen | None = None
    containers: list[str] = field(default_factory=list)

    def docker(self, *args: str, check: bool = True, input: bytes | None = None,
               timeout: int = 120) -> subprocess.CompletedProcess:
        r = subprocess.run([_client(), "-H", f"unix://{self.sock}", *args], input=input,
                           capture_output=True, check=False, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)}: {r.stderr.decode().strip()}")
        return r

    def out(self, *args: str) -> str:
        return self.docker(*args).stdout.decode().strip()

    def import_image(self) -> None:
        with open(rootfs.tarball(), "rb") as f:
            zstd = subprocess.Popen(["zstd", "-dc"], stdin=f, stdout=subprocess.PIPE)
            try:
                subprocess.run([_client(), "-H", f"unix://{self.sock}", "import", "-", IMAGE],
                               stdin=zstd.stdout, capture_output=True, check=True, timeout=120)
            finally:
                zstd.stdout.close()
                zstd.wait()

    def run(self, name: str, *args: str, start: bool = True) -> str:
        """``docker run -d`` (or ``create``) a container from the test image; returns its id."""
        cmd = ["run", "-d"] if start else ["create"]
        cid = self.out(*cmd, "--name", name, "--network", "none", *args)
        self.containers.append(name)
        return cid

    def inspect(self, name: str, fmt: str) -> str:
        return self.out("inspect", "-f", fmt, name)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if self.containers:
                with contextlib.suppress(Exception):
                    self.docker("rm", "-f", *self.containers, check=False, timeout=60)
            kids = _children(self.proc.pid)   # its containerd
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for k in kids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(k, signal.SIGKILL)
        # dockerd's mounts below the data root (overlay2, netns, shm) go with it
        with open("/proc/self/mountinfo") as f:
            ours = [ln.split()[4] for ln in f if ln.split()[4].startswith(self.workdir)]
        for m in sorted(ours, key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True, check=False)
        # the image's layers are tens of thousands of files: rm(1) is ~3x faster than rmtree
        subprocess.run(["rm", "-rf", "--one-file-system", self.workdir], capture_output=True,
                       check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_daemon(data_root: str | None = None) -> DockerBox:
    """Start a private dockerd; ``data_root`` defaults to a temp dir."""
    workdir = tempfile.mkdtemp(prefix="vacate-docker-")
    root = data_root or os.path.join(workdir, "data-root")
    exec_root = os.path.join(workdir, "exec")
    os.makedirs(root, exist_ok=True)
    os.makedirs(exec_root)
    box = DockerBox(workdir, root, os.path.join(workdir, "docker.sock"))
    log = open(os.path.join(workdir, "dockerd.log"), "wb")  # noqa: SIM115 - the daemon's stdout
    try:
        box.proc = subprocess.Popen(
            ["dockerd", "--data-root", root, "--exec-root", exec_root,
             "-H", f"unix://{box.sock}", "-p", os.path.join(workdir, "dockerd.pid"),
             "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
             "--storage-driver=overlay2"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + 60
        while box.docker("version", check=False, timeout=10).returncode != 0:
            if box.proc.poll() is not None or time.monotonic() > deadline:
                with open(log.name) as f:
                    raise RuntimeError("dockerd did not start:\n" + f.read()[-2000:])
            time.sleep(0.2)
    except BaseException:
        box.close()
        raise
    finally:
        log.close()
    return box
