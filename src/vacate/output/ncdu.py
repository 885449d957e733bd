"""Export a scan in ncdu's JSON format, so ``ncdu -f FILE`` browses it.

Format (ncdu's "export format", version 1.2): ``[1, 2, {metadata}, ROOTDIR]`` where a directory
is an array ``[{info}, child, child, ...]`` and a file is an object. Info fields used here:
``name``, ``asize`` (apparent), ``dsize`` (on disk), ``ino``, ``mtime``, ``hlnkc`` (more than
one link: ncdu counts the inode once), ``notreg`` (not a regular file), ``read_error`` and
``excluded: "otherfs"`` (a mount below the target, not walked). Names are written as raw bytes,
as ncdu itself writes them, so a name that is not UTF-8 comes back byte-exact in ncdu.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from typing import BinaryIO

from vacate import __version__
from vacate.observing.errors import VacateError
from vacate.observing.fsio import fsync_dir
from vacate.observing.model.inventory import ScanResult


def _name(s: str) -> bytes:
    return json.dumps(s, ensure_ascii=False).encode("utf-8", "surrogateescape")


def _obj(name: str, asize: int, blocks: int, ino: int, mtime: float, extra: str = "") -> bytes:
    return (b'{"name":' + _name(name) + b',"asize":%d,"dsize":%d,"ino":%d,"mtime":%d'
            % (asize, blocks * 512, ino, int(mtime)) + extra.encode() + b"}")


def write(result: ScanResult, out: BinaryIO) -> None:
    """Write ``result`` (scanned with ``record_tree=True``) to a binary stream."""
    if result.listing is None:
        raise ValueError("the scan did not record the tree (scan(..., record_tree=True))")
    root = result.target.path
    by_path = result.listing          # read one directory at a time (kept on disk)
    if root not in by_path:
        raise VacateError(f"{root}: nothing was walked, nothing to export")
    children: dict[str, list[str]] = {}
    for p in by_path:
        if p != root:
            children.setdefault(os.path.dirname(p), []).append(p)
    meta = {"progname": "vacate", "progver": __version__, "timestamp": int(time.time())}
    out.write(b"[1,2," + json.dumps(meta).encode() + b",\n")
    # iterative depth-first writer; None closes a directory. Every child of a directory
    # follows its info object, so each one but the root is preceded by a comma.
    stack: list[tuple[str, str] | None] = [(root, root)]
    while stack:
        top = stack.pop()
        if top is None:
            out.write(b"]")
            continue
        path, shown = top
        _, size, blocks, mtime, ino, entries, excluded, read_error = by_path[path]
        if path != root:
            out.write(b",\n")
        out.write(b"[" + _obj(shown, size, blocks, ino, mtime,
                              ',"read_error":true' if read_error else ""))
        for name, asize, blks, mt, fino, nlink, mode in entries:
            extra = ""
            if nlink > 1:
                extra += ',"hlnkc":true'
            if mode != stat.S_IFREG:
                extra += ',"notreg":true'
            out.write(b",\n" + _obj(name, asize, blks, fino, mt, extra))
        for name in excluded:
            out.write(b',\n{"name":' + _name(name) + b',"excluded":"otherfs"}')
        stack.append(None)
        for sub in sorted(children.get(path, ()), reverse=True):
            stack.append((sub, os.path.basename(sub)))
    out.write(b"]\n")


def write_file(result: ScanResult, path: str) -> None:
    """Write the export to ``path`` crash-safe (temp file, fsync, rename)."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=".vacate-ncdu-", dir=d)
    except OSError as e:
        raise VacateError(f"cannot write {path}: {e.strerror}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)       # as a plain open() would have made it
        with os.fdopen(fd, "wb") as f:
            write(result, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(d)                        # the new name survives a crash too
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
