"""The cheap first look at every process: which ones *may* use the volume. Standard library only.

``vacate check`` should answer as fast as ``fuser -m``, so the pass over ``/proc`` is split in
two. This first look costs a handful of syscalls per process and little Python: link texts
are tested with one ``str.startswith`` against the volume's mountpoints, and the memory maps
for the volume's ``" MM:mm "`` device token with a bytes ``in`` before any line is split.
Kernel threads (no ``exe``, ``PF_KTHREAD``) are dropped after one more read. A process is a
*candidate* when anything it shows might be on the volume, when it lives in another mount
namespace (its paths mean nothing here), when a link is a deleted file (no path to look up),
or when anything could not be read; only candidates get the full, careful read of
:mod:`vacate.observing.collectors.procs`, which decides.

In Python, plain paths are used: opening ``/proc/PID`` once and reading relative to it
(``dir_fd``) is no faster on 2 cores with ~1,100 processes (kernel path lookup is cheap;
``listdir`` of an fd costs extra syscalls); the syscalls themselves are the floor.

Where the optional C module ``_fastproc`` was built (``pip install`` with a compiler), the
same look runs in C on threads of its own, without the GIL: one per CPU (up to 4) when there
are many processes. Its rules are :func:`probe`'s, line for line; the tests compare the two
over the real /proc. Without it, with many processes and more than one CPU the pids are split
between this process and one forked child (:func:`probe_split`); the child sends its
candidates back through a pipe as text. Either way :class:`Early` starts the look before the
target is even resolved, so that it runs while the rest of vacate is imported. A child that
fails costs only time: its share is probed here again.
"""

from __future__ import annotations

import os

from vacate.observing import native
from vacate.observing.collectors import forking, guarded
from vacate.observing.parsers.paths import is_under, unescape

FASTPROC_VERSION = 1      # the VERSION of _fastproc.c this code calls
# the first look in C (see _fastproc.c); None where it was not built (no compiler at install
# time, or only the collectors were sent)
_fastproc = native.load("vacate.observing.collectors._fastproc", FASTPROC_VERSION)

PF_KTHREAD = 0x00200000
_FILE = os.O_RDONLY | os.O_CLOEXEC
_DELETED = " (deleted)"
_VANISHED = (FileNotFoundError, ProcessLookupError)
# Below this many processes a fork (or a second thread) costs more than it saves.
SPLIT_MIN = 400
MAX_THREADS = 4


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


def stat_fields(stat: bytes) -> list[bytes]:
    """The fields of /proc/PID/stat after the name, from the state on (the name is taken up
    to the last ")": it may hold spaces and parentheses)."""
    return stat[stat.rfind(b")") + 2:].split()


EXITED = (b"Z", b"X", b"x")     # states of a process that exited (zombie, dead)


def _kthread(base: str) -> bool:
    fields = stat_fields(read_all(base + "stat"))
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


def _fork_probe(proc: str, pids: list[int], hot: tuple[str, ...], tokens: tuple[bytes, ...],
                self_ns: str | None, live: bool) -> tuple[int, int]:
    """A forked child probing ``pids``: (its pid, the pipe its report comes through)."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:                                     # the child: probe, report, leave
        code = 1
        try:
            os.close(r)
            guarded.write_all(w, _encode(probe(proc, pids, hot, tokens, self_ns, live)))
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return child, r


def _join(child: int, r: int) -> Probe | None:
    """The child's report; None when it failed."""
    data = guarded.read_report(child, r)
    if data is None:
        return None
    try:
        return _decode(data)
    except ValueError:
        return None


def _merge(first: Probe, second: Probe) -> Probe:
    """``second`` probed higher pids than ``first``."""
    for ns, pid in second.namespaces.items():
        first.namespaces.setdefault(ns, pid)       # the lower pids were seen first
    first.candidates += second.candidates
    first.count += second.count
    return first


def _threads(n: int) -> int:
    """Threads for the C look over ``n`` processes."""
    return min(forking.cpus(), MAX_THREADS) if n >= SPLIT_MIN else 1


def _c_start(proc: str, pids: list[int], hot: tuple[str, ...], tokens: tuple[bytes, ...],
             self_ns: str | None, live: bool, threads: int):
    """The C look over ``pids``, already running on ``threads`` threads (0: none);
    ``.result()`` looks at what they have not yet taken, in the calling thread, and waits for
    them."""
    return _fastproc.probe(os.fsencode(proc), pids, tuple(os.fsencode(h) for h in hot),
                           tokens, None if self_ns is None else os.fsencode(self_ns), live,
                           threads)


def _c_result(job) -> Probe:
    cands, namespaces, count = job.result()
    out = Probe()
    out.candidates = sorted(cands)       # the threads took the pids in chunks, in any order
    for ns, pid in sorted(namespaces, key=lambda nv: nv[1]):
        out.namespaces.setdefault(os.fsdecode(ns), pid)   # the lowest pid of each
    out.count = count
    return out


def _can_fork(n: int) -> bool:
    return n >= SPLIT_MIN and forking.can_fork()


def probe_split(proc: str, pids: list[int], hot: tuple[str, ...], tokens: tuple[bytes, ...],
                self_ns: str | None, live: bool) -> Probe:
    """:func:`probe` over ``pids`` (ascending): in C where it was built, else with the upper
    half probed by a forked child when there are many processes, more than one CPU and no
    other thread here."""
    if _fastproc is not None:         # this thread looks too: one thread fewer
        return _c_result(_c_start(proc, pids, hot, tokens, self_ns, live,
                                  _threads(len(pids)) - 1))
    if not _can_fork(len(pids)):
        return probe(proc, pids, hot, tokens, self_ns, live)
    half = len(pids) // 2
    args = (hot, tokens, self_ns, live)
    child, r = _fork_probe(proc, pids[half:], *args)
    try:
        first = probe(proc, pids[:half], *args)
    finally:
        second = _join(child, r)
    if second is None:                             # the child failed: its share again
        second = probe(proc, pids[half:], *args)
    return _merge(first, second)


# -- started early: the first look overlaps the interpreter's imports --------------------------
def volume_key(path: str, proc: str = "/proc") -> tuple[frozenset[str], tuple[bytes, ...]]:
    """(the mountpoints of ``path``'s filesystem in our mount namespace, its maps token),
    from our mountinfo without the full parser: what :func:`probe` needs, known before the
    target is resolved. :mod:`vacate.observing.collectors.procs` compares it with the resolved target's
    and uses an early probe only when they agree."""
    rows = []
    risky = []
    for line in read_all(f"{proc}/self/mountinfo").decode("utf-8", "surrogateescape").split("\n"):
        f = line.split(" ")
        if len(f) > 4:
            rows.append((f[2], unescape(f[4])))
            fstype = line.partition(" - ")[2].partition(" ")[0]
            if guarded.may_hang(fstype):
                risky.append(rows[-1][1])
    # a path on a filesystem that may not answer (FUSE, NFS): no guess (guarded.Risky)
    real = guarded.realpath(os.path.abspath(path), tuple(risky))
    os.stat(real)                      # a path that is not there: no guess (OSError)
    best = None
    for dev, mp in rows:
        if is_under(real, mp) and (best is None or len(mp) >= len(best[1])):
            best = (dev, mp)
    if best is None:
        raise ValueError(f"no mount holds {real}")
    major, minor = (int(x) for x in best[0].split(":"))
    return (frozenset(mp for dev, mp in rows if dev == best[0]),
            (f" {major:02x}:{minor:02x} ".encode(),))


class Early:
    """A first look started before the heavy imports: the whole look in C on threads of its
    own, or (without the C module) a forked child probing the upper share of the pids while
    :meth:`finish` probes the rest here."""

    __slots__ = ("child", "job", "key", "mine", "path", "pipe", "proc", "self_ns", "theirs")

    def __init__(self, proc: str, key, self_ns: str, mine: list[int], theirs: list[int],
                 child: int = -1, pipe: int = -1, path: str = "", job=None):
        self.proc, self.key, self.self_ns = proc, key, self_ns
        self.mine, self.theirs, self.child, self.pipe = mine, theirs, child, pipe
        self.path, self.job = path, job

    @classmethod
    def start(cls, path: str, proc: str = "/proc", share: float = 0.7) -> Early | None:
        """Start the look, or None where a forked child would not pay (few processes, one
        CPU, threads) or anything is odd (the normal pass then runs as usual)."""
        try:
            key = volume_key(path, proc)
            self_ns = os.readlink(f"{proc}/self/ns/mnt")
            me = os.getpid()
            pids = sorted(int(n) for n in os.listdir(proc) if n.isdigit() and int(n) != me)
        except (OSError, ValueError, guarded.Risky):
            return None
        if _fastproc is not None:
            # this thread goes on importing meanwhile (a CPU for itself), then looks too
            threads = max(1, _threads(len(pids)) - 1)
            job = _c_start(proc, pids, tuple(key[0]), key[1], self_ns, True, threads)
            return cls(proc, key, self_ns, pids, [], path=path, job=job)
        if not _can_fork(len(pids)):
            return None
        cut = len(pids) - int(len(pids) * share)
        mine, theirs = pids[:cut], pids[cut:]
        child, r = _fork_probe(proc, theirs, tuple(key[0]), key[1], self_ns, True)
        return cls(proc, key, self_ns, mine, theirs, child, r, path)

    def finish(self, hot: frozenset[str], tokens: tuple[bytes, ...],
               self_ns: str | None) -> tuple[list[int], Probe] | None:
        """(every pid looked at, the first look) when the resolved target agrees with the
        guess made at the start; None otherwise (the look is ended; probe again)."""
        if self.child < 0 and self.job is None:
            return None
        if (hot, tokens, self_ns) != (self.key[0], self.key[1], self.self_ns):
            self.close()
            return None
        if self.job is not None:
            job, self.job = self.job, None
            return self.mine, _c_result(job)
        args = (tuple(hot), tokens, self_ns, True)
        child, self.child = self.child, -1
        try:
            first = probe(self.proc, self.mine, *args)
        finally:
            second = _join(child, self.pipe)
        if second is None:
            second = probe(self.proc, self.theirs, *args)
        return self.mine + self.theirs, _merge(first, second)

    def close(self) -> None:
        """End a look that was never joined: wait for the C threads (they finish their pass,
        tens of milliseconds) or stop and reap the child."""
        if self.job is not None:
            job, self.job = self.job, None
            job.result()
            return
        if self.child < 0:
            return
        child, self.child = self.child, -1
        os.close(self.pipe)
        try:
            os.kill(child, 9)
        except ProcessLookupError:
            pass
        os.waitpid(child, 0)


# -- started by the entry point, before the interpreter imports the CLI ------------------------
_pending: Early | None = None


def start_for_argv(argv: list[str]) -> None:
    """``vacate check [flags] PATH``: fork the first look for PATH now (the console-script
    entry calls this before importing argparse and the rest). A wrong guess costs nothing:
    the result is used only for the same path and the same volume."""
    global _pending
    close_pending()
    if argv[:1] != ["check"]:
        return
    rest = argv[1:]
    if any(a.startswith(("--host", "--ct", "--from")) for a in rest):
        return                  # another machine, a container's view, or a saved look
    if "--" in rest:
        rest = rest[rest.index("--") + 1:]
    paths = [a for a in rest if not a.startswith("-")]
    if len(paths) == 1:
        _pending = Early.start(paths[0], share=0.85)


def take_pending(path: str) -> Early | None:
    """The first look started for ``path`` by :func:`start_for_argv`, handed over once."""
    global _pending
    early, _pending = _pending, None
    if early is not None and early.path != path:
        early.close()
        return None
    return early


def close_pending() -> None:
    """Reap a first look nobody took (``--help``, an error before the pass)."""
    global _pending
    early, _pending = _pending, None
    if early is not None:
        early.close()
