"""``verify_native()``: a native archive read back from its directory and proven.

Every part is read once: hashed against ``SHA256SUMS`` and the manifest while it is fed to
``zstd -dc``. With a scratch pool (``verify_pool``) the stream goes on into ``zfs receive
POOL/vacate-verify-RANDOM``; the received snapshot is compared with what was archived (its
guid, its referenced bytes; the source snapshot, where it is still there, must have that
guid); its tree with the source snapshot's (every name, type, size, mode, owner, mtime, link
and inode): the tree recorded when it was archived (``ZFS-TREE.jsonl``, its sha256 and digest
in the manifest), or, where none was recorded, the source snapshot's tree walked now (from
``.zfs/snapshot`` or a clone) while the stream is received; and its data with the source's
(:mod:`vacate.archive.zfs_content`): a full ``zfs send`` of the received snapshot digested
against one of the source snapshot, sent while the archive is received, or, where the
source is gone, against the archive's own stream as it is received. No file is read through
the filesystem. Then the scratch (and any clone) is destroyed, whatever happened. Without a
pool the
stream is walked record by record to its END (:mod:`vacate.archive.zfs_stream`): the weaker
check, said so in the result (``strength``: ``parsed``), which never proves the archive
receivable and so never allows freeing the dataset.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass

from vacate.archive import sums, zfs_content, zfs_tool, zfs_tree
from vacate.archive import zfs_names as zn
from vacate.archive.findings import Finding, exit_code
from vacate.archive.manifest import MANIFEST as TAR_MANIFEST
from vacate.archive.target import LocalTarget
from vacate.archive.tree_compare import (
    Compared,
    Recorder,
    compare_recorded,
    compare_with,
    digest,
    paths_of,
)
from vacate.archive.zfs_stream import StreamError, Walker
from vacate.archive.zfs_tree import SKIP_TOP
from vacate.observing.compat import SLOTS
from vacate.observing.errors import EXIT_UNKNOWN, NotFound, UsageError

CHUNK = 1 << 20
MAX_SUMS = 1 << 24
STALL_S = 600.0          # the longest a receive may take no bytes (or digest the last ones)
RECEIVED, PARSED = "received", "parsed"
RECORDED, SOURCE, ARCHIVED = "recorded", "source", "archived"


@dataclass(frozen=True, **SLOTS)
class ContentCompared:
    """The received snapshot's data, its stream digested, and what it was compared with:
    SOURCE (the source snapshot's stream), ARCHIVED (the archive's own stream, the source
    being gone) or "" (digested only)."""

    digest: str
    objects: int
    bytes: int
    against: str


@dataclass(frozen=True, **SLOTS)
class NativeVerifyResult:
    """What verify found of a native archive: how strongly it was checked, what was read."""

    location: str
    origin: str
    strength: str                  # received (proven receivable) | parsed (the weaker check)
    parts_checked: int
    bytes_checked: int             # compressed bytes read
    stream_bytes: int
    compared: Compared | None      # the received tree against the source's
    findings: tuple[Finding, ...]
    notes: tuple[str, ...]
    elapsed_s: float
    # what the received tree was compared with: RECORDED (the tree recorded when it was
    # archived), SOURCE (the source snapshot's, read now) or "" (not compared)
    against: str = ""
    content: ContentCompared | None = None     # the received data against the source's

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def allows_freeing(self) -> bool:
        """Only an archive received and compared equal proves the dataset can go."""
        return self.ok and self.strength == RECEIVED

    @property
    def exit_code(self) -> int:
        return exit_code(self.findings)


def is_native(target) -> bool:
    """A native archive's directory, finished or not (its parts there, no tar manifest)."""
    if not isinstance(target, LocalTarget):
        return False
    here = target.list()
    return zn.MANIFEST in here or (
        TAR_MANIFEST not in here and any(".zfs.zst." in n for n in here))


def load(target: LocalTarget) -> zn.NativeManifest:
    """The manifest, checked; raises NotFound (none: not a native archive, or an unfinished
    one) or UsageError (damaged or not vacate's, exit 2)."""
    if zn.MANIFEST not in target.list():
        if any(".zfs.zst." in n for n in target.list()):
            raise NotFound(f"{target.location} is an unfinished native archive (no "
                           f"{zn.MANIFEST})", hint="run the same vacate archive again")
        raise NotFound(f"no {zn.MANIFEST} in {target.location}")
    if target.list()[zn.MANIFEST] > zn.MAX_MANIFEST:
        raise UsageError(f"{target.location}/{zn.MANIFEST} is larger than vacate writes a "
                         f"manifest ({zn.MAX_MANIFEST:,} bytes): not read")
    try:
        return zn.loads(target.get(zn.MANIFEST))
    except zn.Damaged as e:
        raise UsageError(f"{target.location}/{zn.MANIFEST} cannot be used: {e}") from None
    except OSError as e:
        raise UsageError(f"{target.location}/{zn.MANIFEST} cannot be read: {e.strerror}",
                         exit_code=EXIT_UNKNOWN) from None


def check_listing(target: LocalTarget, m: zn.NativeManifest) -> list[Finding]:
    """SHA256SUMS against the manifest, and the directory's parts against both."""
    out = []
    here = target.list()
    for p in m.parts:
        if p.name not in here:
            out.append(Finding("part-missing", f"{p.name} is missing", part=p.name))
        elif here[p.name] != p.bytes:
            out.append(Finding("part-truncated", f"{p.name} is {here[p.name]:,} bytes, "
                               f"not {p.bytes:,}", part=p.name))
    listed = {p.name for p in m.parts}
    for n in sorted(here):
        if zn.is_part(n, m.name) and n not in listed:
            out.append(Finding("part-unlisted", f"{n} is not in the manifest", part=n))
    if zn.SUMS not in here or here[zn.SUMS] > MAX_SUMS:
        return [*out, Finding("sums-mismatch", f"{zn.SUMS} is missing, not a plain file, or "
                              "larger than vacate writes it")]
    try:
        lines = sums.parse(target.get(zn.SUMS))
    except OSError as e:
        return [*out, Finding("sums-unreadable", f"{zn.SUMS}: {e.strerror or e}")]
    except ValueError as e:
        return [*out, Finding("sums-mismatch", f"{zn.SUMS}: {e}")]
    want = {p.name.encode(): p.sha256 for p in m.parts}
    if {n: d for d, n in lines} != want:
        out.append(Finding("sums-mismatch", f"{zn.SUMS} does not list the manifest's parts "
                           "with their sha256"))
    return out


class _Feeder(threading.Thread):
    """Reads the parts in order, hashing each, into ``dst`` (zstd's stdin)."""

    def __init__(self, target: LocalTarget, m: zn.NativeManifest, dst: int, progress):
        super().__init__(daemon=True)
        self.target, self.m, self.dst, self.progress = target, m, dst, progress
        self.findings: list[Finding] = []
        self.parts = 0
        self.bytes = 0

    def run(self) -> None:
        try:
            for p in self.m.parts:
                h = hashlib.sha256()
                try:
                    with self.target.open(p.name) as f:
                        while data := f.read(CHUNK):
                            h.update(data)
                            self._write(data)
                            self.bytes += len(data)
                            self.progress(self.bytes, self.m.archive_bytes)
                except BrokenPipeError:
                    return                       # the reader stopped: it says why
                except OSError as e:
                    self.findings.append(Finding("part-unreadable", f"{p.name}: "
                                                 f"{e.strerror or e}", part=p.name))
                    return
                self.parts += 1
                if h.hexdigest() != p.sha256:
                    self.findings.append(Finding("part-checksum", f"{p.name}: sha256 is not "
                                                 "the one archived", part=p.name))
        finally:
            os.close(self.dst)

    def _write(self, data: bytes) -> None:
        mv = memoryview(data)
        while mv:
            mv = mv[os.write(self.dst, mv):]


def no_progress(done: int, total: int) -> None:
    pass


def verify_native(target: LocalTarget, *, verify_pool: str | None = None,
                  progress=no_progress) -> NativeVerifyResult:
    t0 = time.monotonic()
    m = load(target)
    findings = check_listing(target, m)
    if any(f.code in ("part-missing", "part-truncated") for f in findings):
        return NativeVerifyResult(target.location, m.origin, PARSED if verify_pool is None
                                  else RECEIVED, 0, 0, 0, None, tuple(findings), (),
                                  time.monotonic() - t0)
    if verify_pool is not None:
        _check_pool(verify_pool, m)
        return _received(target, m, verify_pool, findings, progress, t0)
    return _parsed(target, m, findings, progress, t0)


def _check_pool(pool: str, m: zn.NativeManifest) -> None:
    if why := zn.dataset_error(pool):
        raise UsageError(f"--verify-pool {pool!r}: {why}")
    if not zfs_tool.exists(pool):
        raise UsageError(f"--verify-pool {pool}: no such pool or dataset")
    if "mountpoint" in m.props_local and m.send_flags:
        raise UsageError(f"the stream carries {m.dataset}'s own mountpoint (sent with "
                         f"{' '.join(m.send_flags)}): receiving it would mount over the "
                         "source", hint="verify without --verify-pool (the weaker check), "
                         "or on a host where that path is free")


def decompress(target: LocalTarget, m: zn.NativeManifest, progress):
    """``zstd -dc`` fed the parts by a :class:`_Feeder` (started); the caller reads its
    stdout."""
    r, w = os.pipe()
    zstd = subprocess.Popen(["zstd", "-dc", "-q"], stdin=r, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    os.close(r)
    feeder = _Feeder(target, m, w, progress)
    feeder.start()
    return zstd, feeder


def _parsed(target, m, findings, progress, t0) -> NativeVerifyResult:
    zstd, feeder = decompress(target, m, progress)
    walker = Walker()
    n = 0
    damaged = None
    try:
        while data := zstd.stdout.read(CHUNK):
            n += len(data)
            if damaged is None:
                try:
                    walker.feed(data)
                except StreamError as e:
                    damaged = str(e)
        err = zstd.stderr.read().decode(errors="replace").strip()
    finally:
        zstd.stdout.close()
        zstd.wait()
        feeder.join()
    findings += feeder.findings
    if zstd.returncode != 0:
        findings.append(Finding("stream-damaged", f"the parts do not decompress: {err}"))
    elif damaged is None:
        try:
            w = walker.end()
            if m.guid not in w.toguids:
                findings.append(Finding("stream-damaged", f"the stream holds no snapshot "
                                        f"with guid {m.guid} ({m.origin})"))
            if n != m.stream_bytes:
                findings.append(Finding("stream-damaged", f"the stream is {n:,} bytes, not "
                                        f"the {m.stream_bytes:,} sent"))
        except StreamError as e:
            damaged = str(e)
    if damaged:
        findings.append(Finding("stream-damaged", f"the stream: {damaged}"))
    notes = ("the weaker check: the stream was parsed record by record to its END, not "
             "received (give --verify-pool POOL to prove it receivable)"),
    return NativeVerifyResult(target.location, m.origin, PARSED, feeder.parts, feeder.bytes,
                              n, None, tuple(_unique(findings)), notes,
                              time.monotonic() - t0)


def _unique(findings):
    seen = set()
    for f in findings:
        if (f.code, f.message) not in seen:
            seen.add((f.code, f.message))
            yield f


def _wait(recv: subprocess.Popen, feeder: _Feeder, stall_s: float) -> bool:
    """Wait for the receive to end; True where it took nothing for ``stall_s``."""
    last, since = -1, time.monotonic()
    while True:
        try:
            recv.wait(timeout=min(5.0, stall_s))
            return False
        except subprocess.TimeoutExpired:
            if feeder.bytes != last:
                last, since = feeder.bytes, time.monotonic()
            elif time.monotonic() - since > stall_s:
                return True


def receive(target: LocalTarget, m: zn.NativeManifest, into: str, progress, code: str,
            stall_s: float = STALL_S, digester: zfs_content.Digester | None = None
            ) -> tuple[_Feeder, list[Finding]]:
    """The parts (each checked as it is read) through ``zstd -dc`` into ``zfs receive
    INTO`` (through ``digester`` on the way, where one is given); returns the feeder (the
    parts and bytes read) and what went wrong, each a finding of ``code``."""
    zstd, feeder = decompress(target, m, progress)
    tee = None
    with tempfile.TemporaryFile() as err:
        if digester is None:
            recv = subprocess.Popen(zfs_tool.receive_argv(into), stdin=zstd.stdout,
                                    stdout=subprocess.DEVNULL, stderr=err)
            zstd.stdout.close()
        else:
            r, w = os.pipe()
            recv = subprocess.Popen(zfs_tool.receive_argv(into), stdin=r,
                                    stdout=subprocess.DEVNULL, stderr=err)
            os.close(r)
            tee = _Tee(zstd.stdout.fileno(), w, digester)
            tee.start()
        stalled = _wait(recv, feeder, stall_s)
        if stalled:
            for p in (recv, zstd):
                p.kill()
        if tee is not None:
            tee.join()
        zstd.stdout.close()
        zstd.wait()
        feeder.join()
        if stalled:
            raise zfs_tool.ZfsError(f"`zfs receive {into}` took nothing for {stall_s:g} s: "
                                    "stopped (the pool does not answer?)")
        err.seek(0)
        why = err.read().decode(errors="replace").strip()
    findings = list(feeder.findings)
    zerr = zstd.stderr.read().decode(errors="replace").strip()
    zstd.stderr.close()
    if recv.returncode != 0:
        findings.append(Finding(code, f"zfs receive {into} refused the stream: {why}"
                                + (f" (zstd: {zerr})" if zerr else "")))
    elif zstd.returncode != 0:
        findings.append(Finding(code, f"the parts do not decompress: {zerr}"))
    elif tee is not None and tee.error:
        findings.append(Finding(code, f"the stream: {tee.error}"))
    return feeder, findings


class _Tee(threading.Thread):
    """Moves the decompressed stream on to ``zfs receive``, digesting it as it passes."""

    def __init__(self, src: int, dst: int, digester: zfs_content.Digester):
        super().__init__(daemon=True, name="stream-tee")
        self.src, self.dst, self.digester = src, dst, digester
        self.error = ""

    def run(self) -> None:
        buf = bytearray(CHUNK)
        mv = memoryview(buf)
        try:
            while n := os.readv(self.src, [buf]):
                if not self.error:
                    try:
                        self.digester.feed(mv[:n])
                    except StreamError as e:
                        self.error = str(e)
                v = mv[:n]
                while v:
                    v = v[os.write(self.dst, v):]
        except OSError:         # the receive stopped taking it: it says why
            pass
        finally:
            os.close(self.dst)


def _received(target, m, pool, findings, progress, t0) -> NativeVerifyResult:
    """Receive into a scratch dataset, then walk the received tree against the one recorded
    at archive time (or, where the manifest records none, against the source snapshot's
    tree, walked into a temp file while the stream is received), and digest the received
    snapshot's stream against the source snapshot's (sent while the archive is received)
    or, where the source is gone, against the archive's stream as it was received."""
    scratch = f"{pool}/vacate-verify-{uuid.uuid4().hex[:10]}"
    clone = recorder = feeder = compared = content = None
    source = archived = received = None
    notes: list[str] = []
    there = False
    try:
        try:
            there = _source_there(m)
        except _NotTheSource as e:
            findings.append(Finding("received-mismatch", str(e)))
            there = False
        if m.tree is None and there and not findings:
            src, clone = zfs_tree.source_tree(
                m.dataset, m.snapshot,
                f"{m.dataset.split('/', 1)[0]}/vacate-verify-src-{scratch.rsplit('-', 1)[1]}")
            recorder = Recorder(src, SKIP_TOP)
            recorder.start()
        elif m.tree is None and not findings:
            notes.append(f"{m.origin} is gone: the received tree is digested, not compared "
                         "with it (guid and referenced bytes were)")
        if there and not findings:
            source = zfs_content.SnapshotDigest(m.origin)
            source.start()
        elif not findings and "-R" not in m.send_flags:
            archived = zfs_content.Digester()
        if not findings:
            feeder, got = receive(target, m, scratch, progress, "stream-damaged",
                                  digester=archived)
            findings += got
        if not findings and zfs_tool.exists(f"{scratch}@{m.snapshot}"):
            received = zfs_content.SnapshotDigest(f"{scratch}@{m.snapshot}")
            received.start()                # beside the walk of the received tree
        if not findings:
            compared = _compare(target, m, scratch, recorder, findings, notes)
        if not findings and received is not None:
            content = _content(m, scratch, received, source, archived, findings, notes)
    finally:
        for d in (received, source, archived):
            if d is not None:
                d.close()
        if recorder is not None:
            recorder.close()
        if feeder is not None:
            feeder.join()
        for name in (clone, scratch):
            try:
                if name and zfs_tool.exists(name):
                    zfs_tool.destroy_r(name)
            except zfs_tool.ZfsError as e:      # said, not raised: the result stands
                notes.append(f"{e.message}: destroy it by hand (zfs destroy -r {name})")
        if there:           # what the archive left where zfs-fuse kept its clone busy then
            notes += zfs_tree.drop_left(m.origin, m.guid, zfs_tool.DESTROY_PATIENCE_S)
    return NativeVerifyResult(target.location, m.origin, RECEIVED,
                              feeder.parts if feeder else 0, feeder.bytes if feeder else 0,
                              m.stream_bytes, compared, tuple(_unique(findings)), tuple(notes),
                              time.monotonic() - t0,
                              "" if compared is None or (m.tree is None and recorder is None)
                              else RECORDED if m.tree is not None else SOURCE, content)


def _compare(target: LocalTarget, m: zn.NativeManifest, scratch: str,
             recorder: Recorder | None, findings: list[Finding], notes: list[str]
             ) -> Compared | None:
    got = f"{scratch}@{m.snapshot}"
    if not zfs_tool.exists(got):
        findings.append(Finding("received-mismatch", f"no snapshot {got} after the receive"))
        return None
    p = zfs_tool.props(got, "guid", "referenced")
    if int(p["guid"]) != m.guid:
        findings.append(Finding("received-mismatch", f"received snapshot guid {p['guid']}, "
                                f"archived {m.guid}"))
    layout = tuple(sorted(zfs_tool.props(scratch, *zn.LAYOUT).items()))
    if layout != m.layout:
        notes.append(f"referenced bytes not compared ({p['referenced']} received, "
                     f"{m.referenced} archived): the scratch pool writes blocks otherwise "
                     f"({_props(layout)}; the source: {_props(m.layout)}); the tree and "
                     "the data are")
    elif int(p["referenced"]) != m.referenced:
        findings.append(Finding("received-mismatch", f"received {p['referenced']} bytes "
                                f"referenced, the source snapshot {m.referenced}"))
    received = zfs_tree.mounted(scratch)
    if m.tree is not None:
        c = _against_recorded(target, m.tree, received, findings)
        if c is None:
            return None
    elif recorder is None:
        return digest(received, skip_top=SKIP_TOP)
    else:
        c = compare_recorded(recorder, received, skip_top=SKIP_TOP)
    for d in c.differences:
        findings.append(Finding("received-mismatch", d))
    if c.more:
        findings.append(Finding("received-mismatch", f"and {c.more} more differences"))
    return c


def _content(m: zn.NativeManifest, scratch: str, got: zfs_content.SnapshotDigest,
             source: zfs_content.SnapshotDigest | None, archived: zfs_content.Digester | None,
             findings: list[Finding], notes: list[str]) -> ContentCompared | None:
    """The received snapshot's stream digested (``got``, started), against the source's or
    the archive's."""
    mine = got.result(STALL_S)
    if mine is None:
        findings.append(Finding("received-mismatch", f"the received data could not be "
                                f"digested: {got.error}"))
        return None
    if source is not None:
        theirs, other, against = source.result(STALL_S), source.digester, SOURCE
        if theirs is None:
            findings.append(Finding("source-unreadable", f"the received data is not "
                                    f"compared with {m.origin}'s: {source.error}"))
            return None
    elif archived is not None:
        try:
            theirs, other, against = archived.content(), archived, ARCHIVED
        except StreamError as e:
            findings.append(Finding("stream-damaged", f"the stream: {e}"))
            return None
    else:
        notes.append(f"{m.origin} is gone and the archive holds more than its stream "
                     f"({' '.join(m.send_flags)}): the received data is digested, not "
                     "compared")
        return ContentCompared(mine.digest, mine.objects, mine.bytes, "")
    if theirs.digest != mine.digest:
        objs, more = zfs_content.differing(other, got.digester)
        where = "the source snapshot" if against == SOURCE else "the archive's stream"
        names = paths_of(zfs_tree.mounted(scratch), objs, SKIP_TOP) if objs else {}
        for o in objs:
            findings.append(Finding("received-mismatch", f"{names.get(o, f'object {o}')}: "
                                    f"its data differ from {where}'s"))
        if more:
            findings.append(Finding("received-mismatch", f"and {more} more objects whose "
                                    "data differ"))
        if not objs:
            findings.append(Finding("received-mismatch", f"the received data's digest "
                                    f"{mine.digest} is not {where}'s ({theirs.digest})"))
    return ContentCompared(mine.digest, mine.objects, mine.bytes, against)


def _against_recorded(target: LocalTarget, tree: zn.Tree, received: str,
                      findings: list[Finding]) -> Compared | None:
    """The received tree walked against the archive's tree file (checked against the
    manifest first); its digest must be the one the manifest records."""
    try:
        c = compare_with(zfs_tree.recorded(target, tree), received, skip_top=SKIP_TOP)
    except zn.Damaged as e:
        findings.append(Finding("tree-damaged", f"the recorded tree cannot be used: {e}"))
        return None
    except OSError as e:
        findings.append(Finding("tree-damaged", f"{tree.name}: {e.strerror or e}"))
        return None
    if c.digest != tree.digest and not c.differences:
        findings.append(Finding("received-mismatch", f"the received tree's digest "
                                f"{c.digest} is not the one recorded when it was archived "
                                f"({tree.digest})"))
    return c


def _props(layout) -> str:
    return ", ".join(f"{k}={v}" for k, v in layout)


class _NotTheSource(Exception):
    pass


def _source_there(m: zn.NativeManifest) -> bool:
    """Whether the source snapshot is still there; raises _NotTheSource where a snapshot of
    that name is another one (not the guid archived)."""
    if not zfs_tool.exists(m.origin):
        return False
    if int(zfs_tool.props(m.origin, "guid")["guid"]) != m.guid:
        raise _NotTheSource(f"{m.origin} is not the snapshot archived (its guid is not "
                            f"{m.guid}): not compared, nothing cloned")
    return True
