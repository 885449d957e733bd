"""Bounded reading for the recognisers: a few bytes from the head of a regular file, small
JSON and text files under a size cap, never through a symlink unless it stays inside a given
root. Every refusal or parse failure becomes a Problem; nothing here raises."""

from __future__ import annotations

import errno
import os
import stat as S
import time
from bisect import bisect_left
from typing import Any

from vacate.observing.fsio import open_noatime  # (recognisers import it from here too)
from vacate.observing.human import human_bytes
from vacate.observing.model.common import Problem
from vacate.observing.recognise.formats import loads

JSON_CAP = 1024 * 1024          # config.json, hf_quant_config.json, trainer_state.json, ...
INDEX_CAP = 64 * 1024 * 1024    # model.safetensors.index.json of the biggest models: a few MB
TEXT_CAP = 1024 * 1024




class Reader:
    """Reads on behalf of one top-level item; collects the problems met and keeps the time
    spent under ``budget_s`` (after that, ``expired`` is True and callers stop looking)."""

    def __init__(self, budget_s: float = 10.0, entries: int = 20_000):
        self.problems: list[Problem] = []
        self.deadline = time.monotonic() + budget_s
        self.bytes_read = 0
        self.entries_left = entries     # directory entries the listings may still stat
        self._dirs: dict[str, str] = {}  # directory -> its realpath
        self._real: dict[str, str] = {}  # path -> its realpath (a link's target is a disk read)
        # directory -> (subdirectory names, {name: FileInfo}) as listed (base.list_dir): what
        # the listing said of an entry saves asking the disk again (is it a link? a regular
        # file? how big?)
        self._listed: dict[str, tuple] = {}

    def listed(self, path: str, dirs: tuple[str, ...], files: dict) -> None:
        """Remember the listing of the directory ``path``: ``dirs`` its subdirectories'
        names, sorted; ``files`` the rest by name (see :meth:`entry`)."""
        self._listed[path] = (dirs, files)

    def entry(self, path: str):
        """What a listing of its directory said of the non-directory ``path`` (a
        ``base.FileInfo``), or None when it was not listed."""
        head, _, name = path.rpartition("/")
        lst = self._listed.get(head or "/")
        return None if lst is None else lst[1].get(name)

    @property
    def expired(self) -> bool:
        return self.entries_left <= 0 or self.timed_out

    @property
    def timed_out(self) -> bool:
        return time.monotonic() > self.deadline

    def warn(self, code: str, path: str, message: str) -> None:
        self.problems.append(Problem(code, f"{path}: {message}", path))

    def lstat(self, path: str) -> os.stat_result | None:
        try:
            return os.lstat(path)
        except OSError:
            return None

    def head(self, path: str, n: int, *, offset: int = 0, quiet: bool = False,
             within: str | None = None) -> bytes | None:
        """Up to ``n`` bytes from ``offset`` of a regular file. Symlinks are refused, except
        that with ``within`` a link whose target stays inside that directory is followed (the
        hub cache's snapshots point into ../../blobs)."""
        real = path
        if within is not None:
            real = self.realpath(path)
            root = self.realpath(within)
            if not (real == root or real.startswith(root.rstrip("/") + "/")):
                if not quiet:
                    self.warn("link-outside", path, "link points outside its repository;"
                              " not followed")
                return None
        # (``real`` is never a link: resolved above, or a link is refused)
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            # Never open what is not a regular file: a FIFO would block, a tape device rewind.
            # A listing that said so spares the lstat (the fstat below still checks).
            known = self.entry(real)
            if known is None or not known.regular:
                mode = os.lstat(real).st_mode
                if S.S_ISLNK(mode) and within is not None:
                    # resolved, and still a link: a loop (as following it would say)
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                if not S.S_ISREG(mode):
                    return None
            fd = open_noatime(real, flags)
        except OSError as e:
            if not quiet:
                self.warn("unreadable", path, e.strerror or str(e))
            return None
        try:
            if not S.S_ISREG(os.fstat(fd).st_mode):
                return None
            out = os.pread(fd, n, offset)
            self.bytes_read += len(out)
            return out
        except OSError as e:
            if not quiet:
                self.warn("unreadable", path, e.strerror or str(e))
            return None
        finally:
            os.close(fd)

    def realpath(self, path: str) -> str:
        """``os.path.realpath``, with the directories resolved once per reader: a hub cache
        resolves thousands of snapshot links in a few directories, and realpath lstats every
        component of every path."""
        real = self._real.get(path)
        if real is None:
            real = self._real[path] = self._resolve(path)
        return real

    def _resolve(self, path: str) -> str:
        for _ in range(40):                      # the kernel's limit on links followed
            head, _, name = path.rpartition("/")
            head = head or "/"
            d = self._dir_real(head)
            full = d + "/" + name if d != "/" else "/" + name
            known = self.entry(full)
            if known is not None and not known.is_link:
                return full                  # listed, and not a link
            try:
                target = os.readlink(full)
            except OSError:
                return full                  # not a link (or not there): as realpath says
            parts = target.split("/")
            up = 0
            while up < len(parts) and parts[up] == "..":
                up += 1
            if ".." in parts[up:]:
                # "a/../b": ".." after a name that may itself be a link; realpath knows
                return os.path.realpath(full)
            if target.startswith("/"):
                path = os.path.normpath(target)
                continue
            base = d                        # leading "..": up from a real directory
            for _ in range(up):
                base = base.rpartition("/")[0] or "/"
            rest = "/".join(p for p in parts[up:] if p and p != ".")
            path = base if not rest else (base + "/" + rest if base != "/" else "/" + rest)
        return os.path.realpath(path)            # a loop: realpath says what it makes of it

    def _dir_real(self, path: str) -> str:
        """The realpath of the directory ``path``, once: its parent's and its name when a
        listing of the parent said it is a directory (not a link), otherwise as
        ``os.path.realpath`` makes it."""
        real = self._dirs.get(path)
        if real is None:
            par, _, name = path.rpartition("/")
            par = par or "/"
            lst = self._listed.get(par)
            if lst is not None and _has(lst[0], name):
                up = self._dir_real(par)
                real = up + "/" + name if up != "/" else "/" + name
            else:
                real = os.path.realpath(path)
            self._dirs[path] = real
        return real

    def size(self, path: str, within: str | None = None) -> int | None:
        """The size of the regular file ``path`` (followed, with ``within``, as ``head``
        follows it), or None."""
        known = self.entry(self.realpath(path) if within is not None else path)
        if known is not None:
            return known.size if known.regular else None
        try:
            st = os.stat(path) if within is not None else os.lstat(path)
        except OSError:
            return None
        return st.st_size if S.S_ISREG(st.st_mode) else None

    def small(self, path: str, cap: int, *, within: str | None = None,
              what: str = "file") -> bytes | None:
        """The whole of a file expected to be small; None (with a warning) above ``cap``."""
        size = self.size(path, within)
        if size is None:
            if within is not None and os.path.islink(path) and not os.path.exists(path):
                self.warn("dangling-link", path, f"{what} links to a file that is not there")
            elif os.path.lexists(path) and (within is not None or not os.path.islink(path)):
                self.warn("not-regular-file", path, f"a {what} that is not a regular file;"
                          " not read")
            return None
        if size > cap:
            self.warn("oversized-file", path, f"{human_bytes(size)} is far more than a {what}"
                      f" holds (cap {human_bytes(cap)}); not read")
            return None
        # what the size says (and a byte more, to see it grew): asking for ``cap`` bytes would
        # have Python allocate that much for each read (a 64 MB cap: 65 us a read, not 2)
        data = self.head(path, size + 1, within=within)
        if data is not None and len(data) > size:
            data = self.head(path, cap + 1, within=within)          # it grew meanwhile
        return data

    def text(self, path: str, cap: int = TEXT_CAP, *, within: str | None = None,
             what: str = "file") -> str | None:
        data = self.small(path, cap, within=within, what=what)
        return None if data is None else data.decode("utf-8", "replace")

    def json(self, path: str, cap: int = JSON_CAP, *, within: str | None = None,
             what: str = "JSON file") -> Any:
        """The parsed JSON, or None (with a warning) when it is too large or not JSON."""
        data = self.small(path, cap, within=within, what=what)
        if data is None:
            return None
        try:
            return loads(data)
        except RecursionError:
            self.warn("malformed-file", path, f"{what} nests too deeply; ignored")
        except ValueError as e:
            msg = "a Git LFS pointer, not the file" if data.startswith(b"version https://git-lfs") \
                else f"not valid JSON ({str(e)[:80]})"
            self.warn("malformed-file", path, f"{what} is {msg}; ignored")
        return None


def _has(names: tuple[str, ...], name: str) -> bool:
    """``name in names`` for a sorted tuple (a listing's subdirectories: a hub's thousands of
    repos are asked about one by one)."""
    i = bisect_left(names, name)
    return i < len(names) and names[i] == name
