"""The optional C modules are checked by version: a module that is not there leaves the Python
loop in charge, a module built from other sources (another ``VERSION``, or none) is refused
with an error naming its file."""

from __future__ import annotations

import sys

import pytest

from vacate.act import delete
from vacate.observing import native
from vacate.observing.collectors import procs_probe, walk_descent
from vacate.observing.recognise.formats import safetensors


@pytest.mark.parametrize(("mod", "expected"), [
    (walk_descent.fastwalk, walk_descent.FASTWALK_VERSION),
    (procs_probe._fastproc, procs_probe.FASTPROC_VERSION),
    (safetensors._fastst, safetensors.FASTST_VERSION),
    (delete.fastdel, delete.FASTDEL_VERSION),
], ids=["_fastwalk", "_fastproc", "_fastst", "_fastdel"])
def test_built_modules_are_the_version_their_python_calls(mod, expected):
    assert mod is not None, "not built: reinstall with a C compiler (pip install -e .)"
    assert mod.VERSION == expected


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(name: str, text: str) -> str:
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        sys.modules.pop(name, None)
        return str(path)

    yield make


def test_a_module_of_the_expected_version_is_used(on_path):
    on_path("vacate_test_fresh", "VERSION = 3\n")
    assert native.load("vacate_test_fresh", 3).VERSION == 3


@pytest.mark.parametrize("text", ["VERSION = 2\n", "", "VERSION = '3'\n"],
                         ids=["older", "none", "text"])
def test_a_module_of_another_version_is_refused(on_path, text):
    path = on_path("vacate_test_stale", text)
    with pytest.raises(native.StaleBuild) as e:
        native.load("vacate_test_stale", 3)
    assert path in e.value.message and "version 3" in e.value.message
    assert "rebuild" in e.value.hint


def test_a_module_that_is_not_there_leaves_the_python_loop():
    assert native.load("vacate_test_never_built", 1) is None
