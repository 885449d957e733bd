"""``restore()``: all of an archive or the parts of it matching patterns, checked as written.

Only the parts that hold a requested file (or the file a requested hardlink points at) are
read; directories come from the manifest. Paths that are absolute or climb out with ``..``
refuse the whole restore; symlinks whose target leaves DIR and hardlinks to paths outside the
selection are refused one by one. Nothing that exists is overwritten without ``force``. Each
file is written to a temp name, its sha256 compared with the manifest, then renamed; symlinks
and directory metadata are applied last.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from vacate.archive import manifest as mf
from vacate.archive.reader import PartError, read_part
from vacate.archive.target import Target
from vacate.archive.verify import Finding, _Hasher, check_member, load_manifest
from vacate.errors import UsageError


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """What `vacate restore` wrote, refused and found."""
    location: str
    dest: str
    restored: int
    bytes_written: int
    parts_read: tuple[str, ...]
    refused: tuple[Finding, ...]
    findings: tuple[Finding, ...]     # checksum mismatches and unreadable parts
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return not self.findings and not self.refused


def _unsafe(path: bytes) -> str | None:
    if path.startswith(b"/"):
        return "absolute path"
    parts = path.split(b"/")
    if b".." in parts:
        return "path traversal (..)"
    if any(p in (b"", b".") for p in parts) or b"\0" in path:
        return "malformed path"
    return None


def _link_escapes(path: bytes, target: bytes) -> bool:
    if target.startswith(b"/"):
        return True
    depth = len(path.split(b"/")) - 1
    for comp in target.split(b"/"):
        if comp == b"..":
            depth -= 1
            if depth < 0:
                return True
        elif comp not in (b"", b"."):
            depth += 1
    return False


def select(m: mf.Manifest, patterns: list[str]) -> list[mf.Entry]:
    if not patterns:
        return list(m.entries)
    pats = [os.fsencode(p.rstrip("/")) for p in patterns]
    out = []
    for e in m.entries:
        anc = e.path
        while True:
            if any(fnmatch.fnmatchcase(anc, p) for p in pats):
                out.append(e)
                break
            if b"/" not in anc:
                break
            anc = anc.rsplit(b"/", 1)[0]
    return out


class _FileSink:
    def __init__(self, fd: int):
        self.fd = fd
        self.n = 0

    def write(self, data) -> None:
        while data:
            k = os.write(self.fd, data)
            data = data[k:]
            self.n += k

    def hole(self, n: int) -> None:
        os.lseek(self.fd, n, os.SEEK_CUR)


def _safe_parent(dest: str, rel: bytes) -> bytes:
    """Create the parents of ``rel`` under ``dest``; refuse to go through a symlink."""
    base = os.fsencode(dest)
    cur = base
    for comp in rel.split(b"/")[:-1]:
        cur = cur + b"/" + comp
        try:
            os.lstat(cur)
        except FileNotFoundError:
            os.mkdir(cur, 0o700)
            continue
        if not os.path.isdir(cur) or os.path.islink(cur):
            raise UsageError(f"{os.fsdecode(cur)} is not a directory; refusing to write "
                             "through it")
    return cur


def _apply_meta(path: bytes, e: mf.Entry, is_root: bool, follow: bool = True) -> None:
    if is_root:
        try:
            os.chown(path, e.uid, e.gid, follow_symlinks=follow)
        except OSError:
            pass
    if follow:
        os.chmod(path, e.mode)
    os.utime(path, ns=(e.mtime_ns, e.mtime_ns), follow_symlinks=follow)


def restore(target: Target, dest: str, patterns: list[str] | None = None, *,
            force: bool = False,
            progress: Callable[[int, int], None] | None = None) -> RestoreResult:
    t0 = time.monotonic()
    m = load_manifest(target)
    chosen = select(m, patterns or [])
    if patterns and not chosen:
        raise UsageError("no entry matches " + ", ".join(patterns),
                         hint="patterns match archive paths such as "
                         + os.fsdecode(m.entries[0].path if m.entries else b"NAME/..."))
    bad = [(e, why) for e in chosen if (why := _unsafe(e.path))]
    if bad:
        raise UsageError("the archive holds unsafe paths: " + "; ".join(
            f"{os.fsdecode(e.path)!r} ({why})" for e, why in bad[:5]),
            hint="nothing was restored")
    refused: list[Finding] = []
    wanted: dict[bytes, mf.Entry] = {}
    by_path = {e.path: e for e in m.entries}
    for e in chosen:
        if e.type == "symlink" and _link_escapes(e.path, e.link or b""):
            p = os.fsdecode(e.path)
            refused.append(Finding("link-escapes", f"{p} -> {os.fsdecode(e.link)} points outside "
                                   f"{dest}; not restored", p, e.part))
            continue
        if e.type == "hardlink" and (e.link not in by_path or _unsafe(e.link)):
            p = os.fsdecode(e.path)
            refused.append(Finding("link-escapes", f"{p}: hardlink to a path outside the "
                                   "archive; not restored", p, e.part))
            continue
        wanted[e.path] = e
    # a hardlink whose first file is not selected: the first such link gets the content
    # (read from the first file's member), the others link to it
    alias: dict[bytes, bytes] = {}      # first file's path -> where its content goes
    for p, e in list(wanted.items()):
        if e.type == "hardlink" and e.link not in wanted:
            if e.link in alias:
                wanted[p] = replace(e, link=alias[e.link])
            else:
                alias[e.link] = p
                first = by_path[e.link]
                wanted[p] = replace(e, type="file", link=None, part=first.part)
    dest = os.path.abspath(dest)
    os.makedirs(dest, exist_ok=True)
    bdest = os.fsencode(dest)
    exists = [p for p, e in wanted.items() if e.type != "dir"
              and os.path.lexists(bdest + b"/" + p)]
    if exists and not force:
        raise UsageError(f"{len(exists)} path(s) already exist under {dest}, e.g. "
                         f"{os.fsdecode(exists[0])!r}",
                         hint="restore into an empty directory, or pass --force to overwrite")
    is_root = os.geteuid() == 0
    parts_needed = [p.name for p in m.parts if any(
        e.part == p.name and e.type == "file" for e in wanted.values())]
    total = sum(e.size for e in wanted.values() if e.type == "file")
    findings: list[Finding] = []
    written = [0]
    restored = 0
    last = [0.0]

    def tick(n: int) -> None:
        written[0] += n
        if progress is not None and time.monotonic() - last[0] > 0.2:
            last[0] = time.monotonic()
            progress(written[0], total)

    for e in sorted((e for e in wanted.values() if e.type == "dir"), key=lambda e: e.path):
        _safe_parent(dest, e.path + b"/x")
    alias_of = {v: k for k, v in alias.items()}   # destination -> member to read
    for pname in parts_needed:
        here = {alias_of.get(p, p): e for p, e in wanted.items()
                if e.part == pname and e.type == "file"}
        pending: dict[bytes, tuple] = {}

        def on_member(mem, here=here, pending=pending, pname=pname):
            e = here.get(mem.path)
            if e is None:
                return None
            findings.extend(check_member(mem, e, pname))
            final = _safe_parent(dest, e.path) + b"/" + e.path.rsplit(b"/", 1)[-1]
            tmp = final + b".vacate-tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            sink = _FileSink(fd)
            h = _Hasher(mem.size, tick, sink)
            pending[mem.path] = (fd, tmp, final, h, e)
            return _Closing(h, fd, mem.size)

        try:
            with target.open(pname) as f:
                read_part(f, on_member)
        except FileNotFoundError:
            findings.append(Finding("part-missing", f"{pname} is missing from "
                                    f"{target.location}", part=pname))
        except (PartError, OSError) as err:
            findings.append(Finding("part-corrupt", f"{pname}: {err}", part=pname))
        for path, (fd, tmp, final, h, e) in pending.items():
            try:
                os.close(fd)
            except OSError:
                pass
            if h.h.hexdigest() != e.sha256 or h.pos != e.size:
                os.unlink(tmp)
                p = os.fsdecode(path)
                findings.append(Finding("file-checksum", f"{p}: restored content does not match "
                                        "its sha256; not restored", p, pname))
                continue
            _apply_meta(tmp, e, is_root)
            if force and os.path.isdir(final) and not os.path.islink(final):
                raise UsageError(f"{os.fsdecode(final)} is a directory; not replacing it")
            os.replace(tmp, final)
            restored += 1
        for path in here:
            if path not in pending:
                p = os.fsdecode(path)
                findings.append(Finding("member-missing", f"{p} is not readable from {pname}",
                                        p, pname))
    # links, special files, then directory metadata (deepest first)
    for e in wanted.values():
        if e.type in ("file", "dir"):
            continue
        final = _safe_parent(dest, e.path) + b"/" + e.path.rsplit(b"/", 1)[-1]
        if os.path.lexists(final):
            os.unlink(final)
        try:
            if e.type == "hardlink":
                os.link(bdest + b"/" + e.link, final, follow_symlinks=False)
            elif e.type == "symlink":
                os.symlink(e.link, final)
                _apply_meta(final, e, is_root, follow=False)
            elif e.type == "fifo":
                os.mkfifo(final, e.mode)
                _apply_meta(final, e, is_root)
            elif e.type in ("char", "block"):
                import stat as S
                kind = S.S_IFCHR if e.type == "char" else S.S_IFBLK
                os.mknod(final, e.mode | kind, os.makedev(*e.rdev))
                _apply_meta(final, e, is_root)
            restored += 1
        except OSError as err:
            p = os.fsdecode(e.path)
            findings.append(Finding("not-restored", f"{p}: {err.strerror}", p, e.part))
    for e in sorted((e for e in wanted.values() if e.type == "dir"),
                    key=lambda e: e.path.count(b"/"), reverse=True):
        _apply_meta(bdest + b"/" + e.path, e, is_root)
        restored += 1
    if progress:
        progress(written[0], total)
    return RestoreResult(target.location, dest, restored, written[0], tuple(parts_needed),
                         tuple(refused), tuple(findings), time.monotonic() - t0)


class _Closing:
    """Consumer wrapper: on done, fix the size of a file that ends in a hole."""

    def __init__(self, h: _Hasher, fd: int, size: int):
        self.h, self.fd, self.size = h, fd, size

    def update(self, offset, data) -> None:
        self.h.update(offset, data)

    def done(self) -> None:
        self.h.done()
        os.ftruncate(self.fd, self.size)
