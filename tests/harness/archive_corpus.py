"""Crafting hostile archives for the restore and verify tests (no tests here).

``build`` writes an archive that is consistent in every way but the one a test makes hostile:
the tar members are made from the entries with the project's own header writer, compressed
with zstd, and the manifest's header, ``SHA256SUMS`` and ``PARTS.SHA256SUMS`` are computed
from what was written, so a test that breaks one thing tests that thing. ``real_archive``
runs the real ``vacate archive``. ``Outside`` records what no restore may change: /etc/passwd
(inode, link count, size, mtime) and a sentinel directory beside ``--to``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import zstandard

from vacate.archive import sums, tarfmt
from vacate.archive.manifest import SCHEMA
from vacate.archive.tarfmt import Member

TIMEOUT = 60           # no command here may take long: a hang fails instead of hanging
PART = "part-000001.tar.zst"
MTIME = 1_600_000_000_000_000_000


def vacate(*args, timeout: float = TIMEOUT, **kw) -> subprocess.CompletedProcess:
    """The real command line in a child process, killed (and the test failed) at ``timeout``."""
    return subprocess.run([sys.executable, "-m", "vacate", *args], capture_output=True,
                          timeout=timeout, check=False, **kw)


def verify(adir: str, *args, **kw) -> tuple[int, dict | None, str]:
    r = vacate("verify", adir, "--json", "--no-progress", *args, **kw)
    return r.returncode, json.loads(r.stdout) if r.stdout else None, r.stderr.decode()


def restore(adir: str, dest, *args, **kw) -> tuple[int, dict | None, str]:
    r = vacate("restore", adir, *args, "--to", str(dest), "--json", "--no-progress", **kw)
    return r.returncode, json.loads(r.stdout) if r.stdout else None, r.stderr.decode()


def codes(doc: dict) -> set[str]:
    return {f["code"] for f in doc["findings"]}


def entry(path: str, type: str = "file", data: bytes | None = None, **kw) -> dict:
    """A manifest entry (as JSON) with the defaults the writer gives; ``data`` for a file."""
    e = {"path": path, "type": type, "size": 0, "mode": "0644" if type != "dir" else "0755",
         "uid": 0, "gid": 0, "user": "root", "group": "root", "mtime_ns": MTIME, "part": PART}
    if type == "file":
        data = data or b""
        e["size"] = len(data)
        e["sha256"] = hashlib.sha256(data).hexdigest()
    if type == "symlink":
        e["mode"] = "0777"
    e.update(kw)
    return e


def member_bytes(e: dict, data: bytes = b"") -> bytes:
    """The tar member (headers, data, padding) that holds entry ``e``."""
    kind = e["type"] if e["type"] in tarfmt.TYPE_FLAGS else "file"
    rdev = e.get("rdev") or (0, 0)
    m = Member(path=os.fsencode(e["path"]), type=kind, size=len(data) if kind == "file" else 0,
               mode=int(e["mode"], 8), mtime_ns=e["mtime_ns"],
               linkpath=os.fsencode(e.get("link", "")), devmajor=rdev[0], devminor=rdev[1])
    return tarfmt.header(m) + data + bytes(tarfmt.padding(len(data)))


def build(adir: str, items: list, *, tar: bytes | None = None, part: str = PART,
          header: dict | None = None, raw_part: bytes | None = None) -> str:
    """Write an archive in ``adir``: ``items`` are (entry, data) pairs or entries; the part
    holds their members in order (or the tar stream ``tar``, or the bytes ``raw_part`` as
    they are), the header and both sums files agree with what was written."""
    os.makedirs(adir, exist_ok=True)
    pairs = [(x, None) if isinstance(x, dict) else x for x in items]
    if tar is None:
        tar = b"".join(member_bytes(e, d or b"") for e, d in pairs) + tarfmt.END_OF_ARCHIVE
    comp = raw_part if raw_part is not None else zstandard.ZstdCompressor().compress(tar)
    plain = part not in ("", ".", "..") and not any(c in part for c in "/\0")
    with open(os.path.join(adir, part if plain else "crafted-part"), "wb") as f:
        f.write(comp)
    entries = [e for e, _ in pairs]
    head = {"schema": SCHEMA, "name": os.path.basename(adir), "created": "2026-01-01T00:00:00Z",
            "tool": "crafted", "sources": ["/crafted"],
            "parts": [{"name": part, "sha256": hashlib.sha256(comp).hexdigest(),
                       "bytes": len(comp), "tar_bytes": len(tar), "entries": len(entries)}],
            "entries": len(entries)}
    head.update(header or {})
    write_manifest(adir, head, entries)
    files = b"".join(sums.line(e["sha256"], os.fsencode(e["path"])) for e in entries
                     if isinstance(e, dict) and e.get("type") in ("file", "hardlink")
                     and isinstance(e.get("sha256"), str) and isinstance(e.get("path"), str))
    with open(os.path.join(adir, "SHA256SUMS"), "wb") as f:
        f.write(files)
    with open(os.path.join(adir, "PARTS.SHA256SUMS"), "wb") as f:
        f.write(sums.line(head["parts"][0]["sha256"], part.encode()))
    return adir


def write_manifest(adir: str, head, entries: list) -> None:
    lines = [json.dumps(head)] + [json.dumps(e) for e in entries]
    with open(os.path.join(adir, "MANIFEST.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")


def read_manifest(adir: str) -> tuple[dict, list[dict]]:
    with open(os.path.join(adir, "MANIFEST.jsonl")) as f:
        lines = f.read().splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


def real_archive(root: str, make_tree) -> str:
    """``vacate archive`` of the tree ``make_tree(src)`` builds; returns the archive dir."""
    src = os.path.join(root, "src")
    os.makedirs(src)
    make_tree(src)
    r = vacate("archive", src, "--to", os.path.join(root, "b"), "--no-progress")
    assert r.returncode == 0, r.stderr.decode()
    return os.path.join(root, "b", "src")


def symlink_chain(n: int) -> list[dict]:
    """``l1 -> .``, ``l2 -> l1/..``, ... ``ln -> l(n-1)/..``: by link texts ``ln`` climbs
    n - 1 levels above the directory holding them."""
    out = [entry("l1", "symlink", link=".")]
    for i in range(2, n + 1):
        out.append(entry(f"l{i}", "symlink", link=f"l{i - 1}/.."))
    return out


class Outside:
    """What a restore into ``dest`` must leave alone; ``check()`` asserts it did."""

    def __init__(self, base: str):
        self.sentinel = os.path.join(base, "sentinel")
        os.makedirs(os.path.join(self.sentinel, "inner"), exist_ok=True)
        with open(os.path.join(self.sentinel, "keep"), "w") as f:
            f.write("untouched\n")
        self.base = base
        self.before = self._state()

    def _state(self):
        st = os.stat("/etc/passwd")
        tree = {}
        for d, dirs, files in os.walk(self.sentinel):
            for n in dirs + files:
                p = os.path.join(d, n)
                s = os.lstat(p)
                data = _read(p) if os.path.isfile(p) else None
                tree[os.path.relpath(p, self.sentinel)] = (s.st_mode, s.st_nlink, data)
        return ((st.st_ino, st.st_nlink, st.st_size, st.st_mtime_ns), tree,
                sorted(os.listdir(self.base)), os.path.lexists("/etc/vacate-escaped"))

    def check(self, *new_in_base: str) -> None:
        """Unchanged, apart from the names ``new_in_base`` (the --to directory) in ``base``."""
        passwd, tree, listing, escaped = self._state()
        assert passwd == self.before[0], "/etc/passwd changed"
        assert tree == self.before[1], "the sentinel directory changed"
        assert sorted(set(listing) - set(new_in_base)) == sorted(
            set(self.before[2]) - set(new_in_base)), "something was written beside --to"
        assert not escaped


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def assert_inside_only(dest: str) -> None:
    """Nothing under ``dest`` is a hardlink to /etc/passwd, and no symlink under it was
    written through (its target outside is unchanged: checked by Outside)."""
    pw = os.stat("/etc/passwd")
    for d, dirs, files in os.walk(dest):
        for n in dirs + files:
            st = os.lstat(os.path.join(d, n))
            assert (st.st_dev, st.st_ino) != (pw.st_dev, pw.st_ino), os.path.join(d, n)
