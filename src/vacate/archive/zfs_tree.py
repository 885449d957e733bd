"""A snapshot's tree recorded while it is archived, and read back by verify.

``zfs send`` reads blocks, not files: the tree (every name, type, size, mode, owner, mtime,
link count, symlink target and inode number, as :mod:`vacate.archive.tree_compare` walks it;
no file is read) is read from the snapshot itself — its ``.zfs/snapshot`` directory, or a clone made for the
purpose where the ZFS has none (zfs-fuse) — by a :class:`TreeRecorder` thread while the
stream is sent, so that its cost hides behind the send. It is written to the
archive as ``ZFS-TREE.jsonl``, one JSON array a line, and the manifest records the file's
sha256 and the tree's digest. Verify then reads only the received tree and compares it with
the recorded one (:func:`recorded`), so that the file list can be proven where the source
is gone; what the files hold is proven from the streams
(:mod:`vacate.archive.zfs_content`).

Paths and symlink targets are bytes: a line holds them decoded as UTF-8 with
``surrogateescape`` (a byte that is not UTF-8 is written as ``\\udcXX``), which gives back the
same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid

from vacate.archive import zfs_names as zn
from vacate.archive import zfs_tool
from vacate.archive.tree_compare import digest_line, entries
from vacate.observing.errors import VacateError

SKIP_TOP = frozenset({b".zfs"})        # ZFS's control directory, at the top of a dataset
BATCH = 1 << 20                        # bytes of lines written at a time
MAX_LINE = 1 << 17                     # a path and a target of 4 KiB, every byte escaped
KINDS = frozenset({"file", "dir", "symlink", "fifo", "socket", "char", "block", "other"})


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def line(path: bytes, f: tuple) -> bytes:
    kind, size, mode, uid, gid, mtime_ns, links, target, ino = f
    return json.dumps([_text(path), kind, size, mode, uid, gid, mtime_ns, links,
                       _text(target), ino], separators=(",", ":")).encode() + b"\n"


def parse(raw: bytes) -> tuple[bytes, tuple]:
    """(path, fields) of one line; raises :class:`zn.Damaged`."""
    try:
        v = json.loads(raw)
    except (ValueError, RecursionError):
        raise zn.Damaged("a line is not JSON") from None
    if not isinstance(v, list) or len(v) != 10:
        raise zn.Damaged("a line is not an entry (10 fields)")
    path, kind, *nums, target, ino = v
    if not (isinstance(path, str) and path and isinstance(target, str) and kind in KINDS
            and all(type(n) is int for n in (*nums, ino))
            and min(nums[:4] + nums[5:] + [ino]) >= 0):
        raise zn.Damaged("an entry's fields are not of their types")
    try:
        return (path.encode("utf-8", "surrogateescape"),
                (kind, *nums, target.encode("utf-8", "surrogateescape"), ino))
    except UnicodeEncodeError:
        raise zn.Damaged("a path is not one vacate writes") from None


def mounted(ds: str) -> str:
    """Where ``ds`` is mounted (mounted now where it was not)."""
    p = zfs_tool.props(ds, "mounted", "mountpoint")
    if p.get("mounted") != "yes":
        zfs_tool.zfs("mount", ds)
        p = zfs_tool.props(ds, "mountpoint")
    return p["mountpoint"]


def source_tree(dataset: str, snapshot: str, clone: str) -> tuple[str, str | None]:
    """Where ``dataset@snapshot``'s tree can be read: its ``.zfs/snapshot`` directory, or a
    clone of it named ``clone`` (made here, returned: the caller destroys it)."""
    mp = zfs_tool.props(dataset, "mountpoint", "mounted")
    snapdir = os.path.join(mp.get("mountpoint", ""), ".zfs", "snapshot", snapshot)
    if mp.get("mounted") == "yes" and os.path.isdir(snapdir):
        return snapdir, None
    zfs_tool.zfs("clone", f"{dataset}@{snapshot}", clone)
    return mounted(clone), clone


CLONE = "vacate-tree-"
QUICK_S = 2.0           # how long a clone's destroy is retried while the archive waits on it


def archive_clone(dataset: str, guid: int) -> str:
    """A clone for an archive of the snapshot ``guid`` to read the tree from: a name per run
    (zfs-fuse may call a clone busy for minutes after its last use, and a rerun must not wait
    on what a killed run left); :func:`drop_left` finds them by their prefix and origin."""
    return f"{dataset.split('/', 1)[0]}/{CLONE}{guid}-{uuid.uuid4().hex[:8]}"


def left_clones(origin: str, guid: int) -> list[str]:
    """The clones of ``origin`` that earlier archives of it left (named as they name them)."""
    pool = origin.split("/", 1)[0].split("@", 1)[0]
    out = zfs_tool.zfs("list", "-H", "-o", "name,origin", "-t", "filesystem", "-r", pool
                       ).stdout
    want = f"{pool}/{CLONE}{guid}-"
    return [name for name, _, o in (x.partition("\t") for x in out.splitlines())
            if name.startswith(want) and o.strip() == origin]


def drop_left(origin: str, guid: int, patience_s: float) -> list[str]:
    """Destroy what earlier archives of ``origin`` left; returns a sentence for each clone
    still there."""
    said = []
    try:
        names = left_clones(origin, guid)
    except zfs_tool.ZfsError as e:
        return [e.message]
    for name in names:
        try:
            zfs_tool.destroy_r(name, patience_s)
        except zfs_tool.ZfsError as e:
            said.append(f"{e.message}: the clone an archive read the tree from; destroy it "
                        f"later (zfs destroy -r {name})")
    return said


class TreeRecorder(threading.Thread):
    """Walks ``dataset@snapshot``'s tree (through ``clone`` where it must) into the
    archive's tree file, and destroys the clone as soon as the walk is done, still behind the
    send. ``result()`` waits for it: the tree's record for the manifest, or the error. A clone
    that zfs-fuse still calls busy a moment after is left (``left``) for the archive to try
    again at its end, and verify after it."""

    def __init__(self, dataset: str, snapshot: str, clone: str, target):
        super().__init__(daemon=True, name="tree-recorder")
        self.dataset, self.snapshot, self.clone, self.target = dataset, snapshot, clone, target
        self.stopping = threading.Event()
        self.tree: zn.Tree | None = None
        self.error: BaseException | None = None
        self.left = ""              # the clone, where zfs-fuse kept it busy a while

    def run(self) -> None:
        sink = None
        made = None
        try:
            root, made = source_tree(self.dataset, self.snapshot, self.clone)
            sink = self.target.create(zn.TREE)
            fh, th = hashlib.sha256(), hashlib.sha256()
            n = content = size = 0
            out: list[bytes] = []
            pending = 0
            for path, f in entries(os.fsencode(root), SKIP_TOP):
                if self.stopping.is_set():
                    return
                th.update(digest_line(path, f))
                b = line(path, f)
                out.append(b)
                pending += len(b)
                n += 1
                content += f[1] if f[0] == "file" else 0
                if pending >= BATCH:
                    size += self._write(sink, fh, out)
                    out, pending = [], 0
            size += self._write(sink, fh, out)
            sink.commit()
            sink = None
            self.tree = zn.Tree(zn.TREE, size, fh.hexdigest(), th.hexdigest(), n, content)
        except (OSError, VacateError) as e:      # handed to the caller by result()
            self.error = e
        finally:
            if sink is not None:
                sink.abort()
            if made is not None and zfs_tool.exists(made):
                try:
                    zfs_tool.destroy_r(made, QUICK_S)
                except zfs_tool.ZfsError:       # the tree stands: the archive tries again
                    self.left = made

    @staticmethod
    def _write(sink, fh, out: list[bytes]) -> int:
        data = b"".join(out)
        fh.update(data)
        sink.write(data)
        return len(data)

    def result(self, timeout_s: float) -> zn.Tree:
        """The tree recorded; raises what stopped the walk, or ZfsError after ``timeout_s``
        with no end."""
        self.join(timeout_s)
        if self.is_alive():
            self.stopping.set()
            raise zfs_tool.ZfsError(f"the walk of {self.dataset}@{self.snapshot}'s tree did "
                                    f"not end within {timeout_s:g} s of the send's end: "
                                    "stopped (the pool does not answer?)")
        if self.error is not None:
            if isinstance(self.error, OSError):
                raise zfs_tool.ZfsError(f"the tree of {self.dataset}@{self.snapshot} could "
                                        f"not be read: {self.error}") from self.error
            raise self.error
        if self.tree is None:
            raise VacateError(f"the walk of {self.dataset}@{self.snapshot}'s tree ended "
                              "without its record")
        return self.tree

    def stop(self, timeout_s: float = 120.0) -> None:
        """Stop the walk where it is (an archive that failed); its clone is destroyed (by a
        rerun, where the pool does not answer within ``timeout_s``)."""
        self.stopping.set()
        self.join(timeout_s)


def recorded(target, tree: zn.Tree):
    """The entries of the archive's tree file, after its size and sha256 are checked against
    the manifest's ``tree``; raises :class:`zn.Damaged` (also while iterating, on a line that
    is not an entry) or OSError."""
    if target.list().get(tree.name) != tree.bytes:
        raise zn.Damaged(f"{tree.name} is missing or not {tree.bytes:,} bytes")
    h = hashlib.sha256()
    with target.open(tree.name) as f:
        while data := f.read(1 << 20):
            h.update(data)
    if h.hexdigest() != tree.sha256:
        raise zn.Damaged(f"{tree.name}: sha256 is not the one the manifest records")
    return _lines(target, tree.name)


def _lines(target, name: str):
    with target.open(name) as f:
        while raw := f.readline(MAX_LINE + 1):
            if len(raw) > MAX_LINE:
                raise zn.Damaged(f"{name}: a line longer than vacate writes")
            yield parse(raw)
