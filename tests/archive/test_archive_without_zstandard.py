"""Archives on a host whose python3 has no python-zstandard (a far host's): written, verified
and restored through the ``zstd`` command, by CPython 3.8, in the same format (stock ``zstd``
and ``tar`` restore it; an archive made either way verifies and restores the other way); with
no zstd at all, a clear error before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from harness.archives import (
    make_awkward_tree,
    needs_tools,
    sha256sum_check,
    snapshot,
    snapshot_diff,
    stock_restore,
)
from harness.paths import SRC

from vacate.archive import compress
from vacate.archive.restore import restore
from vacate.archive.target import open_target
from vacate.archive.verify import verify
from vacate.archive.writer import archive, exit_code

pytestmark = needs_tools("zstd", "tar", "sha256sum")

PY38 = os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python3")
BLOCK = "import sys; sys.modules['zstandard'] = None\n"   # as if it were not installed

# archive (when asked), verify against the source, restore everything: what each said
STEPS = BLOCK + """
import json
from vacate.archive import compress
from vacate.archive.restore import restore
from vacate.archive.target import open_target
from vacate.archive.verify import verify
from vacate.archive.writer import archive, exit_code
src, loc, out, make = sys.argv[1:5]
assert compress.library() is None and compress.use_process()
doc = {"python": list(sys.version_info[:2])}
t = open_target(loc)
if make == "make":
    r = archive([src], t, "src", part_size=256 << 10)
    doc["archive"] = [exit_code(r), len(r.parts)]
v = verify(t, against=[src])
doc["verify"] = [v.exit_code, v.files_checked, [f.message for f in v.findings]]
x = restore(t, out, preserve_special=True)
doc["restore"] = [x.exit_code, x.restored, [f.message for f in x.findings + x.refused]]
doc["zstandard"] = "zstandard" in sys.modules and sys.modules["zstandard"] is not None
print(json.dumps(doc))
"""


def _far(src: str, loc: str, out: str, make: bool) -> dict:
    """The steps in a CPython 3.8 child without python-zstandard (as on a far host)."""
    r = subprocess.run([PY38, "-c", STEPS, src, loc, out, "make" if make else "-"],
                       capture_output=True, text=True, timeout=300, check=False,
                       env={**os.environ, "PYTHONPATH": os.path.abspath(SRC)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


needs_38 = pytest.mark.skipif(not os.access(PY38, os.X_OK), reason="needs CPython 3.8")


@pytest.mark.slow
@needs_38
def test_python38_without_zstandard_archives_verifies_and_restores_as_stock_tools_do(tmp_path):
    """On 3.8 without the library: archive, verify --against, restore; the same archive
    restored by ``zstd -dc | tar -x`` is the same tree, and ``sha256sum -c`` passes."""
    src = make_awkward_tree(str(tmp_path), big_mb=2)
    before = snapshot(src)
    loc = str(tmp_path / "b" / "src")
    doc = _far(src, loc, str(tmp_path / "out"), make=True)
    assert doc["python"] == [3, 8] and not doc["zstandard"]
    assert doc["archive"][0] == 0 and doc["archive"][1] > 1, doc
    assert doc["verify"][0] == 0 and doc["verify"][1] > 40, doc
    assert doc["restore"][0] == 0, doc
    assert snapshot_diff(before, snapshot(str(tmp_path / "out" / "src"))) == []
    stock = str(tmp_path / "stock")
    stock_restore(loc, stock)
    assert sha256sum_check(loc, stock).returncode == 0
    assert snapshot_diff(before, snapshot(os.path.join(stock, "src"))) == []
    with open(os.path.join(loc, "README")) as f:
        assert 'zstd -dc "$p" | tar -xpf - -C OUT' in f.read()


@pytest.mark.slow
@needs_38
def test_an_archive_made_either_way_verifies_and_restores_the_other_way(tmp_path):
    """One archive made with python-zstandard (raw blocks for incompressible data, frames
    for the rest), one with the zstd command (3.8, no library): each is verified and
    restored by both code paths, and every restore is the source."""
    src = make_awkward_tree(str(tmp_path), big_mb=2)
    before = snapshot(src)
    assert compress.library() is not None
    lib_loc = str(tmp_path / "lib" / "src")
    r = archive([src], open_target(lib_loc), "src", part_size=256 << 10)
    assert exit_code(r) == 0
    cmd_loc = str(tmp_path / "cmd" / "src")
    made = _far(src, cmd_loc, str(tmp_path / "cmd-out"), make=True)
    assert made["archive"][0] == 0

    far = _far(src, lib_loc, str(tmp_path / "lib-out-far"), make=False)
    assert far["verify"][0] == 0 and far["restore"][0] == 0, far
    v = verify(open_target(cmd_loc), against=[src])
    assert v.exit_code == 0 and v.files_checked == made["verify"][1], v.findings
    x = restore(open_target(cmd_loc), str(tmp_path / "cmd-out-lib"), preserve_special=True)
    assert x.exit_code == 0, x.findings
    for out in ("cmd-out", "lib-out-far", "cmd-out-lib"):
        assert snapshot_diff(before, snapshot(str(tmp_path / out / "src"))) == [], out


def test_a_damaged_part_is_named_corrupt_by_the_zstd_command_path(tmp_path, monkeypatch):
    """Read through the zstd command, a part with a flipped byte is a corrupt part, named."""
    src = make_awkward_tree(str(tmp_path), big_mb=1)
    loc = str(tmp_path / "b" / "src")
    assert exit_code(archive([src], open_target(loc), "src")) == 0
    part = os.path.join(loc, "part-000001.tar.zst")
    with open(part, "r+b") as f:
        f.seek(os.path.getsize(part) // 2)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))
    monkeypatch.setenv("VACATE_ZSTD", "process")
    v = verify(open_target(loc))
    assert v.exit_code == 1
    assert {f.code for f in v.findings} & {"part-corrupt", "part-checksum", "file-checksum"}
    assert any(f.part == "part-000001.tar.zst" for f in v.findings)


# the real command line, without the library and without zstd on PATH
CLI = BLOCK + "import runpy; sys.argv[0] = 'vacate'; runpy.run_module('vacate', " \
    "run_name='__main__')\n"


def _bare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True,
                          check=False,
                          timeout=120, env={**os.environ, "PATH": "/nonexistent",
                                            "PYTHONPATH": os.pathsep.join(sys.path)})


def test_no_zstd_at_all_is_a_clear_error_before_anything_is_written(tmp_path):
    """archive, verify and restore each exit 2 naming the package to install; the archive's
    destination and the restore directory are never created."""
    src = make_awkward_tree(str(tmp_path), big_mb=1)
    dest = tmp_path / "dest"
    r = _bare("archive", src, "--to", str(dest))
    assert r.returncode == 2, r.stderr
    assert "install" in r.stderr and "zstd" in r.stderr
    assert not dest.exists()

    loc = str(tmp_path / "b" / "src")
    assert exit_code(archive([src], open_target(loc), "src")) == 0
    r = _bare("verify", loc)
    assert r.returncode == 2 and "zstd" in r.stderr, r.stderr
    r = _bare("restore", loc, "--to", str(tmp_path / "out"))
    assert r.returncode == 2 and "zstd" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()

    probe = BLOCK + "from vacate.archive import compress; print(compress.missing())"
    said = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ, "PATH": "/nonexistent",
                               "PYTHONPATH": os.pathsep.join(sys.path)}, check=True).stdout
    assert "zstd" in said and "install" in said
    assert compress.missing() is None
