"""The sums files checked against the manifest: ``PARTS.SHA256SUMS`` and ``SHA256SUMS``,
streamed. Each is first compared with what it should hold, byte for byte; where it differs it
is read again line by line, each line looked up (a part by its name, a file in the catalog)
and marked, so that a line naming anything else, a name listed twice and a name left out are
each named, within ``MAX_SUMS_FINDINGS``."""

from __future__ import annotations

from vacate.archive import manifest as mf
from vacate.archive import sums
from vacate.archive.catalog import Catalog
from vacate.archive.findings import Finding
from vacate.archive.manifest import shown
from vacate.archive.reader import lines, open_part
from vacate.archive.target import Target
from vacate.observing import fsio

SUMS_SLACK = 1 << 20        # read this much of a sums file beyond what the manifest gives
SUMS_LINE = 2 * mf.MAX_PATH + 128   # longer than any line a sums file of vacate's holds
MAX_SUMS_FINDINGS = 50      # lines of one sums file named one by one


class PartSums:
    """What ``PARTS.SHA256SUMS`` should hold (a few lines: in memory)."""

    def __init__(self, parts):
        self.want = mf.part_sums_file(parts)
        self.shas = {p.name.encode(): p.sha256 for p in parts}
        self.met: set[bytes] = set()

    def chunks(self):
        yield self.want

    def size(self) -> int:
        return len(self.want)

    def mark(self, name: bytes) -> bool:
        new = name not in self.met
        self.met.add(name)
        return new

    def sha(self, name: bytes) -> str | None:
        return self.shas.get(name)

    def unmet(self):
        return (n for n in self.shas if n not in self.met)

    def close(self) -> None:
        pass


class FileSums:
    """What ``SHA256SUMS`` should hold, from the catalog: its lines in order, a name's
    sha256, and (where the file differs) which names it listed, in a file of marks."""

    def __init__(self, m: Catalog):
        self.m = m
        self.marks = None

    def chunks(self):
        batch: list[bytes] = []
        for path, sha in self.m.summed():
            batch.append(sums.line(sha, path))
            if len(batch) >= 4096:
                yield b"".join(batch)
                batch = []
        yield b"".join(batch)

    def size(self) -> int:
        return self.m.summed_size()

    def sha(self, name: bytes) -> str | None:
        e = self.m.get(name)
        return e.sha256 if e is not None and e.type in ("file", "hardlink") else None

    def mark(self, name: bytes) -> bool:
        if self.marks is None:
            self.marks = self.m.marks()
        return self.marks.add(name)

    def unmet(self):
        if self.marks is None:
            self.marks = self.m.marks()
        return self.marks.unmet(summed=True)

    def close(self) -> None:
        if self.marks is not None:
            self.marks.close()


def _same(f, chunks) -> bool:
    """Whether ``f`` holds exactly the concatenation of ``chunks`` (both streamed)."""
    for want in chunks:
        got = b""
        while len(got) < len(want):
            b = f.read(len(want) - len(got))
            if not b:
                return False
            got += b
        if got != want:
            return False
    return not f.read(1)


def check_sums(target: Target, fname: str, expected, what: str,
               findings: list[Finding]) -> None:
    """Every line of the sums file ``fname`` names one of ``expected``'s names (its
    ``sha(name)``), once, with its sha256, and every one of them is listed: a line naming
    anything else (stock ``sha256sum -c`` would read it, wherever it points) is damage. The
    file is streamed: compared with what it should hold, then, where it differs, read again
    line by line."""
    try:
        size = expected.size()
        with open_part(target, fname, size + SUMS_SLACK) as f:
            if _same(f, expected.chunks()):
                return
        with open_part(target, fname, size + SUMS_SLACK) as f:
            _sums_lines(f, fname, expected, what, findings)
    except (FileNotFoundError, KeyError):
        findings.append(Finding("sums-mismatch", f"{fname} is missing"))
    except fsio.NotRegular as e:
        findings.append(Finding("sums-mismatch", f"{fname} is a {e.what}, not a regular "
                                "file; not read"))
    except OSError as e:
        findings.append(Finding("sums-unreadable", f"{fname}: could not read it "
                                f"({e.strerror or e})"))
    finally:
        expected.close()


def _sums_lines(f, fname: str, expected, what: str, findings: list[Finding]) -> None:
    bad: list[str] = []
    nbad = 0
    read = 0
    held = None                       # the previous line: the last one may be cut short

    def one(n: int, raw) -> None:
        nonlocal nbad
        why = _sums_line(n, raw, fname, expected, what)
        if why:
            nbad += 1
            if len(bad) < MAX_SUMS_FINDINGS:
                bad.append(why)

    ended = []
    for n, raw in lines(f, SUMS_LINE, ended=ended):
        read += raw if isinstance(raw, int) else len(raw) + 1
        if held is not None:
            one(*held)
        held = (n, raw)
    more = f.more()
    if held is not None and not (more and ended == [False]):
        one(*held)                    # (cut by the bound: said below)
    if ended == [False] and not more:
        bad.insert(0, f"{fname} does not end with a newline")
        nbad += 1
    missing = 0
    for name in expected.unmet():
        missing += 1
        if missing <= MAX_SUMS_FINDINGS:
            nbad += 1
            bad.append(f"{fname} does not list {shown(name)}")
    if missing > MAX_SUMS_FINDINGS:
        nbad += 1
        bad.append(f"{fname} leaves out {missing - MAX_SUMS_FINDINGS:,} more")
    if more:
        nbad += 1
        bad.append(f"{fname} is longer than the manifest accounts for (read "
                   f"{read:,} bytes of it)")
    for msg in bad[:MAX_SUMS_FINDINGS]:
        findings.append(Finding("sums-mismatch", msg))
    if nbad > MAX_SUMS_FINDINGS:
        findings.append(Finding("sums-mismatch", f"{fname}: {nbad - MAX_SUMS_FINDINGS:,} "
                                "more problems"))


def _sums_line(n: int, raw, fname: str, expected, what: str) -> str | None:
    """What is wrong with line ``n`` of a sums file (None: nothing)."""
    if isinstance(raw, int):
        return f"{fname} line {n} is not a sha256sum line: {raw:,} bytes long"
    try:
        digest, name = sums.parse_line(raw)
    except ValueError:
        return f"{fname} line {n} is not a sha256sum line: {shown(raw, 80)}"
    want = expected.sha(name)
    if want is None:
        expected.mark(name)
        return f"{fname} line {n} names {shown(name)}, which is not {what}"
    if not expected.mark(name):
        return f"{fname} line {n} names {shown(name)} a second time"
    if digest != want:
        return f"{fname} disagrees with the manifest about {shown(name)}"
    return None
