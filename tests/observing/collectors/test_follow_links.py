"""``parsers.paths.follow_links``, the one component-by-component link walker behind the hang
guard's realpath (``collectors/guarded.py``) and the configured-users resolver
(``collectors/configured/resolve.py``): against ``os.path.realpath`` on a real tree of links,
and where it must stop instead."""

from __future__ import annotations

import os
import stat

import pytest

from vacate.observing.parsers.paths import follow_links


def real_what(path: str):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return os.readlink(path) if stat.S_ISLNK(st.st_mode) else False


@pytest.fixture
def tree(tmp_path):
    root = os.path.realpath(str(tmp_path))
    os.makedirs(f"{root}/data/models/llama")
    os.makedirs(f"{root}/etc/app")
    os.symlink("../../data/models", f"{root}/etc/app/models")        # relative, up
    os.symlink(f"{root}/data", f"{root}/abs")                          # absolute
    os.symlink("abs/models/./llama/../llama", f"{root}/twisty")       # . and .. inside
    os.symlink("chain2", f"{root}/chain1")
    os.symlink("chain1", f"{root}/chain2")                             # a loop
    os.symlink("nowhere/at/all", f"{root}/dangling")
    return root


@pytest.mark.parametrize("rel", ["etc/app/models/llama", "abs/models", "twisty", "data/./models/../models",
                                 "etc/app/models/../models/llama"])
def test_resolves_as_realpath_does(tree, rel):
    how, at, rest = follow_links(f"{tree}/{rel}", real_what)
    assert (how, at, rest) == ("resolved", os.path.realpath(f"{tree}/{rel}"), [])


def test_missing_dangling_and_loops_end_the_walk(tree):
    assert follow_links(f"{tree}/dangling/x", real_what) == (
        "missing", f"{tree}/nowhere", ["at", "all", "x"])
    assert follow_links(f"{tree}/no/such", real_what) == ("missing", f"{tree}/no", ["such"])
    how, at, rest = follow_links(f"{tree}/chain1/x", real_what)
    assert how == "too-many-links" and at in (f"{tree}/chain1", f"{tree}/chain2")
    assert rest == ["x"]
    assert follow_links(f"{tree}/chain1", real_what, max_hops=0) == (
        "too-many-links", f"{tree}/chain1", [])


def test_stops_before_looking_where_told(tree):
    """A path on a mount that may hang is never looked up: ``stop`` is asked first, also of a
    path reached through a link."""
    looked: list[str] = []

    def what(p):
        looked.append(p)
        return real_what(p)

    data = f"{tree}/data"
    how, at, rest = follow_links(f"{tree}/etc/app/models/llama/w.bin", what,
                                 stop=lambda p: p == data)
    assert (how, at, rest) == ("stopped", data, ["models", "llama", "w.bin"])
    assert data not in looked and not [p for p in looked if p.startswith(data + "/")]


def test_a_link_that_cannot_be_read():
    kinds = {"/a": False, "/a/b": ""}
    assert follow_links("/a/b/c", kinds.get) == ("unreadable-link", "/a/b", ["c"])
    assert follow_links("/", kinds.get) == ("resolved", "/", [])
    assert follow_links("/a/../../a", kinds.get) == ("resolved", "/a", [])
