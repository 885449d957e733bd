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
from dataclasses import dataclass, replace

from vacate.archive import compress, sums
from vacate.archive import manifest as mf
from vacate.archive.manifest import shown
from vacate.archive.reader import PartError, open_part, read_named, read_part
from vacate.archive.source import arc_roots, walk
from vacate.archive.tarfmt import Member
from vacate.archive.target import Target
from vacate.observing import fsio
from vacate.observing.compat import SLOTS
from vacate.observing.errors import (
    EXIT_ERROR,
    EXIT_IN_USE,
    EXIT_OK,
    EXIT_UNKNOWN,
    NotFound,
    UsageError,
    VacateError,
)
from vacate.observing.model.common import Problem

CHUNK = 1 << 20
_ZEROS = memoryview(bytes(CHUNK))
SUMS_SLACK = 1 << 20        # read this much of a sums file beyond what the manifest gives
MAX_SUMS_FINDINGS = 50      # lines of one sums file named one by one


@dataclass(frozen=True, **SLOTS)
class Finding:
    """One thing that does not match. ``code``: manifest-damaged, manifest-unreadable,
    part-missing, part-not-a-file, part-unreadable, part-truncated, part-corrupt,
    part-checksum, part-unlisted, file-checksum, member-missing, member-unexpected,
    member-metadata, sums-mismatch, sums-unreadable, source-changed, source-missing,
    source-extra; restore adds not-restored, and notes what it withheld on purpose
    (device-not-created, setid-dropped)."""

    code: str
    message: str
    path: str | None = None
    part: str | None = None

    def as_json(self) -> dict:
        return {"code": self.code, "message": self.message, "path": self.path,
                "part": self.part}


# what could not be read: the answer is "could not tell" (exit 3), unless something else
# was found to be wrong
UNREADABLE = frozenset({"manifest-unreadable", "part-unreadable", "sums-unreadable"})


def exit_code(findings) -> int:
    """0 nothing found, 1 a mismatch or damage, 3 only what could not be read."""
    if not findings:
        return EXIT_OK
    return EXIT_UNKNOWN if all(f.code in UNREADABLE for f in findings) else EXIT_IN_USE


@dataclass(frozen=True, **SLOTS)
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

    @property
    def exit_code(self) -> int:
        """As :func:`exit_code`; a source that could not be read (``--against``) with nothing
        else found is 3 too."""
        if not self.findings and any(w.blocks_verdict for w in self.warnings):
            return EXIT_UNKNOWN
        return exit_code(self.findings)


class ArchiveDamaged(VacateError):
    """The archive is not as vacate wrote it (restore refuses it: exit 2; verify reports it:
    exit 1). ``finding`` names the damage."""

    exit_code = EXIT_ERROR

    def __init__(self, finding: Finding, hint: str | None = None):
        super().__init__(finding.message, hint=hint)
        self.finding = finding


class ArchiveUnreadable(ArchiveDamaged):
    """A file of the archive could not be read (exit 3: could not tell)."""

    exit_code = EXIT_UNKNOWN


def load_manifest(target: Target) -> mf.Manifest:
    """The archive's manifest, read within a bound and checked; raises NotFound where there
    is none, ArchiveDamaged / ArchiveUnreadable where it cannot be used."""
    where = f"{target.location}/{mf.MANIFEST}"
    try:
        raw, more = read_named(target, mf.MANIFEST, mf.MAX_MANIFEST)
    except (FileNotFoundError, KeyError):
        if target.list(mf.STATE_DIR):
            raise UsageError(f"{target.location} holds an unfinished archive",
                             hint="run the same `vacate archive` again to finish it") from None
        raise NotFound(f"{target.location}: no vacate archive here (no {mf.MANIFEST})") \
            from None
    except fsio.NotRegular as e:
        raise ArchiveDamaged(Finding("manifest-damaged", f"{where} is a {e.what}, not a "
                                     "regular file; not read")) from None
    except OSError as e:
        raise ArchiveUnreadable(Finding("manifest-unreadable", f"{where}: could not read it "
                                        f"({e.strerror or e})")) from None
    if more:
        raise ArchiveDamaged(Finding("manifest-damaged", f"{where} is larger than vacate "
                                     f"reads a manifest ({mf.MAX_MANIFEST:,} bytes); not "
                                     "read"))
    try:
        return mf.loads(raw)
    except ValueError as e:
        raise ArchiveDamaged(Finding("manifest-damaged", f"{where} is damaged: {e}")) \
            from None


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


def _member_path(m: Member) -> str:
    """A member's path for a finding: as it is, or cut (and marked) where it is longer than
    any path (it comes from the tar stream)."""
    return _dec(m.path) if len(m.path) <= mf.MAX_PATH else shown(m.path, mf.MAX_PATH)


def check_member(m: Member, e: mf.Entry | None, part: str) -> list[Finding]:
    p = _member_path(m)
    if e is None:
        return [Finding("member-unexpected", f"{part} holds {shown(m.path)}, which the "
                        "manifest does not list for it", p, part)]
    bad = []
    if m.type != e.type:
        bad.append(f"type {m.type} != {e.type}")
    if e.type == "file" and m.size != e.size:
        bad.append(f"size {m.size} != {e.size}")
    if e.type in ("symlink", "hardlink") and m.linkpath != (e.link or b""):
        bad.append("link target differs")
    if (m.mode & 0o7777) != e.mode or m.mtime_ns != e.mtime_ns:
        bad.append("mode or mtime differs")
    return [Finding("member-metadata", f"{shown(m.path)}: {', '.join(bad)}", p, part)] \
        if bad else []


def content_checked(m: Member, e: mf.Entry | None) -> bool:
    """Whether the member's data is the file the manifest lists (the same type and size):
    only then is it hashed (or written) against the manifest's sha256, up to the manifest's
    size and no further."""
    return e is not None and m.type == e.type == "file" and m.size == e.size


def part_error(info_name: str, err: BaseException, target: Target) -> Finding:
    """The finding for a part that could not be read to its end."""
    if isinstance(err, PartError):
        code = "part-truncated" if err.code == "truncated" else "part-corrupt"
        return Finding(code, f"{info_name}: {err}", part=info_name)
    if isinstance(err, FileNotFoundError):
        return Finding("part-missing", f"{info_name} is missing from {target.location}",
                       part=info_name)
    if isinstance(err, fsio.NotRegular):
        return Finding("part-not-a-file", f"{info_name} is a {err.what}, not a regular file; "
                       "not read", part=info_name)
    return Finding("part-unreadable", f"{info_name}: could not read it "
                   f"({getattr(err, 'strerror', None) or err})", part=info_name)


def _check_part(target: Target, info: mf.PartInfo, expected: dict[bytes, mf.Entry],
                findings: list[Finding], tick) -> int:
    seen: dict[bytes, tuple[_Hasher | None, mf.Entry | None]] = {}

    def on_member(m: Member):
        e = expected.get(m.path)
        if m.path in seen:
            findings.append(Finding("member-unexpected", f"{info.name} holds "
                                    f"{shown(m.path)} a second time", _member_path(m),
                                    info.name))
            return None
        findings.extend(check_member(m, e, info.name))
        if content_checked(m, e):
            h = _Hasher(e.size, tick)
            seen[m.path] = (h, e)
            return h
        seen[m.path] = (None, None)
        return None

    files = 0
    lost = False
    try:
        with open_part(target, info.name, info.bytes) as f:
            sha, n = read_part(f, on_member, info.tar_bytes)
            longer = f.more()
        if n < info.bytes:
            findings.append(Finding("part-truncated", f"{info.name}: {n:,} bytes, the manifest "
                                    f"says {info.bytes:,}", part=info.name))
        elif longer:
            findings.append(Finding("part-checksum", f"{info.name}: longer than the "
                                    f"{info.bytes:,} bytes the manifest says (read only so "
                                    "far)", part=info.name))
        elif sha != info.sha256:
            findings.append(Finding("part-checksum", f"{info.name}: sha256 {sha} does not match "
                                    f"the manifest's {info.sha256}", part=info.name))
    except (PartError, OSError) as err:
        found = part_error(info.name, err, target)
        if found.code in UNREADABLE:     # what it holds is not known to be lost, nor checked
            findings.append(replace(found, message=f"{found.message}; its {len(expected):,} "
                                    "entries were not checked"))
            return 0
        findings.append(found)
        lost = not isinstance(err, PartError)
    for path, (h, e) in seen.items():
        if h is None or e is None:
            continue
        files += 1
        if h.h.hexdigest() != e.sha256:
            findings.append(Finding("file-checksum", f"{shown(path)}: content does not match "
                                    f"its sha256 in the manifest ({info.name})", _dec(path),
                                    info.name))
    for path in expected:
        if path not in seen:
            findings.append(Finding("member-missing", f"{shown(path)} is lost with {info.name}"
                                    if lost else f"{shown(path)} is not readable from "
                                    f"{info.name}", _dec(path), info.name))
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
    compress.require()                   # no zstd at all: nothing could be read back
    try:
        m = load_manifest(target)
    except ArchiveDamaged as e:          # the damage is the answer (exit 1, or 3 unreadable)
        name = os.path.basename(target.location.rstrip("/"))
        return VerifyResult(target.location, name, 0, 0, 0, 0, (e.finding,), (),
                            time.monotonic() - t0)
    findings: list[Finding] = []
    problems: list[Problem] = []
    listed = target.list()
    check_sums(target, mf.PART_SUMS, {p.name.encode(): p.sha256 for p in m.parts},
               mf.part_sums_file(m.parts), "a part of this archive", findings)
    check_sums(target, mf.SUMS, {e.path: e.sha256 for e in m.entries
                                 if e.type in ("file", "hardlink") and e.sha256},
               mf.sums_file(m.entries), "a file of this archive", findings)
    names = {p.name for p in m.parts}
    for n in listed:
        if n.endswith(".tar.zst") and n not in names:
            findings.append(Finding("part-unlisted", f"{shown(n)} is not part of this archive",
                                    part=n))

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
        by_part[e.part][e.path] = e
    pool = ThreadPoolExecutor(1) if against else None
    fut = pool.submit(check_against, m, against, problems) if pool else None
    files = 0
    try:
        for info in m.parts:
            if info.name in listed and listed[info.name] < info.bytes:
                findings.append(Finding("part-truncated", f"{info.name}: "
                                        f"{listed[info.name]:,} bytes, the manifest says "
                                        f"{info.bytes:,}", part=info.name))
            files += _check_part(target, info, by_part[info.name], findings, tick)
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
        k = (f.code, f.path, f.part) if f.path else (f.code, f.part, f.message)
        if k not in keys:
            keys.add(k)
            uniq.append(f)
    return VerifyResult(target.location, m.name, len(m.parts), files, done[0], sources,
                        tuple(uniq), tuple(problems), time.monotonic() - t0)


def check_sums(target: Target, fname: str, expected: dict[bytes, str], want: bytes,
               what: str, findings: list[Finding]) -> None:
    """Every line of the sums file ``fname`` names one of ``expected`` (name -> sha256), once,
    with its sha256, and every one of them is listed: a line naming anything else (stock
    ``sha256sum -c`` would read it, wherever it points) is damage."""
    try:
        data, more = read_named(target, fname, len(want) + SUMS_SLACK)
    except (FileNotFoundError, KeyError):
        findings.append(Finding("sums-mismatch", f"{fname} is missing"))
        return
    except fsio.NotRegular as e:
        findings.append(Finding("sums-mismatch", f"{fname} is a {e.what}, not a regular "
                                "file; not read"))
        return
    except OSError as e:
        findings.append(Finding("sums-unreadable", f"{fname}: could not read it "
                                f"({e.strerror or e})"))
        return
    if data == want:
        return
    bad: list[str] = []
    seen: set[bytes] = set()
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    elif not more:
        bad.append(f"{fname} does not end with a newline")
    for n, raw in enumerate(lines, 1):
        if more and n == len(lines):
            break                         # cut by the bound: said below
        try:
            digest, name = sums.parse_line(raw)
        except ValueError:
            bad.append(f"{fname} line {n} is not a sha256sum line: {shown(raw, 80)}")
            continue
        if name not in expected:
            bad.append(f"{fname} line {n} names {shown(name)}, which is not {what}")
        elif name in seen:
            bad.append(f"{fname} line {n} names {shown(name)} a second time")
        elif digest != expected[name]:
            bad.append(f"{fname} disagrees with the manifest about {shown(name)}")
        seen.add(name)
    missing = [x for x in expected if x not in seen]
    for name in missing[:MAX_SUMS_FINDINGS]:
        bad.append(f"{fname} does not list {shown(name)}")
    if len(missing) > MAX_SUMS_FINDINGS:
        bad.append(f"{fname} leaves out {len(missing) - MAX_SUMS_FINDINGS:,} more")
    if more:
        bad.append(f"{fname} is longer than the manifest accounts for (read "
                   f"{len(data):,} bytes of it)")
    for msg in bad[:MAX_SUMS_FINDINGS]:
        findings.append(Finding("sums-mismatch", msg))
    if len(bad) > MAX_SUMS_FINDINGS:
        findings.append(Finding("sums-mismatch", f"{fname}: {len(bad) - MAX_SUMS_FINDINGS:,} "
                                "more problems"))
