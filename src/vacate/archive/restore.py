"""``restore()``: all of an archive or the parts of it matching patterns, checked as written.

Only the parts that hold a requested file (or the file a requested hardlink points at) are
read; directories come from the manifest. A damaged manifest (unsafe or repeated paths, wrong
types, an entry inside a symlink, a hardlink to anything but a file of the archive, part names
that are not plain names) refuses the whole restore before anything is written, and so does
anything already under DIR that would be in the way: a symlink or a file where a directory
goes, a directory where a file goes, and (without ``force``) anything at all.

Everything is created through descriptors resolved beneath DIR without following a symlink
(:mod:`vacate.archive.beneath`), so what is on disk decides where a file lands, never what a
link in the archive says. Symlinks are data: they are restored verbatim (absolute targets and
ones pointing outside DIR too, as tar does), and last, after every file, hardlink and special
file, so nothing is written through one; directory metadata comes after them. A hardlink is
made only to a file this restore wrote. Each file is written to a temp name, its sha256
compared with the manifest, then renamed.

The manifest is read through a catalog (:mod:`vacate.archive.catalog`): each step (the
preflight, directories, each part's files, links, symlinks, directory metadata) is a pass
over it in the order it needs, and a part's members are matched with its entries as they
come (:class:`vacate.archive.verify.Expected`); what is held beyond that is one inode per
file a hardlink points at, and per hardlinked file outside the patterns, one path.

By default no device node is created and set-user-ID / set-group-ID bits are dropped, each
named in ``withheld``; ``preserve_special`` restores them. That is decided by the caller's
flag, never by anything written inside the archive.
"""

from __future__ import annotations

import errno
import fnmatch
import itertools
import os
import re
import stat as S
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from vacate.archive import compress
from vacate.archive import manifest as mf
from vacate.archive.beneath import Tree
from vacate.archive.catalog import Catalog
from vacate.archive.manifest import shown
from vacate.archive.reader import PartError, open_part, read_part
from vacate.archive.tarfmt import Member
from vacate.archive.target import Target
from vacate.archive.verify import (
    UNREADABLE,
    ArchiveDamaged,
    Expected,
    Finding,
    _Hasher,
    check_member,
    content_checked,
    exit_code,
    load_manifest,
    part_error,
)
from vacate.observing import fsio
from vacate.observing.compat import SLOTS
from vacate.observing.errors import UsageError

SETID = S.S_ISUID | S.S_ISGID
_TMP = itertools.count()


@dataclass(frozen=True, **SLOTS)
class RestoreResult:
    """What `vacate restore` wrote, left out and found. ``withheld``: what was not restored
    on purpose (device nodes, set-id bits without ``--preserve-special``); ``refused``:
    entries refused one by one (a hardlink whose file was not restored, a symlink or a
    non-directory found in the way); ``findings``: checksum mismatches, damaged or unreadable
    parts, entries that could not be made."""
    location: str
    dest: str
    restored: int
    bytes_written: int
    parts_read: tuple[str, ...]
    refused: tuple[Finding, ...]
    findings: tuple[Finding, ...]
    elapsed_s: float
    withheld: tuple[Finding, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.findings and not self.refused

    @property
    def exit_code(self) -> int:
        """0 all restored, 1 something not restored or not as archived, 3 only unreadable."""
        return exit_code(self.findings + self.refused)


class Wanted:
    """What a restore writes, streamed from the catalog in the order asked: the entries the
    patterns choose (or that lie in a directory one chooses; all without patterns), device
    nodes only with ``devices``. A hardlink whose file is not chosen gets that file's content
    (the first such link) or links to that first link. Holds the patterns' expressions and
    one path per hardlinked file not chosen whose link is (``alias``), nothing per entry."""

    def __init__(self, m: Catalog, patterns: list[str], devices: bool):
        self.m = m
        self.devices = devices
        # one regular expression per pattern, anchored at a ``/`` or the end, so each path is
        # looked at once however deep it is
        self.rx = [re.compile(fnmatch.translate(p.rstrip("/"))[:-2] + r"(?=/|\Z)",
                              re.DOTALL) for p in patterns]
        self.alias: dict[bytes, bytes] = {}     # first file's path -> where its content goes
        self.any = not patterns and m.count > 0
        if patterns:
            for e in m.entries():
                if self.chosen(e.path):
                    self.any = True
                    if e.type == "hardlink" and not self.chosen(e.link or b""):
                        self.alias.setdefault(e.link or b"", e.path)

    def chosen(self, path: bytes) -> bool:
        if not self.rx:
            return True
        p = os.fsdecode(path)
        return any(r.match(p) for r in self.rx)

    def _as_restored(self, e: mf.Entry) -> mf.Entry | None:
        if not self.chosen(e.path):
            return None
        if e.type == "hardlink" and e.link in self.alias:
            first = self.alias[e.link]
            if first == e.path:
                return replace(self.m.get(e.link), path=e.path)
            return replace(e, link=first)
        if e.type in ("char", "block") and not self.devices:
            return None
        return e

    def entries(self, types: tuple[str, ...] = ()):
        """The entries restored (of these types only, with ``types``), as restored, in the
        manifest's order. A hardlink restored with its file's content is a file."""
        if types and "file" in types and "hardlink" not in types and self.alias:
            types = (*types, "hardlink")
        for e in self.m.entries(types=types):
            r = self._as_restored(e)
            if r is not None and (not types or r.type in types):
                yield r

    def special(self):
        """The device nodes and set-id entries restored, as restored."""
        for e in self.m.special():
            r = self._as_restored(e)
            if r is not None:
                yield r

    def dirs(self, reverse: bool = False):
        """The directories restored, a directory before what it holds (``reverse``:
        after)."""
        for e in self.m.dirs(reverse):
            if self.chosen(e.path):
                yield e

    def file_bytes(self) -> int:
        """What the files restored hold."""
        if not self.rx:
            return self.m.file_bytes()
        return sum(e.size for e in self.entries(("file",)))

    def _of_member(self, line: int, e: mf.Entry):
        """The file a part's member (entry ``e`` on ``line``) is restored as, or None."""
        if e.type != "file":
            return None
        if self.chosen(e.path):
            return line, e
        if e.path in self.alias:
            return line, replace(e, path=self.alias[e.path])
        return None

    def in_part(self, part: str):
        """``(line, member path, file restored)`` of a part's members, in order."""
        for line, e in self.m.numbered(part):
            r = self._of_member(line, e)
            if r is not None:
                yield r[0], e.path, r[1]

    def lookup(self, part: str):
        """:class:`Expected`'s lookup of a member of ``part`` by its path."""
        def find(path: bytes):
            found = self.m.line_of(path)
            if found is None or found[1].part != part:
                return None
            return self._of_member(*found)
        return find


def _kind(path: bytes, e: mf.Entry) -> str:
    return {"char": "character device", "block": "block device", "dir": "directory",
            "fifo": "FIFO"}.get(e.type, e.type)


def restore(target: Target, dest: str, patterns: list[str] | None = None, *,
            force: bool = False, preserve_special: bool = False,
            progress: Callable[[int, int], None] | None = None) -> RestoreResult:
    t0 = time.monotonic()
    compress.require()              # no zstd at all: refused before anything is written
    try:
        m = load_manifest(target)
    except ArchiveDamaged as e:     # refused (exit 2; unreadable: 3) before anything is written
        e.hint = "nothing was restored; `vacate verify` names the damage"
        raise
    with m:
        wanted = Wanted(m, patterns or [], preserve_special)
        if patterns and not wanted.any:
            first = next(m.entries(), None)
            raise UsageError("no entry matches " + ", ".join(patterns),
                             hint="patterns match archive paths such as "
                             + shown(first.path if first else b"NAME/..."))
        withheld: list[Finding] = []
        if not preserve_special:
            withheld = _withheld(Wanted(m, patterns or [], True))
        dest = os.path.abspath(dest)
        os.makedirs(dest, exist_ok=True)
        with Tree(dest) as tree:
            _preflight(tree, dest, wanted.entries(), force)
            r = _Restore(tree, dest, force, preserve_special, progress)
            r.run(target, m, wanted)
    return RestoreResult(target.location, dest, r.restored, r.written, tuple(r.parts_read),
                         tuple(r.refused), tuple(r.findings), time.monotonic() - t0,
                         tuple(withheld))


def _withheld(wanted: Wanted) -> list[Finding]:
    """The device nodes left out; the set-id bits that will be dropped."""
    out = []
    for e in wanted.special():
        p = e.path
        if e.type in ("char", "block"):
            major, minor = e.rdev or (0, 0)
            out.append(Finding("device-not-created", f"{shown(p)}: {_kind(p, e)} "
                               f"{major}:{minor} not created (--preserve-special creates "
                               "device nodes)", os.fsdecode(p), e.part))
        elif e.mode & SETID and e.type in ("file", "dir", "fifo"):
            out.append(Finding("setid-dropped", f"{shown(p)}: restored with mode "
                               f"{e.mode & ~SETID:04o}, without the set-user-ID/set-group-ID "
                               f"bits of {e.mode:04o} (--preserve-special keeps them)",
                               os.fsdecode(p), e.part))
    return out


def _preflight(tree: Tree, dest: str, wanted, force: bool) -> None:
    """Refuse before anything is written when what is under DIR is in the way."""
    blocked: list[str] = []
    nblocked = 0
    exists: list[bytes] = []
    nexists = 0
    for e in wanted:
        p = e.path
        head, _, name = p.rpartition(b"/")
        try:
            fd = tree.dir(head)
        except FileNotFoundError:
            continue
        except OSError as err:
            why = {errno.ELOOP: "a symlink is on the way (nothing is restored through one)",
                   errno.ENOTDIR: "a file is on the way where a directory goes"}.get(
                       err.errno, err.strerror)
            nblocked += 1
            if len(blocked) < 3:
                blocked.append(f"{shown(head)}: {why}")
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        why = None
        if e.type == "dir":
            if not S.S_ISDIR(st.st_mode):
                why = f"{shown(p)} is a {fsio.file_kind(st.st_mode)} where the archive has a " \
                    "directory"
        elif S.S_ISDIR(st.st_mode):
            why = f"{shown(p)} is a directory; not replacing it"
        else:
            nexists += 1
            exists[:] = exists or [p]
        if why:
            nblocked += 1
            if len(blocked) < 3:
                blocked.append(why)
    if blocked:
        more = f" (and {nblocked - 3:,} more)" if nblocked > 3 else ""
        raise UsageError(f"in the way under {dest}: " + "; ".join(blocked) + more,
                         hint="nothing was restored; restore into an empty directory")
    if exists and not force:
        raise UsageError(f"{nexists} path(s) already exist under {dest}, e.g. "
                         f"{shown(exists[0])}",
                         hint="restore into an empty directory, or pass --force to overwrite")


class _Restore:
    """One restore's writing, in order: directories, files part by part, hardlinks and
    special files, symlinks, directory metadata."""

    def __init__(self, tree: Tree, dest: str, force: bool, preserve_special: bool,
                 progress):
        self.tree = tree
        self.dest = dest
        self.force = force
        self.keep_setid = preserve_special
        self.is_root = os.geteuid() == 0
        self.progress = progress
        self.findings: list[Finding] = []
        self.refused: list[Finding] = []
        self.parts_read: list[str] = []
        self.made: set[tuple[int, int]] = set()     # (dev, ino) of the files written that
                                                    # a hardlink points at
        self.unread: set[bytes] = set()             # files in parts that could not be read
        self.restored = 0
        self.written = 0
        self.total = 0
        self._last = 0.0

    def tick(self, n: int) -> None:
        self.written += n
        if self.progress is not None and time.monotonic() - self._last > 0.2:
            self._last = time.monotonic()
            self.progress(self.written, self.total)

    def mode(self, e: mf.Entry) -> int:
        return e.mode if self.keep_setid else e.mode & ~SETID

    def fail(self, e: mf.Entry, why: str, code: str = "not-restored") -> None:
        self.findings.append(Finding(code, f"{shown(e.path)}: {why}; not restored",
                                     os.fsdecode(e.path), e.part))

    def run(self, target: Target, m: Catalog, wanted: Wanted) -> None:
        """Each step a pass over the catalog: nothing is held per entry."""
        self.m = m
        self.total = wanted.file_bytes()
        for e in wanted.dirs():                     # a directory before what it holds
            self._mkdir(e)
        for info in m.parts:
            exp = Expected(wanted.in_part(info.name), wanted.lookup(info.name))
            if exp.head is not None:
                self.parts_read.append(info.name)
                self._part(target, info, exp)
        for e in wanted.entries(("hardlink", "fifo", "char", "block")):
            self._other(e)
        for e in wanted.entries(("symlink",)):
            self._symlink(e)
        for e in wanted.dirs(reverse=True):         # after what it holds
            self._dir_meta(e)
        if self.progress:
            self.progress(self.written, self.total)

    # -- directories ----------------------------------------------------------------------

    def _mkdir(self, e: mf.Entry) -> None:
        try:
            fd, name = self.tree.parent(e.path, create=True)
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
        except OSError as err:
            self.fail(e, err.strerror or str(err))

    def _dir_meta(self, e: mf.Entry) -> None:
        try:
            fd = self.tree.dir(e.path)
            if self.is_root:
                os.fchown(fd, e.uid, e.gid)
            os.fchmod(fd, self.mode(e))
            os.utime(fd, ns=(e.mtime_ns, e.mtime_ns))
        except OSError as err:
            self.fail(e, err.strerror or str(err))
            return
        self.restored += 1

    # -- files ----------------------------------------------------------------------------

    def _part(self, target: Target, info: mf.PartInfo, exp: Expected) -> None:
        current: list[_FileOut] = []

        def on_member(mem: Member):
            how, e = exp.match(mem.path)
            if how != "ok":
                return None
            found = check_member(mem, e, info.name)
            self.findings.extend(found)
            if not content_checked(mem, e):
                return None
            try:
                fd, name = self.tree.parent(e.path, create=True)
                out = _FileOut(self, e, fd, name, self.m.linked(mem.path))
            except OSError as err:
                self.fail(e, err.strerror or str(err))
                return None
            current[:] = [out]
            return out

        try:
            with open_part(target, info.name, info.bytes) as f:
                read_part(f, on_member, info.tar_bytes)
        except (PartError, OSError) as err:     # a damaged part loses only its own files
            found = part_error(info.name, err, target)
            if found.code in UNREADABLE:
                unread = [e.path for e in exp.missing()]
                self.unread.update(unread)
                found = replace(found, message=f"{found.message}; {len(unread):,} of its "
                                "files were not restored")
                exp = Expected((), lambda p: None)
            self.findings.append(found)
        finally:
            for out in current:
                out.abandon()            # the stream ended inside it
        for e in exp.missing():
            self.findings.append(Finding("member-missing", f"{shown(e.path)} is not "
                                         f"readable from {info.name}; not restored",
                                         os.fsdecode(e.path), info.name))

    def file_done(self, out: _FileOut) -> None:
        if out.linked:
            self.made.add(out.inode)
        self.restored += 1

    # -- links and special files ----------------------------------------------------------

    def _clear(self, fd: int, name: bytes) -> None:
        """With ``force``, make room for a link or special file (never a directory)."""
        if self.force:
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                pass

    def _other(self, e: mf.Entry) -> None:
        if e.type == "hardlink" and e.link in self.unread:
            self.findings.append(Finding("part-unreadable", f"{shown(e.path)}: a hardlink to "
                                         f"{shown(e.link)}, which could not be read; not "
                                         "restored", os.fsdecode(e.path), e.part))
            return
        try:
            if e.type == "hardlink":
                sfd, sname = self.tree.parent(e.link or b"")
                st = os.stat(sname, dir_fd=sfd, follow_symlinks=False)
                if not S.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) not in self.made:
                    self.refused.append(Finding(
                        "not-restored", f"{shown(e.path)}: a hardlink to "
                        f"{shown(e.link or b'')}, which this restore did not write; not "
                        "restored", os.fsdecode(e.path), e.part))
                    return
                fd, name = self.tree.parent(e.path, create=True)
                self._clear(fd, name)
                os.link(sname, name, src_dir_fd=sfd, dst_dir_fd=fd, follow_symlinks=False)
            else:
                fd, name = self.tree.parent(e.path, create=True)
                self._clear(fd, name)
                if e.type == "fifo":
                    os.mkfifo(name, 0o600, dir_fd=fd)
                else:
                    kind = S.S_IFCHR if e.type == "char" else S.S_IFBLK
                    os.mknod(name, 0o600 | kind, os.makedev(*(e.rdev or (0, 0))), dir_fd=fd)
                _node_meta(fd, name, e, self.mode(e), self.is_root)
        except FileNotFoundError as err:
            self.fail(e, f"{err.strerror} (its file was not restored)" if e.type == "hardlink"
                      else err.strerror)
            return
        except OSError as err:
            self.fail(e, err.strerror or str(err))
            return
        self.restored += 1

    def _symlink(self, e: mf.Entry) -> None:
        try:
            fd, name = self.tree.parent(e.path, create=True)
            self._clear(fd, name)
            os.symlink(e.link or b"", name, dir_fd=fd)
            if self.is_root:
                os.chown(name, e.uid, e.gid, dir_fd=fd, follow_symlinks=False)
            os.utime(name, ns=(e.mtime_ns, e.mtime_ns), dir_fd=fd, follow_symlinks=False)
        except OSError as err:
            self.fail(e, err.strerror or str(err))
            return
        self.restored += 1


def _node_meta(fd: int, name: bytes, e: mf.Entry, mode: int, is_root: bool) -> None:
    """Owner, mode and mtime of a FIFO or device node just made at (``fd``, ``name``),
    without following a symlink and without opening the node (opening a device can act)."""
    if is_root:
        os.chown(name, e.uid, e.gid, dir_fd=fd, follow_symlinks=False)
    try:
        os.chmod(name, mode, dir_fd=fd, follow_symlinks=False)
    except (NotImplementedError, OSError) as err:
        if isinstance(err, OSError) and err.errno not in (errno.EOPNOTSUPP, errno.ENOSYS):
            raise
        h = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            if S.S_ISLNK(os.fstat(h).st_mode):
                raise OSError(errno.ELOOP, "is a symlink") from None
            os.chmod(f"/proc/self/fd/{h}", mode)    # the node itself, by its descriptor
        finally:
            os.close(h)
    os.utime(name, ns=(e.mtime_ns, e.mtime_ns), dir_fd=fd, follow_symlinks=False)


class _FileOut:
    """One file being restored: written to a temp name in its directory (``O_EXCL``, so
    never into something that is there), hashed as it is written; when its data is complete,
    checked against the manifest's sha256, given its metadata and renamed into place. A
    write error is noted and the file dropped, never raised into the part's reading."""

    def __init__(self, r: _Restore, e: mf.Entry, dir_fd: int, name: bytes, linked: bool):
        self.r = r
        self.e = e
        self.linked = linked            # a hardlink points at it: its inode is remembered
        self.name = name
        self.dir_fd = os.dup(dir_fd)
        self.tmp = b".vacate-tmp-%d-%d" % (os.getpid(), next(_TMP))
        try:
            self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                              | os.O_CLOEXEC, 0o600, dir_fd=self.dir_fd)
        except BaseException:
            os.close(self.dir_fd)
            raise
        self.h = _Hasher(e.size, r.tick, self)
        self.error: OSError | None = None
        self.inode = (0, 0)

    # the _Hasher's sink
    def write(self, data) -> None:
        if self.error is not None:
            return
        try:
            while data:
                k = os.write(self.fd, data)
                data = data[k:]
        except OSError as err:
            self.error = err

    def hole(self, n: int) -> None:
        if self.error is None:
            os.lseek(self.fd, n, os.SEEK_CUR)

    # the consumer read_part drives
    def update(self, offset: int, data) -> None:
        if offset + len(data) > self.e.size:
            self.error = self.error or OSError(0, "data past the file's size")
            return
        self.h.update(offset, data)

    def done(self) -> None:
        e = self.e
        try:
            self.h.done()
            if self.error is not None:
                raise self.error
            os.ftruncate(self.fd, e.size)
            if self.h.h.hexdigest() != e.sha256 or self.h.pos != e.size:
                self._drop()
                self.r.findings.append(Finding(
                    "file-checksum", f"{shown(e.path)}: restored content does not match its "
                    "sha256; not restored", os.fsdecode(e.path), e.part))
                return
            if self.r.is_root:
                os.fchown(self.fd, e.uid, e.gid)
            os.fchmod(self.fd, self.r.mode(e))
            os.utime(self.fd, ns=(e.mtime_ns, e.mtime_ns))
            st = os.fstat(self.fd)
            os.close(self.fd)
            self.fd = -1
            os.rename(self.tmp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            self.inode = (st.st_dev, st.st_ino)
        except OSError as err:
            self._drop()
            self.r.fail(e, err.strerror or str(err))
            return
        finally:
            os.close(self.dir_fd)
            self.dir_fd = -1
        self.r.file_done(self)

    def abandon(self) -> None:
        """The part ended before this file's data did."""
        if self.dir_fd >= 0:
            self._drop()
            os.close(self.dir_fd)
            self.dir_fd = -1

    def _drop(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        try:
            os.unlink(self.tmp, dir_fd=self.dir_fd)
        except OSError:
            pass
