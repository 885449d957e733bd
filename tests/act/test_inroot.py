"""A container's files by its own paths, from its root held open: an absolute symlink inside
resolves against the container's root (never the host's), ``..`` stops at it; without
openat2 the walk refuses any link on the way rather than follow it the host's way."""

from __future__ import annotations

import errno
import os

import pytest

from vacate.act import inroot
from vacate.act.inroot import Root
from vacate.observing.fsio import read_bounded, write_atomic


@pytest.fixture
def tree(tmp_path):
    """A container's root: /etc/app.env -> /srv/real/app.env (absolute), /srv/up ->
    ../../../.. (climbs), and beside the root, where the host's / would lead, a decoy."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "srv" / "real").mkdir(parents=True)
    (root / "srv" / "real" / "app.env").write_text("MODEL=/data/m\n")
    os.symlink("/srv/real/app.env", root / "etc" / "app.env")
    os.symlink("../../../..", root / "srv" / "up")
    return root


def _read(r: Root, path: str) -> tuple[bytes, str]:
    d, name, spelled = r.parent(path)
    try:
        return read_bounded(name, 1 << 20, follow=False, dir_fd=d)[0], spelled
    finally:
        os.close(d)


def test_an_absolute_link_resolves_inside_the_root(tree):
    with Root(str(tree)) as r:
        data, spelled = _read(r, "/etc/app.env")
        assert data == b"MODEL=/data/m\n" and spelled == "/srv/real/app.env"
        d, name, _ = r.parent("/etc/app.env")
        try:
            write_atomic(name, b"MODEL=/shared/m\n", like=os.stat(name, dir_fd=d), dir_fd=d)
        finally:
            os.close(d)
    assert (tree / "srv" / "real" / "app.env").read_text() == "MODEL=/shared/m\n"
    assert os.path.islink(tree / "etc" / "app.env")          # the link stays a link
    # .. stops at the container's root
    with Root(str(tree)) as r:
        d, name, _ = r.parent("/srv/up/etc/app.env")
        os.close(d)
        assert name == "app.env"


def test_without_openat2_a_link_on_the_way_is_refused(tree, monkeypatch):
    monkeypatch.setattr(inroot, "_in_root", None)
    with Root(str(tree)) as r:
        with pytest.raises(OSError) as e:
            r.parent("/srv/up/etc/app.env")
        assert e.value.errno == errno.ELOOP
        d, name, spelled = r.parent("/etc/app.env")   # the last link is read, not followed
        os.close(d)
        assert (name, spelled) == ("app.env", "/srv/real/app.env")
