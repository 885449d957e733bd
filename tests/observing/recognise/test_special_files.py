"""``scan`` labels what is not a file or a directory by what it is (``fifo``, ``socket``,
``device``), and never opens one: a FIFO with a name a recogniser would read
(``model.safetensors``, ``x.gguf``) neither hangs the scan nor is taken for a model."""

import json
import os
import socket
import stat
import subprocess
import sys

import pytest


def scan_json(path: str, *args: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "vacate", "scan", "--json", *args, path],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def tree(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    os.mkfifo(tmp_path / "x.gguf")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "sock"))
    s.close()
    (tmp_path / "plain").write_text("data\n")
    (tmp_path / "model").mkdir()
    os.mkfifo(tmp_path / "model" / "model.safetensors")
    (tmp_path / "model" / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    if os.geteuid() == 0:
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return tmp_path


def test_special_files_are_labelled_by_their_type(tree):
    doc = scan_json(str(tree))
    got = {os.path.basename(i["path"]): (i["kind"], i["label"]) for i in doc["items"]
           if i["parent"] is None}
    assert got["fifo"] == ("fifo", "fifo") and got["x.gguf"] == ("fifo", "fifo")
    assert got["sock"] == ("socket", "socket")
    assert got["plain"] == ("file", "file")
    if os.geteuid() == 0:
        assert got["null"] == ("device", "device")
    assert got["model"][0] != "fifo"



def test_sizes_only_scan_and_the_no_scan_listing_name_special_files_too(tmp_path):
    """`scan --no-recognise` and `check --no-scan` make their items without the recognisers:
    a FIFO, a socket and a link are still named for what they are, never opened."""
    import io
    import json
    import socket

    from vacate.cli.env import Env
    from vacate.cli.main import main

    d = tmp_path / "vol"
    d.mkdir()
    os.mkfifo(d / "pipe")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(d / "sock"))
    os.symlink("/etc/hostname", d / "link")
    (d / "plain.txt").write_text("x")
    try:
        for argv, key in ((["scan", "--json", "--no-recognise"], "items"),
                          (["check", "--json", "--no-scan", "--no-config"], "items")):
            out = io.StringIO()
            main([*argv, str(d)], Env(stdout=out, stderr=io.StringIO()))
            kinds = {os.path.basename(i["path"]): i["kind"] for i in json.loads(out.getvalue())[key]}
            assert kinds["pipe"] == "fifo" and kinds["sock"] == "socket", (argv, kinds)
            assert kinds["plain.txt"] == "file"
    finally:
        s.close()
