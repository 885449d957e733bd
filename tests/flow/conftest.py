"""What the flow tests that drive a fleet share, one a test module: the ``vacate.volume``
collection built from this checkout and installed (``installed``, once a session: the
collection is this checkout's either way), and a real OpenSSH server on 127.0.0.1
(``server``, one a test module). A module that defines its own keeps its own."""

from __future__ import annotations

import pytest
from harness import collection, sshd


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    return collection.build_and_install(str(tmp_path_factory.mktemp("collection")))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = sshd.start(str(tmp_path_factory.mktemp("sshd")))
    yield s
    s.stop()
