"""The observing layer ships alone: ``vacate.observing`` imports only the standard library
and nothing of vacate's other layers, runs on CPython 3.8 and newer (vermin says so of the
source; the interpreters the machine has say so by running it), and without the C modules
(a zip cannot load them): under each old interpreter, isolated (``-I -S``: no site-packages,
so not rich, zstandard or orjson either), every module of the payload imports and an
observation of a real volume decides as a local one does."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import zipfile

import pytest
from harness.observed import same_document
from harness.paths import SRC

SRC = os.path.join(SRC, "vacate")
OBSERVING = os.path.normpath(os.path.join(SRC, "observing"))
VACATE = [sys.executable, "-m", "vacate"]
PYTHONS = {
    "3.8": os.path.expanduser("~/.pyenv/versions/3.8.18/bin/python3.8"),
    "3.9": os.path.expanduser("~/.pyenv/versions/3.9.18/bin/python3.9"),
    "debian": "/usr/bin/python3",
}
OTHER_LAYERS = ("vacate.decide", "vacate.act", "vacate.output", "vacate.cli", "vacate.flow",
                "vacate.remote", "vacate.archive", "vacate.demo")


def sources():
    for d, _dirs, files in os.walk(OBSERVING):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(d, f)


def imports(path: str):
    """(line, module) of every import in the file at ``path``, at any level."""
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module


def test_observing_imports_no_other_layer():
    bad = []
    for path in sources():
        for lineno, n in imports(path):
            if n.startswith(OTHER_LAYERS) or n.split(".")[0] in (
                    "rich", "zstandard", "blake3", "xxhash", "jinja2", "textual"):
                bad.append(f"{os.path.relpath(path, SRC)}:{lineno}: {n}")
    assert not bad, bad


@pytest.mark.slow
def test_vermin_finds_nothing_newer_than_3_8():
    r = subprocess.run([sys.executable, "-c",
                        "import sys; from vermin.main import main; sys.exit(main())",
                        "-t=3.8-", "--no-tips",
                        "--violations", "--no-parse-comments", OBSERVING],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.fixture(scope="module")
def zipapp(tmp_path_factory):
    out = tmp_path_factory.mktemp("payload") / "vacate-observe.pyz"
    r = subprocess.run([*VACATE, "payload", "-o", str(out)], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return str(out)


IMPORT_ALL = """
import sys, zipfile
sys.path.insert(0, sys.argv[1])
names = [n[:-3].replace('/', '.') for n in zipfile.ZipFile(sys.argv[1]).namelist()
         if n.startswith('vacate/') and n.endswith('.py')]
import importlib
for n in sorted(names):
    importlib.import_module(n[:-9] if n.endswith('.__init__') else n)
bad = [m for m in sys.modules if m.split('.')[0] in ('rich', 'zstandard', 'orjson', 'blake3', 'xxhash')]
assert not bad, bad
print(len(names), sys.version.split()[0])
"""


@pytest.mark.parametrize("name", sorted(PYTHONS))
def test_every_module_imports_isolated_under_old_pythons(name, zipapp):
    python = PYTHONS[name]
    if not os.path.exists(python):
        pytest.skip(f"no {python} here")
    r = subprocess.run([python, "-I", "-S", "-c", IMPORT_ALL, zipapp], capture_output=True,
                       text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    with zipfile.ZipFile(zipapp) as z:
        count = sum(1 for n in z.namelist() if n.startswith("vacate/"))
    assert r.stdout.split()[0] == str(count)


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("name", sorted(PYTHONS))
def test_an_observation_made_under_old_pythons_decides_as_a_local_one(name, zipapp, volume,
                                                                       tmp_path):
    python = PYTHONS[name]
    if not os.path.exists(python):
        pytest.skip(f"no {python} here")
    m = volume.mountpoint
    os.makedirs(f"{m}/models/q")
    with open(f"{m}/models/q/config.json", "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, f)
    with open(f"{m}/notes.txt", "w") as f:
        f.write("x\n")
    obs = tmp_path / "obs.json"
    same_document(
        lambda: subprocess.run([*VACATE, "check", "--json", m], capture_output=True, text=True,
                               timeout=120, env=dict(os.environ, VACATE_NO_C="1"),
                               check=False),
        lambda: subprocess.run([python, "-I", "-S", zipapp, m, "-o", str(obs)],
                               capture_output=True, text=True, timeout=120, check=True) and
        subprocess.run([*VACATE, "check", "--json", "--from", str(obs)], capture_output=True,
                       text=True, timeout=120, check=False),
        drop=("elapsed_s", "host"))


# -- the acting half that apply sends with it ---------------------------------------------
ACT_LAYERS = ("vacate.decide", "vacate.cli", "vacate.flow", "vacate.remote", "vacate.demo",
              "vacate.output", "vacate.browse")


def act_sources():
    from vacate.remote.payload import sources

    return [(n, p) for n, p in sources(act=True) if not n.startswith("vacate/observing/")]


def test_the_acting_half_imports_nothing_it_does_not_ship():
    """What apply sends (act and archive, beside observing) imports nothing of the deciding,
    flow, CLI, output or remote layers at any level, and no library but zstandard, which it
    only tries."""
    shipped = {n[:-3].replace("/", ".").removesuffix(".__init__") for n, _p in act_sources()}
    bad = []
    for name, path in act_sources():
        for lineno, n in imports(path):
            if n.startswith(ACT_LAYERS) or n.split(".")[0] in (
                    "rich", "jinja2", "textual") or (
                    n.startswith("vacate.") and not n.startswith("vacate.observing")
                    and n not in shipped and n != "vacate.archive.s3"):
                bad.append(f"{name}:{lineno}: {n}")
    assert not bad, bad


def test_vermin_finds_nothing_newer_than_3_8_in_the_acting_half():
    paths = [p for _n, p in act_sources()]
    r = subprocess.run([sys.executable, "-c",
                        "import sys; from vermin.main import main; sys.exit(main())",
                        "-t=3.8-", "--no-tips", "--violations", *paths],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.mark.parametrize("name", sorted(PYTHONS))
def test_the_acting_half_imports_isolated_under_old_pythons(name, tmp_path):
    from vacate.remote.payload import build

    python = PYTHONS[name]
    if not os.path.exists(python):
        pytest.skip(f"no {python} here")
    zipped = tmp_path / "act.zip"
    zipped.write_bytes(build(act=True))
    r = subprocess.run([python, "-I", "-S", "-c", IMPORT_ALL, str(zipped)], capture_output=True,
                       text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
