"""``verify()``: read everything back from the target and check it.

Every part's sha256 (against ``PARTS.SHA256SUMS`` and the manifest), every member's sha256,
type, size and link against the manifest, ``SHA256SUMS`` against the manifest, and with
``against`` the source tree against the archive (content re-hashed, metadata compared), in a
second thread while the parts are read. Each problem is a named finding.

Nothing is held per entry: the manifest is streamed into a catalog
(:mod:`vacate.archive.catalog`), each part's members are matched with its entries in the
manifest's order as they come (:class:`Expected`), the sums files are streamed against what
the catalog says they hold, and the source walk marks what it met in a file beside it.
"""

from __future__ import annotations

import hashlib
import os
import stat as S
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from vacate.archive import catalog, compress
from vacate.archive import manifest as mf
from vacate.archive.catalog import Catalog
from vacate.archive.findings import UNREADABLE, Finding, exit_code
from vacate.archive.manifest import shown
from vacate.archive.reader import PartError, open_part, read_part
from vacate.archive.source import arc_roots, walk
from vacate.archive.sums_check import FileSums, PartSums, check_sums
from vacate.archive.tarfmt import Member
from vacate.archive.target import Target
from vacate.observing import fsio
from vacate.observing.compat import SLOTS
from vacate.observing.errors import (
    EXIT_ERROR,
    EXIT_UNKNOWN,
    NotFound,
    UsageError,
    VacateError,
)
from vacate.observing.model.common import Problem

CHUNK = 1 << 20
_ZEROS = memoryview(bytes(CHUNK))


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


def load_manifest(target: Target) -> Catalog:
    """The archive's manifest, streamed within a bound into a checked :class:`Catalog` (the
    caller closes it); raises NotFound where there is none, ArchiveDamaged /
    ArchiveUnreadable where it cannot be used."""
    where = f"{target.location}/{mf.MANIFEST}"
    larger = Finding("manifest-damaged", f"{where} is larger than vacate reads a manifest "
                     f"({mf.MAX_MANIFEST:,} bytes); not read")
    try:
        with open_part(target, mf.MANIFEST, mf.MAX_MANIFEST) as f:
            if f.size is not None and f.size > mf.MAX_MANIFEST:
                raise ArchiveDamaged(larger)
            cat = catalog.build(f)
            if f.more():
                cat.close()
                raise ArchiveDamaged(larger)
            return cat
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
    except ValueError as e:
        raise ArchiveDamaged(Finding("manifest-damaged", f"{where} is damaged: {e}")) \
            from None


def manifest_sha256(target: Target) -> str:
    """The sha256 of the archive's ``MANIFEST.jsonl``, streamed (never held whole)."""
    h = hashlib.sha256()
    with open_part(target, mf.MANIFEST, mf.MAX_MANIFEST) as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                return h.hexdigest()
            h.update(b)


class Expected:
    """The entries one part should hold, matched with its members as they come. The writer
    lists a part's entries in the order of its members, so each member is the next entry:
    nothing is looked up or held. A member out of that order is looked up by name
    (``lookup(path)``: its line and entry, or None where the part should not hold it), and
    the entries passed over on the way are held until their member comes or the part ends:
    only a part out of the manifest's order (damage) makes this hold more than one entry.
    ``ordered``: ``(line, member path, entry)`` in the manifest's order."""

    def __init__(self, ordered, lookup):
        self.it = iter(ordered)
        self.lookup = lookup
        self.head = next(self.it, None)
        self.skipped: dict[bytes, mf.Entry] = {}
        self.odd: set[bytes] = set()        # members the part should not hold, met

    def match(self, path: bytes) -> tuple[str, mf.Entry | None]:
        """``("ok", entry)``, ``("again", None)`` for a second member of one name, or
        ``("unexpected", None)``."""
        h = self.head
        if h is not None and h[1] == path:
            self.head = next(self.it, None)
            return "ok", h[2]
        e = self.skipped.pop(path, None)
        if e is not None:
            return "ok", e
        found = self.lookup(path)
        if found is None:
            if path in self.odd:
                return "again", None
            self.odd.add(path)
            return "unexpected", None
        line, e = found
        if h is None or line < h[0]:
            return "again", None                # matched before (it is not skipped)
        while h is not None and h[0] < line:
            self.skipped[h[1]] = h[2]
            h = next(self.it, None)
        self.head = next(self.it, None)         # past the one found
        return "ok", e

    def missing(self):
        """The entries no member matched (once the part is read)."""
        yield from self.skipped.values()
        if self.head is not None:
            yield self.head[2]
            for x in self.it:
                yield x[2]


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


class _Checked(_Hasher):
    """A member's content hashed and, once complete, checked against its entry's sha256."""

    __slots__ = ("e", "findings", "part")

    def __init__(self, e: mf.Entry, tick, findings: list[Finding], part: str):
        super().__init__(e.size, tick)
        self.e, self.findings, self.part = e, findings, part

    def done(self) -> None:
        super().done()
        self.check()

    def check(self) -> None:
        if self.h.hexdigest() != self.e.sha256:
            self.findings.append(Finding("file-checksum", f"{shown(self.e.path)}: content does "
                                         f"not match its sha256 in the manifest ({self.part})",
                                         _dec(self.e.path), self.part))


def in_part(cat: Catalog, part: str):
    """``lookup`` for :class:`Expected`: an entry of ``part`` by its path."""
    def lookup(path: bytes):
        found = cat.line_of(path)
        return found if found is not None and found[1].part == part else None
    return lookup


def _check_part(target: Target, info: mf.PartInfo, cat: Catalog, findings: list[Finding],
                tick) -> int:
    exp = Expected(((n, e.path, e) for n, e in cat.numbered(info.name)),
                   in_part(cat, info.name))
    files = [0]
    current: list[_Checked] = []        # the member being read

    def on_member(m: Member):
        how, e = exp.match(m.path)
        if how == "again":
            findings.append(Finding("member-unexpected", f"{info.name} holds "
                                    f"{shown(m.path)} a second time", _member_path(m),
                                    info.name))
            return None
        findings.extend(check_member(m, e, info.name))
        current.clear()
        if content_checked(m, e):
            files[0] += 1
            h = _Checked(e, tick, findings, info.name)
            current.append(h)
            return h
        return None

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
            findings.append(replace(found, message=f"{found.message}; its "
                                    f"{cat.part_count(info.name):,} entries were not checked"))
            return 0
        findings.append(found)
        lost = not isinstance(err, PartError)
        if current and current[0].pos < current[0].size:
            current[0].check()           # the part ended inside it
    for e in exp.missing():
        findings.append(Finding("member-missing", f"{shown(e.path)} is lost with {info.name}"
                                if lost else f"{shown(e.path)} is not readable from "
                                f"{info.name}", _dec(e.path), info.name))
    return files[0]


def _file_sha(path: bytes) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                return h.hexdigest()
            h.update(b)


def check_against(cat: Catalog, against: list[str], problems: list[Problem]) -> tuple[
        list[Finding], int]:
    """Compare source trees with the manifest (whose content the part pass proves); runs in
    a thread of its own, on its own connection to the catalog."""
    with cat.reader() as m:
        return _against(m, against, problems)


def _against(m: Catalog, against: list[str], problems: list[Problem]) -> tuple[
        list[Finding], int]:
    try:
        roots = arc_roots(against)
    except ValueError as e:
        raise UsageError(str(e)) from None
    tops = m.tops()
    for _, base in roots:
        if base not in tops:
            raise UsageError(f"--against {os.fsdecode(base)!r}: the archive holds no top-level "
                             f"{os.fsdecode(base)!r}",
                             hint="top-level names: " + ", ".join(sorted(map(_dec, tops))))
    bases = {b for _, b in roots}
    out: list[Finding] = []
    seen = m.marks()
    try:
        n = _walk_against(m, roots, seen, problems, out)
        for path in seen.unmet():
            if path.split(b"/", 1)[0] in bases:
                p = _dec(path)
                out.append(Finding("source-missing", f"{p} is in the archive but not in the "
                                   "source", p))
    finally:
        seen.close()
    return out, n


def _walk_against(m: Catalog, roots, seen, problems: list[Problem], out: list[Finding]) -> int:
    n = 0
    for ab, base in roots:
        walked = walk(ab, base, problems, mf.excluded(m))
        for se, e in seen.meet(walked, lambda se: se.arcpath):
            n += 1
            p = _dec(se.abspath)
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
    return n


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
    with m:
        return _verify(target, m, against, progress, t0)


def _verify(target: Target, m: Catalog, against: list[str] | None, progress,
            t0: float) -> VerifyResult:
    findings: list[Finding] = []
    problems: list[Problem] = []
    listed = target.list()
    check_sums(target, mf.PART_SUMS, PartSums(m.parts), "a part of this archive", findings)
    check_sums(target, mf.SUMS, FileSums(m), "a file of this archive", findings)
    names = {p.name for p in m.parts}
    for n in listed:
        if n.endswith(".tar.zst") and n not in names:
            findings.append(Finding("part-unlisted", f"{shown(n)} is not part of this archive",
                                    part=n))

    total = m.file_bytes()
    done = [0]
    last = [0.0]

    def tick(n: int) -> None:
        done[0] += n
        if progress is not None:
            now = time.monotonic()
            if now - last[0] > 0.2:
                last[0] = now
                progress(done[0], total)

    pool = ThreadPoolExecutor(1) if against else None
    fut = pool.submit(check_against, m, against, problems) if pool else None
    files = 0
    try:
        for info in m.parts:
            if info.name in listed and listed[info.name] < info.bytes:
                findings.append(Finding("part-truncated", f"{info.name}: "
                                        f"{listed[info.name]:,} bytes, the manifest says "
                                        f"{info.bytes:,}", part=info.name))
            files += _check_part(target, info, m, findings, tick)
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
