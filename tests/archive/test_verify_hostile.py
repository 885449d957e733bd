"""``vacate verify`` (and ``restore``) on archives whose files are not what they should be:
FIFOs, devices, links to /dev/zero, sums files with lines naming other files, crafted tar
streams. Each is named (verify exit 1; what could not be read: exit 3), none hangs (every
command here runs under a timeout), none exhausts memory."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import zstandard
from harness.archive_corpus import (
    PART,
    Outside,
    build,
    codes,
    entry,
    member_bytes,
    restore,
    verify,
)

from vacate.archive import tarfmt


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    base = tmp_path_factory.mktemp("vh")
    adir = build(str(base / "good"), [
        entry("src", "dir"), entry("src/d", "dir"),
        (entry("src/a", data=b"alpha\n"), b"alpha\n"),
        (entry("src/d/b", data=b"beta\n" * 1000), b"beta\n" * 1000),
        entry("src/h", "hardlink", link="src/a", sha256=entry("x", data=b"alpha\n")["sha256"],
              size=6),
        entry("src/l", "symlink", link="/etc/passwd")])
    rc, doc, err = verify(adir)
    assert rc == 0, (doc, err)
    return adir


@pytest.fixture
def copy(pristine, tmp_path):
    dst = str(tmp_path / "arch")
    shutil.copytree(pristine, dst, symlinks=True)
    return dst


def _replace(adir: str, name: str, how: str) -> None:
    p = os.path.join(adir, name)
    os.unlink(p)
    if how == "fifo":
        os.mkfifo(p)
    elif how == "zero":
        os.symlink("/dev/zero", p)
    elif how == "dir":
        os.mkdir(p)
    elif how == "urandom":
        os.symlink("/dev/urandom", p)


# ---- never hang, never exhaust ------------------------------------------------------------

@pytest.mark.parametrize("how", ["fifo", "zero", "dir", "urandom"])
def test_manifest_that_is_not_a_file(copy, tmp_path, how):
    _replace(copy, "MANIFEST.jsonl", how)
    rc, doc, err = verify(copy, timeout=30)
    assert rc == 1, err
    assert codes(doc) == {"manifest-damaged"}
    assert "not a regular file" in doc["findings"][0]["message"]
    outside = Outside(str(tmp_path))
    rc, _res, err = restore(copy, tmp_path / "out", timeout=30)
    assert rc == 2 and "not a regular file" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")
    outside.check("out")


@pytest.mark.parametrize("how", ["fifo", "zero", "dir"])
@pytest.mark.parametrize("name", ["SHA256SUMS", "PARTS.SHA256SUMS"])
def test_sums_file_that_is_not_a_file(copy, how, name):
    _replace(copy, name, how)
    rc, doc, err = verify(copy, timeout=30)
    assert rc == 1, err
    assert codes(doc) == {"sums-mismatch"}
    assert any(name in f["message"] and "not a regular file" in f["message"]
               for f in doc["findings"])


@pytest.mark.parametrize("how", ["fifo", "zero", "dir", "urandom"])
def test_part_that_is_not_a_file(copy, tmp_path, how):
    _replace(copy, PART, how)
    rc, doc, err = verify(copy, timeout=30)
    assert rc == 1, err
    assert "part-not-a-file" in codes(doc)
    lost = {f["path"] for f in doc["findings"] if f["code"] == "member-missing"}
    assert {"src/a", "src/d/b"} <= lost
    rc, res, err = restore(copy, tmp_path / "out", timeout=30)
    assert rc == 1, err
    assert "part-not-a-file" in {f["code"] for f in res["findings"]}
    assert not os.path.exists(tmp_path / "out" / "src" / "a")


def test_part_longer_than_recorded_is_read_only_so_far(copy):
    """A part with 64 MiB appended: read up to its recorded size (and a byte), no more."""
    with open(os.path.join(copy, PART), "ab") as f:
        f.truncate(os.path.getsize(os.path.join(copy, PART)) + (64 << 20))
    rc, doc, _err = verify(copy, timeout=30)
    assert rc == 1
    msgs = [f["message"] for f in doc["findings"] if f["code"] == "part-checksum"]
    assert msgs and "longer than" in msgs[0]
    assert doc["bytes_checked"] < 1 << 20


def test_decompression_bomb_is_cut_at_the_recorded_tar_size(tmp_path):
    """A part whose zstd stream inflates to 4 GiB of zeros while the manifest records a
    small tar stream: stopped at the recorded size, named, quickly."""
    e = entry("src/f", data=b"x")
    tar = member_bytes(e, b"x") + tarfmt.END_OF_ARCHIVE
    c = zstandard.ZstdCompressor()
    comp = c.compress(tar) + c.compress(bytes(16 << 20)) * 256     # frames, back to back
    adir = build(str(tmp_path / "a"), [(e, b"x")], raw_part=comp)
    # the manifest records only the real tar stream's length
    from harness.archive_corpus import read_manifest, write_manifest
    head, entries = read_manifest(adir)
    head["parts"][0]["tar_bytes"] = len(tar)
    write_manifest(adir, head, entries)
    rc, doc, _err = verify(adir, timeout=60)
    assert rc == 1
    assert any("decompresses to more" in f["message"] for f in doc["findings"])


# ---- every line of every sums file names a file of the archive ---------------------------

SUMS_EDITS = {
    "extra line naming passwd": ("PARTS.SHA256SUMS",
                                 lambda d: d + b"0" * 64 + b"  ../../../../etc/passwd\n",
                                 "../../../../etc/passwd"),
    "extra absolute line": ("SHA256SUMS", lambda d: d + b"a" * 64 + b"  /etc/shadow\n",
                            "/etc/shadow"),
    "extra escaped line": ("SHA256SUMS", lambda d: d + b"\\" + b"a" * 64 + b"  ../x\\ny\n",
                           "../x\\ny"),
    "a part listed twice": ("PARTS.SHA256SUMS", lambda d: d + d, "second time"),
    "a file left out": ("SHA256SUMS", lambda d: b"\n".join(d.split(b"\n")[1:]), "does not list"),
    "garbage line": ("PARTS.SHA256SUMS", lambda d: d + b"hello world\n", "not a sha256sum"),
    "binary-mode name outside": ("PARTS.SHA256SUMS", lambda d: d + b"b" * 64 + b" */etc/passwd\n",
                                 "/etc/passwd"),
    "crlf": ("PARTS.SHA256SUMS", lambda d: d.replace(b"\n", b"\r\n"), "which is not"),
    "empty": ("PARTS.SHA256SUMS", lambda d: b"", "does not list"),
    "no final newline": ("SHA256SUMS", lambda d: d[:-1], "newline"),
    "huge": ("SHA256SUMS", lambda d: d + b"c" * 64 + b"  " + b"x" * (8 << 20) + b"\n",
             "longer than"),
}


@pytest.mark.parametrize("what", sorted(SUMS_EDITS))
def test_sums_lines_name_files_of_the_archive(copy, what):
    name, edit, word = SUMS_EDITS[what]
    p = os.path.join(copy, name)
    with open(p, "rb") as f:
        data = f.read()
    with open(p, "wb") as f:
        f.write(edit(data))
    rc, doc, err = verify(copy, timeout=30)
    assert rc == 1, err
    assert codes(doc) == {"sums-mismatch"}, doc["findings"]
    msgs = " | ".join(f["message"] for f in doc["findings"])
    assert name in msgs and word in msgs, msgs
    assert len(msgs) < 5000


def test_stock_sha256sum_would_read_what_the_extra_line_names(copy, tmp_path):
    """Why it matters: the README's check reads the file the extra line names."""
    secret = tmp_path / "outside-secret"
    secret.write_bytes(b"secret\n")
    rel = os.path.relpath(secret, copy)
    import hashlib
    with open(os.path.join(copy, "PARTS.SHA256SUMS"), "ab") as f:
        f.write(hashlib.sha256(b"secret\n").hexdigest().encode() + b"  " + rel.encode() + b"\n")
    stock = subprocess.run(["sha256sum", "-c", "PARTS.SHA256SUMS"], cwd=copy,
                           capture_output=True, timeout=30, check=False)
    assert stock.returncode == 0 and rel.encode() in stock.stdout     # stock: "OK"
    rc, doc, _err = verify(copy)
    assert rc == 1 and any(rel in f["message"] for f in doc["findings"])


# ---- hand-made tar streams ----------------------------------------------------------------

def _ustar(name: bytes, flag: bytes, size: int, extra: dict | None = None) -> bytes:
    h = bytearray(tarfmt._ustar(name, 0o644, 0, 0, size, 0, flag))
    for off, val in (extra or {}).items():
        h[off:off + len(val)] = val
    h[148:156] = b"        "
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def _pax(records: bytes) -> bytes:
    return _ustar(b"PaxHeaders/x", b"x", len(records)) + records + bytes(
        tarfmt.padding(len(records)))


def _file(name: bytes, data: bytes) -> bytes:
    return _ustar(name, b"0", len(data)) + data + bytes(tarfmt.padding(len(data)))


STREAMS = {
    "pax record of length 0": _pax(b"0 path=x\n") + _file(b"src/f", b"x"),
    "pax record longer than its header": _pax(b"99 path=x\n") + _file(b"src/f", b"x"),
    "pax record without a length": _pax(b"path=src/f\n") + _file(b"src/f", b"x"),
    "pax size that is not a number": _pax(b"14 size=12ab\n") + _file(b"src/f", b"x"),
    "pax header of 64 MiB": _ustar(b"PaxHeaders/x", b"x", 64 << 20) + bytes(64 << 20),
    "GNU long name of 32 MiB": _ustar(b"././@LongLink", b"L", 32 << 20) + bytes(32 << 20),
    "sparse map with a huge count": _pax(b"22 GNU.sparse.major=1\n22 GNU.sparse.minor=0\n"
                                         b"25 GNU.sparse.name=src/f\n"
                                         b"32 GNU.sparse.realsize=1000000\n")
    + _ustar(b"src/f", b"0", 1024) + b"999999999999\n".ljust(1024, b"\0"),
    "sparse segments past the end": _pax(b"22 GNU.sparse.major=1\n22 GNU.sparse.minor=0\n"
                                         b"25 GNU.sparse.name=src/f\n"
                                         b"23 GNU.sparse.realsize=1\n")
    + _ustar(b"src/f", b"0", 512 + 1) + b"1\n1000000000000000\n1\n".ljust(512, b"\0")
    + b"x".ljust(512, b"\0"),
    "a member of an unknown type": _ustar(b"src/f", b"S", 0),
    "bad header checksum": _file(b"src/f", b"x")[:148] + b"0000000\0"
    + _file(b"src/f", b"x")[156:],
    "base-256 size": _ustar(b"src/f", b"0", 0, {124: b"\x80" + b"\xff" * 11}),
    "the same member twice": _file(b"src/f", b"x") + _file(b"src/f", b"x"),
    "a member the manifest does not list": _file(b"src/f", b"x")
    + _file(b"../../etc/vacate-escaped", b"pwned"),
}


@pytest.mark.slow
@pytest.mark.parametrize("what", sorted(STREAMS))
def test_crafted_tar_streams(tmp_path, what):
    e = entry("src/f", data=b"x")
    adir = build(str(tmp_path / "a"), [entry("src", "dir"), (e, b"x")],
                 tar=STREAMS[what] + member_bytes(entry("src", "dir")) + tarfmt.END_OF_ARCHIVE)
    rc, doc, err = verify(adir, timeout=60)
    assert rc == 1, err
    assert "Traceback" not in err
    assert codes(doc) & {"part-corrupt", "part-truncated", "member-unexpected",
                         "member-metadata", "member-missing"}, doc
    outside = Outside(str(tmp_path))
    rc, _res, err = restore(adir, tmp_path / "out", timeout=60)
    assert rc in (0, 1), err
    assert "Traceback" not in err
    assert not os.path.lexists("/etc/vacate-escaped")
    outside.check("out", "a")
    if rc == 0:                # only where the file itself came through whole
        assert (tmp_path / "out" / "src" / "f").read_bytes() == b"x"


# ---- what could not be read: exit 3 -------------------------------------------------------

def _no_dac(*cmd):
    """Root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH: a file of mode 000 is unreadable
    to it, as it is to anyone else."""
    return ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
            "--bounding-set=-dac_override,-dac_read_search", *cmd]


@pytest.mark.root
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv")
def test_unreadable_files_are_could_not_tell(copy, tmp_path):
    import json
    import sys

    def run(*args):
        r = subprocess.run(_no_dac(sys.executable, "-m", "vacate", *args, "--json"),
                           capture_output=True, timeout=60, check=False)
        return r.returncode, json.loads(r.stdout) if r.stdout else None, r.stderr.decode()

    os.chmod(os.path.join(copy, PART), 0o000)
    rc, doc, err = run("verify", copy)
    assert rc == 3, (doc, err)
    assert codes(doc) == {"part-unreadable"}
    assert "not checked" in doc["findings"][0]["message"]
    rc, res, err = run("restore", copy, "--to", str(tmp_path / "out"))
    assert rc == 3, (res, err)
    assert {f["code"] for f in res["findings"]} == {"part-unreadable"}
    os.chmod(os.path.join(copy, "MANIFEST.jsonl"), 0o000)
    rc, doc, err = run("verify", copy)
    assert rc == 3 and codes(doc) == {"manifest-unreadable"}, err
    rc, _res, err = run("restore", copy, "--to", str(tmp_path / "out2"))
    assert rc == 3 and "could not read" in err, err
