"""S3-compatible object storage target (boto3).

Endpoint from ``--endpoint`` or ``AWS_ENDPOINT_URL``; credentials from the usual AWS
environment variables or config files (boto3's own chain); they are never printed.
A part is streamed as a multipart upload (8 MiB pieces, two in flight); it becomes visible
only when the upload is completed. Unfinished uploads under the prefix (an interrupted run)
are listed and aborted on resume: resuming restarts at the first part that was not completed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

from vacate.observing.errors import UsageError

PIECE = 8 << 20
# md5 is S3's ETag of a piece, a checksum here, not security (FIPS builds refuse it without
# the flag, which 3.8's hashlib does not take)
_NOT_SECURITY = {"usedforsecurity": False} if sys.version_info >= (3, 9) else {}


def _md5(data) -> str:
    return hashlib.new("md5", data, **_NOT_SECURITY).hexdigest()


def _client(endpoint: str | None, environ):
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise UsageError("S3 targets need boto3", hint="pip install 'vacate[s3]'") from None
    env = environ or {}
    endpoint = endpoint or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    session = boto3.session.Session(
        aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
        aws_session_token=env.get("AWS_SESSION_TOKEN"),
        region_name=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
        profile_name=env.get("AWS_PROFILE") if not env.get("AWS_ACCESS_KEY_ID") else None)
    return session.client("s3", endpoint_url=endpoint,
                          config=Config(retries={"max_attempts": 5, "mode": "standard"},
                                        s3={"addressing_style": "path"}))


def _is_missing(err) -> bool:
    code = getattr(err, "response", {}).get("Error", {}).get("Code", "")
    return code in ("NoSuchKey", "404", "NotFound")


class _S3Sink:
    """One part as a multipart upload. ``resume`` = (upload id, {piece number: (etag, size)})
    of an upload an interrupted run left: pieces that come out identical (same size and MD5
    ETag; zstd's output is deterministic for the same input and settings) are not sent
    again."""

    def __init__(self, t: S3Target, key: str, resume=None):
        self.t = t
        self.key = key
        if resume is not None:
            self.upload_id, self.uploaded = resume
        else:
            self.upload_id = t.client.create_multipart_upload(Bucket=t.bucket,
                                                              Key=key)["UploadId"]
            self.uploaded = {}
        self.reused_bytes = 0
        self.buf = bytearray()
        self.futures = []
        self.pool = ThreadPoolExecutor(2)

    def _send(self, data: bytes) -> None:
        n = len(self.futures) + 1
        old = self.uploaded.get(n)
        if old is not None and old[1] == len(data) \
                and old[0].strip('"') == _md5(data):
            done: Future = Future()
            done.set_result({"ETag": old[0]})
            self.futures.append(done)
            self.reused_bytes += len(data)
            return
        if len(self.futures) >= 2:
            self.futures[-2].result()        # at most two pieces in flight
        self.futures.append(self.pool.submit(
            self.t.client.upload_part, Bucket=self.t.bucket, Key=self.key,
            UploadId=self.upload_id, PartNumber=n, Body=data))

    def write(self, data) -> int:
        self.buf += data
        while len(self.buf) >= PIECE:
            self._send(bytes(self.buf[:PIECE]))
            del self.buf[:PIECE]
        return len(data)

    def commit(self) -> None:
        if self.buf or not self.futures:
            self._send(bytes(self.buf))
            self.buf.clear()
        parts = [{"PartNumber": i + 1, "ETag": f.result()["ETag"]}
                 for i, f in enumerate(self.futures)]
        self.pool.shutdown()
        self.t.client.complete_multipart_upload(
            Bucket=self.t.bucket, Key=self.key, UploadId=self.upload_id,
            MultipartUpload={"Parts": parts})

    def abort(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        # best effort: a failed abort leaves an upload that the next run aborts
        with contextlib.suppress(Exception):
            self.t.client.abort_multipart_upload(Bucket=self.t.bucket, Key=self.key,
                                                 UploadId=self.upload_id)


class _Body(io.RawIOBase):
    """A streaming GET body as a file object."""

    def __init__(self, body):
        self.body = body

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.body.read(len(b))
        b[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self.body.close()
        super().close()


class S3Target:
    def __init__(self, client, bucket: str, prefix: str):
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.location = f"s3://{bucket}/{self.prefix}"

    @classmethod
    def from_url(cls, url: str, *, endpoint: str | None = None, environ=None) -> S3Target:
        rest = url[len("s3://"):]
        bucket, _, prefix = rest.partition("/")
        if not bucket or not prefix.strip("/"):
            raise UsageError(f"{url}: expected s3://bucket/prefix/NAME")
        t = cls(_client(endpoint, environ), bucket, prefix)
        t.check()
        return t

    def check(self) -> None:
        """Fail early, with a clear message, when the bucket cannot be reached."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except Exception as e:  # noqa: BLE001 (any failure here means "cannot reach it")
            code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
            why = {"404": "no such bucket", "NoSuchBucket": "no such bucket",
                   "403": "access denied"}.get(code, type(e).__name__)
            raise UsageError(f"s3://{self.bucket}: {why}",
                             hint="check the bucket, AWS_ENDPOINT_URL/--endpoint and the "
                             "credentials in the environment") from None

    def _k(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def create(self, name: str) -> _S3Sink:
        key = self._k(name)
        ups = sorted((u for u in self.unfinished_uploads(with_time=True) if u[0] == key),
                     key=lambda u: u[2])
        for k, uid, _ in ups[:-1]:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=k, UploadId=uid)
        if not ups:
            return _S3Sink(self, key)
        uid = ups[-1][1]
        pieces = {}
        for page in self.client.get_paginator("list_parts").paginate(
                Bucket=self.bucket, Key=key, UploadId=uid):
            for p in page.get("Parts", []):
                pieces[p["PartNumber"]] = (p["ETag"], p["Size"])
        return _S3Sink(self, key, resume=(uid, pieces))

    def put(self, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._k(name), Body=data)

    def get(self, name: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._k(name))["Body"].read()
        except self.client.exceptions.NoSuchKey:
            raise FileNotFoundError(name) from None
        except Exception as e:
            if _is_missing(e):
                raise FileNotFoundError(name) from None
            raise

    def open(self, name: str) -> BinaryIO:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._k(name))["Body"]
        except Exception as e:
            if _is_missing(e):
                raise FileNotFoundError(name) from None
            raise
        return io.BufferedReader(_Body(body), buffer_size=1 << 20)

    def list(self, prefix: str = "") -> dict[str, int]:
        base = self._k(prefix).rstrip("/") + "/"
        out = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base, Delimiter="/"):
            for o in page.get("Contents", []):
                rel = o["Key"][len(self.prefix) + 1:]
                out[rel] = o["Size"]
        return out

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._k(name))

    def unfinished_uploads(self, with_time: bool = False) -> list[tuple]:
        out = []
        for page in self.client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.bucket, Prefix=self.prefix + "/"):
            out += [(u["Key"], u["UploadId"], u.get("Initiated")) if with_time
                    else (u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
        return out

    def cleanup_unfinished(self, keep: frozenset[str] = frozenset()) -> int:
        """Abort unfinished uploads, except those of the names in ``keep`` (the part an
        interrupted run was uploading: ``create`` picks it up again)."""
        keys = {self._k(n) for n in keep}
        n = 0
        for key, uid in self.unfinished_uploads():
            if key not in keys:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=uid)
                n += 1
        return n
