"""Read a part back: decompress, hash the compressed bytes, parse the tar stream by hand.

``read_part(fileobj, on_member)`` drives one pass over a part. For each member it calls
``on_member(member)``, which returns a consumer (``update(offset, data)`` per data segment,
then ``done()``) or None to skip the data. The compressed bytes are hashed on the way in;
decompression runs in a helper thread (zstandard and hashlib release the GIL), so the
part's sha256, decompression and the members' sha256 proceed at the same time.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable
from typing import BinaryIO, Protocol

import zstandard

from vacate.archive import tarfmt
from vacate.archive.tarfmt import BLOCK, Member, TarFormatError

READ = 1 << 20


class Consumer(Protocol):
    def update(self, offset: int, data: memoryview) -> None: ...
    def done(self) -> None: ...


class PartError(Exception):
    """The part cannot be read to its end: ``code`` is truncated / corrupt / unreadable."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class _Hashing:
    """A file wrapper that hands what is read through it to a hashing thread (so the part's
    sha256 runs beside decompression) and counts it."""

    def __init__(self, f: BinaryIO):
        self.f = f
        self.h = hashlib.sha256()
        self.n = 0
        self.q: queue.Queue = queue.Queue(maxsize=8)
        self.t = threading.Thread(target=self._hash, daemon=True)
        self.t.start()

    def _hash(self) -> None:
        while (b := self.q.get()) is not None:
            self.h.update(b)

    def read(self, n: int = -1) -> bytes:
        b = self.f.read(n)
        if b:
            self.q.put(b)
            self.n += len(b)
        return b

    def drain(self) -> None:
        while self.read(READ):
            pass

    def hexdigest(self) -> str:
        self.q.put(None)
        self.t.join()
        return self.h.hexdigest()


_EOF = object()


def _decompress_into(src: _Hashing, q: queue.Queue, stop: threading.Event) -> None:
    try:
        dctx = zstandard.ZstdDecompressor()
        r = dctx.stream_reader(src, read_size=2 * READ, read_across_frames=True)
        while not stop.is_set():
            b = r.read(4 * READ)
            if not b:
                break
            q.put(b)
        if not stop.is_set():
            src.drain()   # the rest of the file still counts for the part's checksum
        q.put(_EOF)
    except zstandard.ZstdError as e:
        q.put(PartError("corrupt", f"zstd: {e}"))
    except Exception as e:  # noqa: BLE001 (the reader must always learn how it ended)
        q.put(PartError("unreadable", f"{type(e).__name__}: {e}"))


class _Stream:
    """Decompressed bytes, handed out as memoryviews without copying where possible."""

    def __init__(self, q: queue.Queue):
        self.q = q
        self.buf = memoryview(b"")
        self.pos = 0
        self.eof = False

    def _more(self) -> bool:
        if self.eof:
            return False
        item = self.q.get()
        if item is _EOF:
            self.eof = True
            return False
        if isinstance(item, PartError):
            self.eof = True
            raise item
        rest = self.buf[self.pos:]
        self.buf = memoryview(bytes(rest) + item) if len(rest) else memoryview(item)
        self.pos = 0
        return True

    def take(self, n: int) -> memoryview:
        """Exactly ``n`` contiguous bytes (n small: headers); short only at end of stream."""
        while len(self.buf) - self.pos < n:
            if not self._more():
                break
        out = self.buf[self.pos:self.pos + n]
        self.pos += len(out)
        return out

    def chunks(self, n: int):
        """``n`` bytes as a series of memoryviews; raises PartError if the stream ends."""
        while n > 0:
            if self.pos >= len(self.buf) and not self._more():
                raise PartError("truncated", "the tar stream ends inside a member")
            out = self.buf[self.pos:self.pos + n]
            self.pos += len(out)
            n -= len(out)
            yield out


def _member_from(hdr: dict, pax: dict[bytes, bytes], longname: bytes | None,
                 longlink: bytes | None) -> tuple[Member, tuple | None, bool]:
    flag = hdr["flag"]
    if flag in (b"\0", b"7"):
        flag = tarfmt.REG
    kind = tarfmt.TYPE_NAMES.get(flag)
    if kind is None:
        raise TarFormatError(f"unsupported member type {flag!r}")
    path = pax.get(b"path", longname or hdr["name"])
    sparse_v1 = pax.get(b"GNU.sparse.major") == b"1"
    if sparse_v1:
        path = pax.get(b"GNU.sparse.name", path)
    size = int(pax[b"size"]) if b"size" in pax else hdr["size"]
    mtime_ns = tarfmt.parse_mtime(pax[b"mtime"]) if b"mtime" in pax \
        else hdr["mtime"] * 1_000_000_000
    m = Member(
        path=path, type=kind,
        size=int(pax.get(b"GNU.sparse.realsize", size)) if sparse_v1 else size,
        mode=hdr["mode"], uid=int(pax.get(b"uid", hdr["uid"])),
        gid=int(pax.get(b"gid", hdr["gid"])), uname=pax.get(b"uname", hdr["uname"]),
        gname=pax.get(b"gname", hdr["gname"]), mtime_ns=mtime_ns,
        linkpath=pax.get(b"linkpath", longlink or hdr["linkname"]),
        devmajor=hdr["devmajor"], devminor=hdr["devminor"],
        stored=size if kind == "file" else 0)
    return m, None, sparse_v1


def read_part(f: BinaryIO, on_member: Callable[[Member], Consumer | None]) -> tuple[str, int]:
    """Read one part to its end; returns (sha256 of the compressed bytes, their count).
    Raises PartError for a corrupt or truncated part (after reporting what could be read)."""
    src = _Hashing(f)
    q: queue.Queue = queue.Queue(maxsize=8)
    stop = threading.Event()
    t = threading.Thread(target=_decompress_into, args=(src, q, stop), daemon=True)
    t.start()
    s = _Stream(q)
    try:
        _parse(s, on_member)
        while s._more():        # trailing zero blocks / frame end
            s.pos = len(s.buf)
    except TarFormatError as e:
        stop.set()
        raise PartError("corrupt", f"tar: {e}") from None
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        t.join()
        digest = src.hexdigest()      # also ends the hashing thread on the error paths
    return digest, src.n


def _parse(s: _Stream, on_member) -> None:
    pax: dict[bytes, bytes] = {}
    longname = longlink = None
    zeros = 0
    while True:
        block = s.take(BLOCK)
        if len(block) < BLOCK:
            if len(block) == 0 and zeros:
                return
            raise PartError("truncated", "the tar stream ends without its end-of-archive "
                            "blocks")
        b = bytes(block)
        if tarfmt.is_zero_block(b):
            zeros += 1
            if zeros == 2:
                return
            continue
        zeros = 0
        hdr = tarfmt.parse_ustar(b)
        flag = hdr["flag"]
        if flag in (tarfmt.PAX, tarfmt.PAX_GLOBAL, tarfmt.GNU_LONGNAME, tarfmt.GNU_LONGLINK):
            data = b"".join(bytes(c) for c in s.chunks(hdr["size"]))
            _skip(s, tarfmt.padding(hdr["size"]))
            if flag == tarfmt.PAX:
                pax.update(tarfmt.parse_pax(data))
            elif flag == tarfmt.GNU_LONGNAME:
                longname = data.rstrip(b"\0")
            elif flag == tarfmt.GNU_LONGLINK:
                longlink = data.rstrip(b"\0")
            continue
        m, _, sparse = _member_from(hdr, pax, longname, longlink)
        pax, longname, longlink = {}, None, None
        stored = m.stored
        segs = ((0, stored),) if stored else ()
        used = 0
        if sparse and stored:
            head = s.take(BLOCK)
            text = bytes(head)
            parsed = tarfmt.parse_sparse_map(text)
            while parsed is None:
                more = s.take(BLOCK)
                if len(more) < BLOCK:
                    raise PartError("truncated", "the tar stream ends inside a sparse map")
                text += bytes(more)
                parsed = tarfmt.parse_sparse_map(text)
            segs, used = parsed
            m = Member(**{**{k: getattr(m, k) for k in m.__slots__}, "sparse": segs})
        consumer = on_member(m)
        for off, length in segs:
            pos = off
            for c in s.chunks(length):
                if consumer is not None:
                    consumer.update(pos, c)
                pos += len(c)
            used += length
        if consumer is not None:
            consumer.done()
        _skip(s, tarfmt.padding(used) + (stored - used if stored > used else 0))


def _skip(s: _Stream, n: int) -> None:
    for _ in s.chunks(n):
        pass
