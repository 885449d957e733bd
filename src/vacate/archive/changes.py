"""What changed in an archive's sources since it was made: the sources walked as ``archive``
walks them (:func:`vacate.archive.source.walk`, the same contents and exclusions), each entry
compared with its manifest line by type, size, mtime, ctime (where recorded), mode, owner,
link target and device numbers. Contents are not re-read: a file rewritten with its size,
mtime and ctime kept is not seen (``verify --against`` re-hashes)."""

from __future__ import annotations

import os
import stat as S

from vacate.archive import manifest as mf
from vacate.archive import source, tarfmt
from vacate.archive.catalog import Catalog
from vacate.observing.model.common import Problem


def _differences(se: source.SourceEntry, e: mf.Entry) -> list[str]:
    st = se.st
    kind = tarfmt.type_of_mode(st.st_mode)
    etype = "file" if e.type == "hardlink" else e.type
    if kind != etype:
        return [f"is a {kind} now, was a {etype}"]
    if e.changed:
        return ["changed while it was archived"]
    out = []
    if kind == "file" and st.st_size != e.size:
        out.append(f"size {e.size} -> {st.st_size}")
    if kind != "dir":
        if st.st_mtime_ns != e.mtime_ns:
            out.append("mtime differs")
        elif e.ctime_ns is not None and st.st_ctime_ns != e.ctime_ns:
            out.append("ctime differs (written, renamed or relinked in place)")
    if kind != "symlink" and S.S_IMODE(st.st_mode) != e.mode:
        out.append(f"mode {e.mode:04o} -> {S.S_IMODE(st.st_mode):04o}")
    if (st.st_uid, st.st_gid) != (e.uid, e.gid):
        out.append("owner differs")
    if kind == "symlink":
        try:
            if os.readlink(se.abspath) != e.link:
                out.append("link target differs")
        except OSError as err:
            out.append(f"link unreadable: {err.strerror}")
    if kind in ("char", "block") and (os.major(st.st_rdev), os.minor(st.st_rdev)) != \
            tuple(e.rdev or (0, 0)):
        out.append("device numbers differ")
    return out


def since(m: Catalog, roots: list[tuple[bytes, bytes]], exclude: frozenset[bytes],
          problems: list[Problem]) -> list[str]:
    """``path: what changed`` for each entry of the sources ``roots`` (see
    :func:`source.arc_roots`) that is new, gone or different since ``m`` was written; what
    the walk could not read goes to ``problems``. Each entry walked is looked up by name in
    the catalog and marked there; what no walk marked is gone: nothing held per entry."""
    seen = m.marks()
    try:
        return _since(m, roots, exclude, problems, seen)
    finally:
        seen.close()


def _since(m: Catalog, roots, exclude: frozenset[bytes], problems: list[Problem],
           seen) -> list[str]:
    out: list[str] = []
    for ab, base in roots:
        walked = source.walk(ab, base, problems, exclude)
        for se, e in seen.meet(walked, lambda se: se.arcpath):
            p = os.fsdecode(se.abspath)
            if e is None:
                out.append(f"{p}: new since the archive was made")
                continue
            diffs = _differences(se, e)
            if diffs:
                out.append(f"{p}: {', '.join(diffs)}")
    where = {base: ab for ab, base in roots}
    for path in seen.unmet():
        top, _, rest = path.partition(b"/")
        ab = where.get(top)
        p = os.fsdecode(ab + b"/" + rest if ab and rest else ab or path)
        out.append(f"{p}: gone since the archive was made")
    return out
