"""`vacate apply` run again on a retired volume: what the first run measured stands (the
volume's mount point shows the root filesystem now, which is not the volume)."""

import json
import os

import pytest
from harness.retire import Story, cli
from harness.volumes import can_loop_mount

pytestmark = pytest.mark.root


@pytest.mark.slow
def test_applying_again_keeps_the_space_freed_that_was_measured(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    s = Story(str(tmp_path))
    try:
        s.make_plan()
        rc, out, err = cli("apply", s.plan, "--yes", "--json")
        assert rc == 0, err
        freed = json.loads(out)["done"]["freed_bytes"]
        assert 1 << 20 < freed <= os.path.getsize(s.vol.image)
        rc, out, err = cli("apply", s.plan, "--yes", "--json")
        assert rc == 0, err
        assert json.loads(out)["done"]["freed_bytes"] == freed
        rc, out, _err = cli("report", s.plan, "--json")
        assert json.loads(out)["done"]["freed_bytes"] == freed
    finally:
        s.close()
