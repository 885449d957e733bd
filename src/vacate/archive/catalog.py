"""An archive's manifest as its readers use it: ``MANIFEST.jsonl`` streamed once, line by
line, into an sqlite3 file in a private temporary directory, checked there, then read back in
order, part by part, or by name. verify, restore and the staleness check hold the header and
sqlite's bounded page cache (``CACHE_KIB``), never one record per entry (parsed in memory, an
entry cost ~1.5 KB: verify and restore of 200,000 entries peaked at 340 MB; now ~90 MB, most
of it the part reader's buffers, and the staleness check 46 MB).

Why an index by name at all, rather than the manifest streamed beside each part:

- the manifest's own checks relate entries anywhere in the file: a path listed twice, a
  hardlink to something that is not a file of the archive, an entry inside a non-directory;
- a part's members are matched with their entries in the manifest's order (the writer's),
  but a damaged or hostile part may hold them in any order, twice, or not at all, and a
  member must then be found by its name (:class:`Expected`);
- a hardlink restored needs the entry of the file it points at, wherever that is listed;
- the sources' walk (``verify --against``, the staleness check) meets paths in the order of
  the directories' listings, not the manifest's: each is looked up by name, and what the walk
  did not meet is what is gone (:meth:`Catalog.walked`).

The file lives under ``$TMPDIR`` (``tempfile``'s choice; ~240 bytes an entry with its
indexes, 47 MB for 200,000 entries) and is removed on :meth:`Catalog.close`; the directory's
name holds the pid of its process, so one left by a killed process is removed by the next
build (:func:`_sweep`). Where ``$TMPDIR`` is a tmpfs it takes
memory, but not this process's. Rows are the checked entries (columns, not JSON), so reading
one back costs no parsing. Standard library only (``sqlite3``), CPython 3.8.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator

from vacate.archive import manifest as mf
from vacate.archive.manifest import Damaged, Entry, Manifest, shown

CACHE_KIB = 8 << 10         # sqlite's page cache, per connection
PREFIX = "vacate-catalog-"  # and the pid of the process that made it
BATCH = 4096                # entries parsed and inserted at a time

_COLUMNS = ("seq INTEGER PRIMARY KEY, key BLOB NOT NULL, type TEXT, part TEXT, size INTEGER, "
            "mode INTEGER, uid INTEGER, gid INTEGER, user TEXT, grp TEXT, mtime INTEGER, "
            "link BLOB, lkey BLOB, hgroup INTEGER, sha TEXT, sparse INTEGER, rmaj INTEGER, "
            "rmin INTEGER, changed INTEGER, ctime INTEGER")
_ENTRY = ("key, type, part, size, mode, uid, gid, user, grp, mtime, link, hgroup, sha, sparse, "
          "rmaj, rmin, changed, ctime")


def key(path: bytes) -> bytes:
    """A path as the catalog keys it: ``/`` as NUL (no name holds one), so that the keys'
    byte order is component order and whatever lies inside a path sorts right after it."""
    return path.replace(b"/", b"\0")


def _row(n: int, e: Entry) -> tuple:
    rdev = e.rdev or (None, None)
    return (n, key(e.path), e.type, e.part, e.size, e.mode, e.uid, e.gid, e.user, e.group,
            e.mtime_ns, e.link, key(e.link) if e.type == "hardlink" and e.link else None,
            e.hardlink_group, e.sha256, int(e.sparse), rdev[0], rdev[1], int(e.changed),
            e.ctime_ns)


def _entry(r) -> Entry:
    return Entry(path=r[0].replace(b"\0", b"/"), type=r[1], part=r[2], size=r[3], mode=r[4],
                 uid=r[5], gid=r[6], user=r[7], group=r[8], mtime_ns=r[9], link=r[10],
                 hardlink_group=r[11], sha256=r[12], sparse=bool(r[13]),
                 rdev=None if r[14] is None else (r[14], r[15]), changed=bool(r[16]),
                 ctime_ns=r[17])


def _connect(path: str, readonly: bool = False) -> sqlite3.Connection:
    uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
    db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    db.execute("PRAGMA temp_store = FILE")
    if not readonly:
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
    return db


class Catalog:
    """The header's fields (``name``, ``created``, ``sources``, ``parts``, ``tool``,
    ``extra``, ``count``) and the entries behind queries. Used by one thread; another thread
    takes its own :meth:`reader`. A context manager: the temporary file goes on exit."""

    def __init__(self, head: Manifest, count: int, path: str, owner: bool = True):
        self.head = head
        self.name, self.created, self.sources = head.name, head.created, head.sources
        self.parts, self.tool, self.extra = head.parts, head.tool, head.extra
        self.count = count
        self.has_links: bool | None = None
        self.path = path
        self.owner = owner
        self.db = _connect(os.path.join(path, "catalog.db"), readonly=not owner)

    def reader(self) -> Catalog:
        """The same catalog on a connection of its own (for another thread; read only)."""
        return Catalog(self.head, self.count, self.path, owner=False)

    def close(self) -> None:
        self.db.close()
        if self.owner:
            shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------------

    def entries(self, part: str | None = None, types: tuple[str, ...] = ()
                ) -> Iterator[Entry]:
        """The entries in the manifest's order (of one part only, with ``part``; of these
        types only, with ``types``)."""
        where, args = [], []
        if part is not None:
            where.append("part = ?")
            args.append(part)
        if types:
            where.append(f"type IN ({', '.join('?' * len(types))})")
            args += types
        cond = f"WHERE {' AND '.join(where)} " if where else ""
        for r in self.db.execute(f"SELECT {_ENTRY} FROM e {cond}ORDER BY seq", args):
            yield _entry(r)

    def special(self) -> Iterator[Entry]:
        """The device nodes and the entries with set-user-ID or set-group-ID bits, in the
        manifest's order."""
        for r in self.db.execute(f"SELECT {_ENTRY} FROM e WHERE type IN ('char', 'block') "
                                 "OR mode & 3072 ORDER BY seq"):
            yield _entry(r)

    def dirs(self, reverse: bool = False) -> Iterator[Entry]:
        """The directories in component order (a directory before what it holds;
        ``reverse``: after)."""
        order = "DESC" if reverse else "ASC"
        for r in self.db.execute(f"SELECT {_ENTRY} FROM e WHERE type = 'dir' "
                                 f"ORDER BY key {order}"):
            yield _entry(r)

    def linked(self, path: bytes) -> bool:
        """Whether a hardlink of the archive points at ``path``."""
        if self.has_links is None:
            self.has_links = self.db.execute("SELECT 1 FROM e WHERE lkey IS NOT NULL LIMIT 1"
                                             ).fetchone() is not None
        return self.has_links and self.db.execute(
            "SELECT 1 FROM e WHERE lkey = ? LIMIT 1", (key(path),)).fetchone() is not None

    def numbered(self, part: str) -> Iterator[tuple[int, Entry]]:
        """``(line, entry)`` of one part's entries, in the manifest's order."""
        for r in self.db.execute(f"SELECT seq, {_ENTRY} FROM e WHERE part = ? ORDER BY seq",
                                 (part,)):
            yield r[0], _entry(r[1:])

    def get(self, path: bytes) -> Entry | None:
        r = self.db.execute(f"SELECT {_ENTRY} FROM e WHERE key = ?", (key(path),)).fetchone()
        return None if r is None else _entry(r)

    def line_of(self, path: bytes) -> tuple[int, Entry] | None:
        r = self.db.execute(f"SELECT seq, {_ENTRY} FROM e WHERE key = ?",
                            (key(path),)).fetchone()
        return None if r is None else (r[0], _entry(r[1:]))

    def part_count(self, part: str) -> int:
        return self.db.execute("SELECT count(*) FROM e WHERE part = ?", (part,)).fetchone()[0]

    def file_bytes(self) -> int:
        """The sum of the files' sizes."""
        return self.db.execute("SELECT coalesce(sum(size), 0) FROM e WHERE type = 'file'"
                               ).fetchone()[0]

    def files(self) -> int:
        return self.db.execute("SELECT count(*) FROM e WHERE type = 'file'").fetchone()[0]

    def changed(self) -> Iterator[bytes]:
        """The paths that changed while they were read."""
        for (k,) in self.db.execute("SELECT key FROM e WHERE changed ORDER BY seq"):
            yield k.replace(b"\0", b"/")

    def tops(self) -> set[bytes]:
        """The first components of the entries' paths (the sources' names)."""
        out: set[bytes] = set()
        for (k,) in self.db.execute("SELECT key FROM e"):
            out.add(k.split(b"\0", 1)[0])
        return out

    def summed(self) -> Iterator[tuple[bytes, str]]:
        """``(path, sha256)`` of every regular file and hardlink, in ``SHA256SUMS``' order."""
        for k, sha in self.db.execute("SELECT key, sha FROM e WHERE type IN ('file', "
                                      "'hardlink') AND sha IS NOT NULL ORDER BY seq"):
            yield k.replace(b"\0", b"/"), sha

    def summed_size(self) -> int:
        """The size of ``SHA256SUMS`` as :meth:`summed` makes it: 64 + 2 + the name + 1 a
        line, and a name with a backslash, newline or carriage return escaped (one byte
        more for each, and a leading backslash)."""
        only = "type IN ('file', 'hardlink') AND sha IS NOT NULL"
        size = self.db.execute(f"SELECT coalesce(sum(length(key) + 67), 0) FROM e WHERE {only}"
                               ).fetchone()[0]
        for (k,) in self.db.execute(f"SELECT key FROM e WHERE {only} AND (instr(key, x'5c') "
                                    "OR instr(key, x'0a') OR instr(key, x'0d'))"):
            size += 1 + k.count(b"\\") + k.count(b"\n") + k.count(b"\r")
        return size

    def whole(self) -> Manifest:
        """The manifest with every entry in memory (for small manifests and tests)."""
        return Manifest(self.name, self.created, self.sources, self.parts,
                        tuple(self.entries()), self.tool, self.extra)

    def marks(self) -> Marks:
        """A record of which entries something met (a walk, a sums file), in a file of its
        own: what it did not meet is found without a set of the paths in memory."""
        return Marks(self)


class Marks:
    """Paths met, in a table of their own beside the catalog (attached read only)."""

    def __init__(self, cat: Catalog):
        self.file = os.path.join(cat.path, f"marks-{id(self)}.db")
        self.db = _connect(self.file)
        self.db.execute("ATTACH DATABASE ? AS c", (f"file:{cat.path}/catalog.db?mode=ro",))
        self.db.execute("CREATE TABLE w (key BLOB PRIMARY KEY) WITHOUT ROWID")
        self.db.execute("BEGIN")

    def add(self, path: bytes) -> bool:
        """Mark ``path``; False where it was marked before."""
        return self.db.execute("INSERT OR IGNORE INTO w VALUES (?)", (key(path),)).rowcount > 0

    def meet(self, items, path_of, batch: int = 256):
        """``(item, its entry or None)`` for each of ``items``, whose path is
        ``path_of(item)``, each marked: looked up ``batch`` at a time (one query, not one a
        path; ``batch`` items held)."""
        held: list = []
        for item in items:
            held.append(item)
            if len(held) >= batch:
                yield from self._meet(held, path_of)
                held = []
        yield from self._meet(held, path_of)

    def _meet(self, held: list, path_of):
        if not held:
            return
        keys = [key(path_of(x)) for x in held]
        self.db.executemany("INSERT OR IGNORE INTO w VALUES (?)", ((k,) for k in keys))
        found = {r[0]: _entry(r) for r in self.db.execute(
            f"SELECT {_ENTRY} FROM c.e WHERE key IN ({', '.join('?' * len(keys))})", keys)}
        for x, k in zip(held, keys):
            yield x, found.get(k)

    def unmet(self, summed: bool = False) -> Iterator[bytes]:
        """The catalog's paths not marked, in the manifest's order (``summed``: only the
        files and hardlinks that ``SHA256SUMS`` lists)."""
        self.db.execute("COMMIT")
        only = "e.type IN ('file', 'hardlink') AND e.sha IS NOT NULL AND " if summed else ""
        cur = self.db.execute(f"SELECT e.key FROM c.e AS e WHERE {only}NOT EXISTS "
                              "(SELECT 1 FROM w WHERE w.key = e.key) ORDER BY e.seq")
        for (k,) in cur:
            yield _path(k)

    def close(self) -> None:
        self.db.close()
        try:
            os.unlink(self.file)
        except OSError:
            pass


# ---- building ------------------------------------------------------------------------------

def build(f, *, size_limit: int = mf.MAX_MANIFEST) -> Catalog:
    """Read ``MANIFEST.jsonl`` from ``f`` (its ``read``), check it, and keep its entries in a
    new catalog. Raises :class:`Damaged` naming the first line found wrong, with nothing left
    behind. ``size_limit``: bytes read at most (the caller refuses a longer file)."""
    from vacate.archive.reader import lines

    _sweep()
    path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    try:
        db = _connect(os.path.join(path, "catalog.db"))
        try:
            db.execute(f"CREATE TABLE e ({_COLUMNS})")
            it = lines(f, max(mf.MAX_HEADER_LINE, mf.MAX_ENTRY_LINE))
            first = next(it, (1, b""))
            head, count = mf.parse_header(first[1])
            n = _insert(db, it, frozenset(p.name for p in head.parts))
            if count != n:
                raise Damaged(f"manifest lists {n} entries, header says {count}")
            db.execute("CREATE INDEX e_key ON e (key)")
            db.execute("CREATE INDEX e_part ON e (part, seq)")
            db.execute("CREATE INDEX e_lkey ON e (lkey) WHERE lkey IS NOT NULL")
            _check(db)
        finally:
            db.close()
        return Catalog(head, count, path)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise


def loads(data: bytes) -> Manifest:
    """Parse and check ``MANIFEST.jsonl`` held in memory, as one read from an archive is
    checked; raises :class:`~vacate.archive.manifest.Damaged`."""
    import io

    with build(io.BytesIO(data)) as c:
        return c.whole()


def _sweep() -> None:
    """Remove the catalogs of processes that are gone (killed before they closed them)."""
    where = tempfile.gettempdir()
    try:
        names = os.listdir(where)
    except OSError:
        return
    for name in names:
        pid = name[len(PREFIX):].split("-", 1)[0]
        if not name.startswith(PREFIX) or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(where, name), ignore_errors=True)
        except OSError:
            pass                    # alive (someone else's)


def _insert(db: sqlite3.Connection, it, parts: frozenset[str]) -> int:
    n = 0
    rows: list[tuple] = []
    sql = f"INSERT INTO e VALUES ({', '.join('?' * 20)})"
    db.execute("BEGIN")
    for line, raw in it:
        if not raw:
            continue
        rows.append(_row(line, mf.parse_entry(raw, line, parts)))
        n += 1
        if len(rows) >= BATCH:
            db.executemany(sql, rows)
            rows = []
    db.executemany(sql, rows)
    db.execute("COMMIT")
    return n


def _path(k: bytes) -> bytes:
    return k.replace(b"\0", b"/")


def _where(seq: int, k: bytes) -> str:
    return f"line {seq} ({shown(_path(k))})"


def _check(db: sqlite3.Connection) -> None:
    """What no single line shows: a path listed twice, a hardlink to anything but a file of
    the archive, an entry inside a non-directory. Each is the one found on the earliest
    line, as a whole-file check in memory would name it."""
    twice = db.execute("SELECT b.seq, b.key, min(a.seq) FROM e AS b JOIN e AS a "
                       "ON a.key = b.key AND a.seq < b.seq GROUP BY b.seq ORDER BY b.seq "
                       "LIMIT 1").fetchone()
    if twice:
        raise Damaged(f"{_where(twice[0], twice[1])}: listed twice (first on line {twice[2]})")
    bad = db.execute("SELECT h.seq, h.key, h.link FROM e AS h LEFT JOIN e AS f "
                     "ON f.key = h.lkey WHERE h.type = 'hardlink' AND (f.type IS NULL OR "
                     "f.type != 'file') ORDER BY h.seq LIMIT 1").fetchone()
    if bad:
        raise Damaged(f"{_where(bad[0], bad[1])}: a hardlink to {shown(bad[2] or b'')}, "
                      "which is not a file of the archive")
    # in key order, whatever lies inside a path comes right after it: one look at each
    # neighbour finds an entry inside a non-directory (a file inside a symlink), however deep
    prev = None
    for k, t, seq in db.execute("SELECT key, type, seq FROM e ORDER BY key"):
        if prev is not None and prev[1] != "dir" and k.startswith(prev[0] + b"\0"):
            raise Damaged(f"{_where(seq, k)} lies inside {shown(_path(prev[0]))}, which is "
                          f"a {prev[1]}, not a directory")
        prev = (k, t)
