"""Issue 31: every command, on every argument that names a file that is missing, unreadable,
empty or of the wrong kind, says so in one line naming it and exits 2; never a traceback
(``vacate apply MISSING --yes`` ended in FileNotFoundError, exit 1). The real ``vacate``
command, run as a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from harness.paths import STORY

from vacate.observing.errors import EXIT_ERROR

NOBODY = 65534

# (command line with {} for the file read; what it takes)
READS = [
    ("scan --from {}", "observation"),
    ("check --from {}", "observation"),
    ("check --inventory {} /data", "inventory"),
    ("plan --from {}", "plan"),
    ("apply {}", "plan"),
    ("apply {} --yes", "plan"),
    ("apply {} --dry-run", "plan"),
    ("apply {} --undo", "plan"),
    ("undo {}", "plan"),
    ("report {}", "observation"),
    ("verify {}", "archive"),
    ("restore {} --to OUT", "archive"),
    ("browse {}", "browsed"),
    ("archive {} --to OUT", "source"),
]
# (command line with {} for the file written)
WRITES = [
    "observe DIR -o {}",
    "plan /data -o {}",
    "scan DIR --ncdu {}",
    "report " + STORY + " --html {}",
    "payload -o {}",
    "browse DIR -o {}",
]
# what each kind of file a command reads can be given wrong; an archive and a source to
# archive are directories, so for them a file is the wrong kind and an empty one is fine
KINDS = {
    "observation": ("missing", "unreadable", "empty", "directory", "garbage", "a-plan-file"),
    "plan": ("missing", "unreadable", "empty", "directory", "garbage", "an-observation"),
    "inventory": ("missing", "unreadable", "empty"),
    "browsed": ("missing", "unreadable", "empty", "garbage", "a-plan-file"),   # or a directory
    "archive": ("missing", "unreadable", "a-file", "empty-directory"),
    "source": ("missing",),
}


@pytest.fixture(scope="module")
def place():
    d = tempfile.mkdtemp(prefix="vacate-bad-")
    os.chmod(d, 0o755)                   # the unreadable cases run as nobody when root
    for name, text in (("empty", ""), ("garbage", "not json, not anything\n"),
                       ("unreadable", "{}\n")):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    os.chmod(os.path.join(d, "unreadable"), 0)
    os.mkdir(os.path.join(d, "unreadable-dir"), 0)
    os.mkdir(os.path.join(d, "directory"))
    os.mkdir(os.path.join(d, "empty-directory"))
    shutil.copy(STORY, os.path.join(d, "an-observation"))
    with open(os.path.join(d, "a-plan-file"), "w") as f:
        f.write('{"schema": "vacate.plan/1", "items": []}\n')
    with open(os.path.join(d, "a-file"), "w") as f:
        f.write("x\n")
    os.chmod(os.path.join(d, "an-observation"), 0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def vacate(line: str, as_nobody: bool = False) -> subprocess.CompletedProcess:
    pre = []
    if as_nobody and os.geteuid() == 0:
        pre = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return subprocess.run([*pre, sys.executable, "-m", "vacate", *line.split()],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, COLUMNS="200"), check=False)


def said_clearly(r, name: str) -> None:
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == EXIT_ERROR, (r.returncode, r.stdout[-2000:], r.stderr)
    assert name in r.stderr, r.stderr            # the file is named
    assert len(r.stderr.strip().splitlines()) <= 4, r.stderr


CASES = [(line, kind) for line, what in READS for kind in KINDS[what]]


@pytest.mark.slow
@pytest.mark.parametrize(("line", "kind"), CASES, ids=[f"{ln.split()[0]}:{ln}:{k}"
                                                         for ln, k in CASES])
def test_a_bad_file_to_read_is_one_line_and_exit_2(place, line, kind):
    name = "unreadable-dir" if kind == "unreadable" and "archive" in (
        dict(READS)[line],) else kind
    path = os.path.join(place, name)
    out = os.path.join(place, "out-" + name)
    r = vacate(line.format(path).replace("OUT", out), as_nobody=kind == "unreadable")
    said_clearly(r, name)


@pytest.mark.parametrize("line", WRITES, ids=[ln.split()[0] + ":" + ln for ln in WRITES])
@pytest.mark.parametrize("kind", ["directory", "no-such-dir/file"])
def test_a_file_that_cannot_be_written_is_one_line_and_exit_2(place, line, kind):
    path = os.path.join(place, kind)
    r = vacate(line.format(path).replace("DIR", os.path.join(place, "empty-directory")))
    said_clearly(r, kind.split("/")[0])
