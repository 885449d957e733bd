"""The cheap first look at every process: which ones *may* use the volume. Standard library only.

``vacate check`` must answer faster than ``fuser -m``, so the pass over ``/proc`` is split in
two. This first look costs a handful of syscalls per process and little Python: link texts
are tested with one ``str.startswith`` against the volume's mountpoints, and the memory maps are tested for the volume's ``" MM:mm "`` device
token with a bytes ``in`` before any line is split. Kernel threads (no ``exe``, ``PF_KTHREAD``)
are dropped after one more read. A process is a *candidate* when anything it shows might be on
the volume, when it lives in another mount namespace (its paths mean nothing here), when a link
is a deleted file (no path to look up), or when anything could not be read; only candidates
get the full, careful read of :mod:`vacate.collectors.procs`, which decides.

With many processes and more than one CPU the pids are split between this process and one
forked child (:func:`probe_split`); the child sends its candidates back through a pipe as
text. A child that fails costs nothing but time: its share is probed here again.
"""

from __future__ import annotations

import os
import sys

PF_KTHREAD = 0x00200000
_FILE = os.O_RDONLY | os.O_CLOEXEC
_DELETED = " (deleted)"
_VANISHED = (FileNotFoundError, ProcessLookupError)
# Below this many processes a fork costs more than it saves.
SPLIT_MIN = 400


class Probe:
    """What the first look found: pids to read in full, mount namespace -> first pid seen in
    it (pids are probed in ascending order), and how many processes were read."""

    __slots__ = ("candidates", "count", "namespaces")

    def __init__(self) -> None:
        self.candidates: list[int] = []
        self.namespaces: dict[str, int] = {}
        self.count = 0


def read_all(path: str) -> bytes:
    """A whole (small, /proc) file with raw os calls: no buffered file object."""
    f = os.open(path, _FILE)
    try:
        data = os.read(f, 262144)      # the kernel hands out about a page per read
        while True:
            more = os.read(f, 262144)
            if not more:
                return data
            data += more
    finally:
        os.close(f)


def _kthread(base: str) -> bool:
    stat = read_all(base + "stat")
    fields = stat[stat.rfind(b")") + 2:].split()
    return len(fields) > 6 and bool(int(fields[6]) & PF_KTHREAD)


def _no_exe(base: str) -> bool:
    try:
        os.readlink(base + "exe")
    except FileNotFoundError:
        return True
    return False


def _looks(base: str, hot: tuple[str, ...], tokens: tuple[bytes, ...]) -> bool | None:
    """True: may use the volume; False: does not; None: a kernel thread."""
    rl = os.readlink
    try:
        exe = rl(base + "exe")
    except FileNotFoundError:
        if _kthread(base):
            return None
        exe = ""                       # a zombie, or a process giving up its memory
    if exe.startswith(hot) or exe.endswith(_DELETED):
        return True
    for link in ("cwd", "root"):
        try:
            t = rl(base + link)
        except FileNotFoundError:
            continue
        if t.startswith(hot) or t.endswith(_DELETED):
            return True
    fdd = base + "fd/"
    for fd in os.listdir(fdd):
        try:
            t = rl(fdd + fd)
        except FileNotFoundError:
            continue                   # closed meanwhile
        if t[:1] == "/" and (t.startswith(hot) or t.endswith(_DELETED)):
            return True
    data = read_all(base + "maps")
    return any(t in data for t in tokens)


def probe(proc: str, pids: list[int], hot: tuple[str, ...], tokens: tuple[bytes, ...],
          self_ns: str | None, live: bool) -> Probe:
    """First look at ``pids`` under ``proc``. ``hot``: the volume's mountpoints in our mount
    namespace; ``tokens``: its ``" MM:mm "`` as maps print them; ``self_ns``: our mount
    namespace (``live`` only: a captured tree has no namespaces)."""
    out = Probe()
    cands = out.candidates
    nsmap = out.namespaces
    count = 0
    for pid in pids:
        base = f"{proc}/{pid}/"
        try:
            if live:
                ns = os.readlink(base + "ns/mnt")
                if ns not in nsmap:
                    nsmap[ns] = pid
                if ns != self_ns:
                    # another mount namespace: read in full (unless a kernel thread)
                    count += 1
                    if not _no_exe(base) or not _kthread(base):
                        cands.append(pid)
                    continue
            hit = _looks(base, hot, tokens)
        except _VANISHED:
            continue                           # it exited while we looked
        except OSError:
            cands.append(pid)                  # the full read reports what went wrong
            continue
        count += 1
        if hit:
            cands.append(pid)
    out.count = count
    return out


def _encode(p: Probe) -> bytes:
    lines = [f"n {p.count}"]
    lines += [f"c {pid}" for pid in p.candidates]
    lines += [f"s {pid} {ns}" for ns, pid in p.namespaces.items()]
    return "\n".join(lines).encode("utf-8", "surrogateescape")


def _decode(data: bytes) -> Probe:
    p = Probe()
    for line in data.decode("utf-8", "surrogateescape").split("\n"):
        kind, _, rest = line.partition(" ")
        if kind == "n":
            p.count = int(rest)
        elif kind == "c":
            p.candidates.append(int(rest))
        elif kind == "s":
            pid, _, ns = rest.partition(" ")
            p.namespaces[ns] = int(pid)
        else:
            raise ValueError(f"bad probe line: {line!r}")
    return p


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _threaded() -> bool:
    """Other threads running here (a test's helper, an embedding program): no fork then."""
    threading = sys.modules.get("threading")
    return threading is not None and threading.active_count() > 1


def probe_split(proc: str, pids: list[int], hot: tuple[str, ...], tokens: tuple[bytes, ...],
                self_ns: str | None, live: bool) -> Probe:
    """:func:`probe` over ``pids`` (ascending), with the upper half probed by a forked child
    when there are many processes, more than one CPU and no other thread here."""
    if len(pids) < SPLIT_MIN or _cpus() < 2 or not hasattr(os, "fork") or _threaded():
        return probe(proc, pids, hot, tokens, self_ns, live)
    half = len(pids) // 2
    mine, theirs = pids[:half], pids[half:]
    r, w = os.pipe()
    child = os.fork()
    if child == 0:                                     # the child: probe, report, leave
        code = 1
        try:
            os.close(r)
            data = _encode(probe(proc, theirs, hot, tokens, self_ns, live))
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    try:
        first = probe(proc, mine, hot, tokens, self_ns, live)
        chunks = []
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
    finally:
        os.close(r)
        _, status = os.waitpid(child, 0)
    try:
        if not os.waitstatus_to_exitcode(status) == 0:
            raise ValueError("probe child failed")
        second = _decode(b"".join(chunks))
    except ValueError:
        second = probe(proc, theirs, hot, tokens, self_ns, live)
    for ns, pid in second.namespaces.items():
        first.namespaces.setdefault(ns, pid)       # ours are the lower pids: seen first
    first.candidates += second.candidates
    first.count += second.count
    return first
