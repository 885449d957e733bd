"""``verify()``: read everything back from the target and check it.

Every part's sha256 (against ``PARTS.SHA256SUMS`` and the manifest), every member's sha256,
type, size and link against the manifest, ``SHA256SUMS`` against the manifest, and with
``against`` the source tree against the archive (content re-hashed, metadata compared), in a
second thread while the parts are read. Each problem is a named finding.
"""

from __future__ import annotations

import hashlib
import os
import stat as S
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from vacate.archive import manifest as mf
from vacate.archive import sums
from vacate.archive.reader import PartError, read_part
from vacate.archive.source import arc_roots, walk
from vacate.archive.tarfmt import Member
from vacate.archive.target import Target
from vacate.errors import NotFound, UsageError
from vacate.model.common import Problem

CHUNK = 1 << 20
_ZEROS = memoryview(bytes(CHUNK))


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing that does not match. ``code``: part-missing, part-truncated, part-corrupt,
    part-checksum, part-unlisted, file-checksum, member-missing, member-unexpected,
    member-metadata, sums-mismatch, source-changed, source-missing, source-extra."""

    code: str
    message: str
    path: str | None = None
    part: str | None = None

    def as_json(self) -> dict:
        return {"code": self.code, "message": self.message, "path": self.path,
                "part": self.part}


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """What `vacate verify` checked and found."""
    location: str
    name: str
    parts_checked: int
    files_checked: int
    bytes_checked: int
    sources_checked: int
    findings: tuple[Finding, ...]
    warnings: tuple[Problem, ...]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return not self.findings


def load_manifest(target: Target) -> mf.Manifest:
    try:
        raw = target.get(mf.MANIFEST)
    except (FileNotFoundError, KeyError):
        if target.list(mf.STATE_DIR):
            raise UsageError(f"{target.location} holds an unfinished archive",
                             hint="run the same `vacate archive` again to finish it") from None
        raise NotFound(f"{target.location}: no vacate archive here (no {mf.MANIFEST})") \
            from None
    try:
        return mf.loads(raw)
    except (ValueError, KeyError) as e:
        raise UsageError(f"{target.location}/{mf.MANIFEST} is damaged: {e}") from None


class _Hasher:
    """Consumer for one member: sha256 over the logical content (holes hashed as zeros)."""

    __slots__ = ("h", "pos", "sink", "size", "tick")

    def __init__(self, size: int, tick, sink=None):
        self.h = hashlib.sha256()
        self.pos = 0
        self.size = size
        self.sink = sink
        self.tick = tick

    def _zeros(self, upto: int) -> None:
        while self.pos < upto:
            n = min(CHUNK, upto - self.pos)
            self.h.update(_ZEROS[:n])
            if self.sink is not None:
                self.sink.hole(n)
            self.pos += n

    def update(self, offset: int, data: memoryview) -> None:
        if offset > self.pos:
            self._zeros(offset)
        self.h.update(data)
        if self.sink is not None:
            self.sink.write(data)
        self.pos += len(data)
        self.tick(len(data))

    def done(self) -> None:
        self._zeros(self.size)


def _dec(b: bytes) -> str:
    return os.fsdecode(b)


def check_member(m: Member, e: mf.Entry | None, part: str) -> list[Finding]:
    p = _dec(m.path)
    if e is None:
        return [Finding("member-unexpected", f"{part} holds {p!r}, which the manifest does not "
                        "list for it", p, part)]
    bad = []
    if m.type != e.type:
        bad.append(f"type {m.type} != {e.type}")
    if e.type == "file" and m.size != e.size:
        bad.append(f"size {m.size} != {e.size}")
    if e.type in ("symlink", "hardlink") and m.linkpath != (e.link or b""):
        bad.append("link target differs")
    if (m.mode & 0o7777) != e.mode or m.mtime_ns != e.mtime_ns:
        bad.append("mode or mtime differs")
    return [Finding("member-metadata", f"{p}: {', '.join(bad)}", p, part)] if bad else []


def _check_part(target: Target, info: mf.PartInfo, expected: dict[bytes, mf.Entry],
                findings: list[Finding], tick) -> int:
    seen: dict[bytes, tuple[_Hasher | None, mf.Entry | None]] = {}

    def on_member(m: Member):
        e = expected.get(m.path)
        findings.extend(check_member(m, e, info.name))
        if m.type == "file":
            h = _Hasher(m.size, tick)
            seen[m.path] = (h, e)
            return h
        seen[m.path] = (None, e)
        return None

    files = 0
    try:
        with target.open(info.name) as f:
            sha, n = read_part(f, on_member)
        if n != info.bytes:
            findings.append(Finding("part-truncated" if n < info.bytes else "part-checksum",
                                    f"{info.name}: {n} bytes, the manifest says {info.bytes}",
                                    part=info.name))
        elif sha != info.sha256:
            findings.append(Finding("part-checksum", f"{info.name}: sha256 {sha} does not match "
                                    f"the manifest's {info.sha256}", part=info.name))
    except PartError as err:
        code = "part-truncated" if err.code == "truncated" else "part-corrupt"
        findings.append(Finding(code, f"{info.name}: {err}", part=info.name))
    except OSError as err:
        findings.append(Finding("part-corrupt", f"{info.name}: {err}", part=info.name))
    for path, (h, e) in seen.items():
        if h is None or e is None:
            continue
        files += 1
        if h.h.hexdigest() != e.sha256:
            p = _dec(path)
            findings.append(Finding("file-checksum", f"{p}: content does not match its sha256 "
                                    f"in the manifest ({info.name})", p, info.name))
    for path, e in expected.items():
        if path not in seen:
            p = _dec(path)
            findings.append(Finding("member-missing", f"{p} is not readable from {info.name}",
                                    p, info.name))
    return files


def _file_sha(path: bytes) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                return h.hexdigest()
            h.update(b)


def check_against(m: mf.Manifest, against: list[str], problems: list[Problem]) -> tuple[
        list[Finding], int]:
    """Compare source trees with the manifest (whose content the part pass proves)."""
    try:
        roots = arc_roots(against)
    except ValueError as e:
        raise UsageError(str(e)) from None
    tops = {e.path.split(b"/", 1)[0] for e in m.entries}
    for _, base in roots:
        if base not in tops:
            raise UsageError(f"--against {os.fsdecode(base)!r}: the archive holds no top-level "
                             f"{os.fsdecode(base)!r}",
                             hint="top-level names: " + ", ".join(sorted(map(_dec, tops))))
    bases = {b for _, b in roots}
    entries = {e.path: e for e in m.entries if e.path.split(b"/", 1)[0] in bases}
    out: list[Finding] = []
    seen = set()
    n = 0
    for ab, base in roots:
        for se in walk(ab, base, problems, mf.excluded(m)):
            n += 1
            p = _dec(se.abspath)
            e = entries.get(se.arcpath)
            seen.add(se.arcpath)
            st = se.st
            if e is None:
                out.append(Finding("source-extra", f"{p} is not in the archive", p))
                continue
            kind = "dir" if S.S_ISDIR(st.st_mode) else "symlink" if S.S_ISLNK(st.st_mode) \
                else "file" if S.S_ISREG(st.st_mode) else "other"
            etype = "file" if e.type == "hardlink" else e.type
            if kind != etype and not (kind == "other" and etype in ("fifo", "char", "block")):
                out.append(Finding("source-changed", f"{p}: is a {kind}, the archive holds a "
                                   f"{etype}", p))
                continue
            diffs = []
            if kind == "file":
                if st.st_size != e.size:
                    diffs.append(f"size {st.st_size} != {e.size}")
                else:
                    try:
                        if _file_sha(se.abspath) != e.sha256:
                            diffs.append("content differs")
                    except OSError as err:
                        problems.append(Problem("unreadable", f"{p}: {err.strerror}", p, True))
            if kind == "symlink":
                try:
                    if os.readlink(se.abspath) != e.link:
                        diffs.append("link target differs")
                except OSError:
                    pass
            if kind != "symlink" and S.S_IMODE(st.st_mode) != e.mode:
                diffs.append(f"mode {S.S_IMODE(st.st_mode):04o} != {e.mode:04o}")
            if kind != "dir" and st.st_mtime_ns != e.mtime_ns:
                diffs.append("mtime differs")
            if (st.st_uid, st.st_gid) != (e.uid, e.gid):
                diffs.append("owner differs")
            if diffs:
                out.append(Finding("source-changed", f"{p}: {', '.join(diffs)}", p))
    for path in entries:
        if path not in seen:
            p = _dec(path)
            out.append(Finding("source-missing", f"{p} is in the archive but not in the source",
                               p))
    return out, n


def verify(target: Target, *, against: list[str] | None = None,
           progress: Callable[[int, int], None] | None = None) -> VerifyResult:
    t0 = time.monotonic()
    m = load_manifest(target)
    findings: list[Finding] = []
    problems: list[Problem] = []
    listed = target.list()
    try:
        declared = {n.decode("utf-8", "surrogateescape"): d
                    for d, n in sums.parse(target.get(mf.PART_SUMS))}
    except (FileNotFoundError, KeyError, ValueError) as e:
        findings.append(Finding("sums-mismatch", f"{mf.PART_SUMS} missing or damaged: {e}"))
        declared = {}
    for p in m.parts:
        if declared and declared.get(p.name) != p.sha256:
            findings.append(Finding("sums-mismatch", f"{mf.PART_SUMS} disagrees with the "
                                    f"manifest about {p.name}", part=p.name))
    names = {p.name for p in m.parts}
    for n in listed:
        if n.endswith(".tar.zst") and n not in names:
            findings.append(Finding("part-unlisted", f"{n} is not part of this archive", part=n))
    try:
        want = mf.sums_file(m.entries)
        if target.get(mf.SUMS) != want:
            findings.append(Finding("sums-mismatch", f"{mf.SUMS} does not match the manifest"))
    except (FileNotFoundError, KeyError):
        findings.append(Finding("sums-mismatch", f"{mf.SUMS} is missing"))

    total = sum(e.size for e in m.entries if e.type == "file")
    done = [0]
    last = [0.0]

    def tick(n: int) -> None:
        done[0] += n
        if progress is not None:
            now = time.monotonic()
            if now - last[0] > 0.2:
                last[0] = now
                progress(done[0], total)

    by_part: dict[str, dict[bytes, mf.Entry]] = {p.name: {} for p in m.parts}
    for e in m.entries:
        by_part.setdefault(e.part, {})[e.path] = e
    pool = ThreadPoolExecutor(1) if against else None
    fut = pool.submit(check_against, m, against, problems) if pool else None
    files = 0
    try:
        for info in m.parts:
            if info.name not in listed:
                findings.append(Finding("part-missing", f"{info.name} is missing from "
                                        f"{target.location}", part=info.name))
                for path in by_part.get(info.name, {}):
                    p = _dec(path)
                    findings.append(Finding("member-missing", f"{p} is lost with {info.name}",
                                            p, info.name))
                continue
            if listed[info.name] < info.bytes:
                findings.append(Finding("part-truncated", f"{info.name}: {listed[info.name]} "
                                        f"bytes, the manifest says {info.bytes}",
                                        part=info.name))
            files += _check_part(target, info, by_part.get(info.name, {}), findings, tick)
        sources = 0
        if fut is not None:
            found, sources = fut.result()
            findings.extend(found)
    finally:
        if pool:
            pool.shutdown(wait=True)
    if progress:
        progress(done[0], total)
    # one truncation can be seen twice (size listing and stream end): keep the first
    uniq: list[Finding] = []
    keys = set()
    for f in findings:
        k = (f.code, f.path, f.part) if f.path else (f.code, f.part)
        if k not in keys:
            keys.add(k)
            uniq.append(f)
    return VerifyResult(target.location, m.name, len(m.parts), files, done[0], sources,
                        tuple(uniq), tuple(problems), time.monotonic() - t0)
