"""Read a part back: decompress, hash the compressed bytes, parse the tar stream by hand.

``read_part(fileobj, on_member)`` drives one pass over a part. For each member it calls
``on_member(member)``, which returns a consumer (``update(offset, data)`` per data segment,
then ``done()``) or None to skip the data. The compressed bytes are hashed on the way in;
decompression runs in a helper thread (python-zstandard and hashlib release the GIL; without
the library, a ``zstd -d`` child decompresses: :func:`vacate.archive.compress.decompressor`),
so the part's sha256, decompression and the members' sha256 proceed at the same time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import queue
import stat as S
import threading
from collections.abc import Callable
from typing import BinaryIO, Protocol

from vacate.archive import compress, tarfmt
from vacate.archive.tarfmt import BLOCK, Member, TarFormatError
from vacate.archive.target import LocalTarget, Target
from vacate.observing import fsio

READ = 1 << 20
MAX_META = 16 << 20            # a pax header or GNU long name: what vacate writes is < 16 KiB
MAX_SPARSE_MAP = 256 << 20     # a sparse map's text (~20 bytes a data segment)


class _Capped:
    """A part's bytes, at most ``limit`` of them (the size the manifest records): what lies
    beyond is never read (``more()`` tells whether there is any)."""

    def __init__(self, f: BinaryIO, limit: int, size: int | None = None):
        self.f = f
        self.left = limit
        self.size = size            # the file's size, where it is known before reading

    def read(self, n: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        b = self.f.read(self.left if n < 0 else min(n, self.left))
        self.left -= len(b)
        return b

    def more(self) -> bool:
        """Whether the file holds more than ``limit`` bytes (one byte is read to tell)."""
        return self.left <= 0 and bool(self.f.read(1))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()


def open_part(target: Target, name: str, size: int) -> _Capped:
    """Open the part (or other file of the archive) ``name`` to read at most ``size`` bytes
    of it. A local file is opened without blocking and checked to be a regular file first
    (``NotRegular``); its size is known before it is read (``.size``)."""
    if not isinstance(target, LocalTarget):
        return _Capped(target.open(name), size)
    path = os.path.join(target.root, name)
    fd = fsio.open_noatime(path, fsio.NAMED)
    try:
        st = os.fstat(fd)
        if not S.S_ISREG(st.st_mode):
            raise fsio.NotRegular(path, fsio.file_kind(st.st_mode))
        return _Capped(os.fdopen(fd, "rb", buffering=0), size, st.st_size)
    except BaseException:
        os.close(fd)
        raise


def lines(f, limit: int, chunk: int = READ, ended: list | None = None):
    """The lines of ``f`` (without their newline), numbered from 1, read ``chunk`` bytes at a
    time: ``(n, line)``, or ``(n, length)`` for a line longer than ``limit``, which is
    skipped without being held. The last line need not end with a newline: ``ended`` (a
    list) is given True or False at the end, whether it did (nothing for an empty file)."""
    buf = b""
    n = 0
    over = -1                   # the length so far of a line being skipped (-1: none)
    while True:
        b = f.read(chunk)
        if not b:
            break
        if over >= 0:
            i = b.find(b"\n")
            if i < 0:
                over += len(b)
                continue
            n += 1
            yield n, over + i
            over, b = -1, b[i + 1:]
        buf += b
        start = 0
        while True:
            i = buf.find(b"\n", start)
            if i < 0:
                break
            n += 1
            yield n, (buf[start:i] if i - start <= limit else i - start)
            start = i + 1
        buf = buf[start:]
        if len(buf) > limit:
            over, buf = len(buf), b""
    if ended is not None and (n or over >= 0 or buf):
        ended.append(over < 0 and not buf)
    if over >= 0:
        yield n + 1, over
    elif buf:
        yield n + 1, buf


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
        while True:
            b = self.q.get()
            if b is None:
                return
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


def _decompress_into(src: _Hashing, q: queue.Queue, stop: threading.Event,
                     limit: int | None) -> None:
    r = None
    try:
        r = compress.decompressor(src)
        total = 0
        while not stop.is_set():
            b = r.read(4 * READ)
            if not b:
                break
            total += len(b)
            if limit is not None and total > limit:
                q.put(PartError("corrupt", f"it decompresses to more than the {limit:,} "
                                "bytes of tar stream the manifest records"))
                return
            q.put(b)
        if not stop.is_set():
            src.drain()   # the rest of the file still counts for the part's checksum
        q.put(_EOF)
    except compress.DecompressError as e:
        q.put(PartError("corrupt", f"zstd: {e}"))
    except Exception as e:  # noqa: BLE001 (the reader must always learn how it ended)
        q.put(PartError("unreadable", f"{type(e).__name__}: {e}"))
    finally:
        if r is not None:
            r.close()


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
    size = _count(pax[b"size"]) if b"size" in pax else hdr["size"]
    mtime_ns = tarfmt.parse_mtime(pax[b"mtime"]) if b"mtime" in pax \
        else hdr["mtime"] * 1_000_000_000
    m = Member(
        path=path, type=kind,
        size=_count(pax.get(b"GNU.sparse.realsize", b"%d" % size)) if sparse_v1 else size,
        mode=hdr["mode"], uid=int(pax.get(b"uid", hdr["uid"])),
        gid=int(pax.get(b"gid", hdr["gid"])), uname=pax.get(b"uname", hdr["uname"]),
        gname=pax.get(b"gname", hdr["gname"]), mtime_ns=mtime_ns,
        linkpath=pax.get(b"linkpath", longlink or hdr["linkname"]),
        devmajor=hdr["devmajor"], devminor=hdr["devminor"],
        stored=size if kind == "file" else 0)
    return m, None, sparse_v1


def _count(v: bytes) -> int:
    if not v.isdigit() or len(v) > 20:
        raise TarFormatError(f"malformed size {v[:30]!r}")
    return int(v)


def read_part(f: BinaryIO, on_member: Callable[[Member], Consumer | None],
              tar_bytes: int | None = None) -> tuple[str, int]:
    """Read one part to its end; returns (sha256 of the compressed bytes, their count).
    Raises PartError for a corrupt or truncated part (after reporting what could be read),
    also when it decompresses to more than ``tar_bytes`` (what the manifest records)."""
    src = _Hashing(f)
    q: queue.Queue = queue.Queue(maxsize=8)
    stop = threading.Event()
    t = threading.Thread(target=_decompress_into, args=(src, q, stop, tar_bytes), daemon=True)
    t.start()
    s = _Stream(q)
    try:
        _parse(s, on_member)
        while s._more():        # trailing zero blocks / frame end
            s.pos = len(s.buf)
    except ValueError as e:     # TarFormatError, and numbers that are not numbers
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
            if hdr["size"] > MAX_META:
                raise TarFormatError(f"a {hdr['size']:,}-byte header record (at most "
                                     f"{MAX_META:,})")
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
            segs, used = _sparse_map(s, m)
            m = dataclasses.replace(m, sparse=segs)
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


def _sparse_map(s: _Stream, m: Member) -> tuple[tuple[tuple[int, int], ...], int]:
    """The data segments of a sparse member and the length of its map, read block by block
    and parsed once the map's lines are all there; checked to lie in order inside the file
    and to fill the member's data exactly."""
    blocks: list[bytes] = []
    lines = 0
    need = None                  # newlines the whole map holds, once its count is known
    while need is None or lines < need:
        b = s.take(BLOCK)
        if len(b) < BLOCK:
            raise PartError("truncated", "the tar stream ends inside a sparse map")
        b = bytes(b)
        blocks.append(b)
        lines += b.count(b"\n")
        if len(blocks) * BLOCK > min(MAX_SPARSE_MAP, m.stored):
            raise TarFormatError("a sparse map longer than the member")
        if need is None and lines:
            first = b"".join(blocks).split(b"\n", 1)[0]
            if not first.isdigit() or len(first) > 20:
                raise TarFormatError("malformed sparse map")
            need = 1 + 2 * int(first)
    parsed = tarfmt.parse_sparse_map(b"".join(blocks))
    if parsed is None:
        raise TarFormatError("malformed sparse map")
    segs, used = parsed
    end = 0
    for off, length in segs:
        if off < end or off + length > m.size:
            raise TarFormatError("a sparse map whose segments overlap or pass the file's end")
        end = off + length
    if used + sum(n for _, n in segs) != m.stored:
        raise TarFormatError("a sparse map that does not fill the member")
    return segs, used


def _skip(s: _Stream, n: int) -> None:
    for _ in s.chunks(n):
        pass
