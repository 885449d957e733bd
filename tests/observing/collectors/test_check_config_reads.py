"""``vacate check`` end to end with hostile unit files on this host: a private mount namespace
(``unshare -m``) shows the test's own ``/etc/systemd/system``, ``/etc/default`` and
``/etc/cron.d``, and is the
only one the loop volume is mounted in (a copy left in the host's namespace would be a user of
the volume); /proc is the machine's. A FIFO named by ``EnvironmentFile=`` must not hang check,
and neither it nor a unit file over the read bound may let check say "safe"."""

import os

import pytest
from harness.config_checks import check_with, unit
from harness.etc_files import write

pytestmark = pytest.mark.root










def problem_paths(doc: dict) -> list[str]:
    return [p["path"] for p in doc["verdict"]["unknowns"]]


ENV_UNIT = "[Service]\nEnvironmentFile=/etc/default/app\nExecStart=/usr/bin/app $ARGS\n" \
           "[Install]\nWantedBy=multi-user.target\n"


def test_environment_file_that_is_a_fifo_is_could_not_tell(ext4_volume, tmp_path):
    stage = str(tmp_path)
    unit(stage, "app.service", ENV_UNIT)
    os.makedirs(os.path.join(stage, "default"))
    os.mkfifo(os.path.join(stage, "default/app"))
    rc, doc = check_with(ext4_volume, stage)
    assert rc == 3
    assert doc["verdict"]["safe_to_unmount"] is not True
    assert problem_paths(doc) == ["/etc/default/app"]


def test_the_same_unit_with_a_plain_environment_file_is_safe(ext4_volume, tmp_path):
    """The control: nothing else about the setup makes check say "could not tell"."""
    stage = str(tmp_path)
    unit(stage, "app.service", ENV_UNIT)
    write(stage, "/default/app", "ARGS=--port 1\n")
    rc, doc = check_with(ext4_volume, stage)
    assert (rc, problem_paths(doc)) == (0, [])


def test_unit_file_over_the_bound_is_could_not_tell(ext4_volume, tmp_path):
    """An enabled unit whose WorkingDirectory= on the volume comes after 4 MiB of comments."""
    stage = str(tmp_path)
    vol = ext4_volume.mountpoint
    pad = "# " + "x" * 1000 + "\n"
    unit(stage, "big.service", "[Service]\nExecStart=/usr/bin/true\n" + pad * 4300
         + f"WorkingDirectory={vol}/after-the-padding\n[Install]\nWantedBy=multi-user.target\n")
    rc, doc = check_with(ext4_volume, stage)
    assert rc == 3
    assert problem_paths(doc) == ["/etc/systemd/system/big.service"]


def test_a_description_naming_the_volume_is_not_a_use(ext4_volume, tmp_path):
    stage = str(tmp_path)
    vol = ext4_volume.mountpoint
    unit(stage, "doc.service", f"[Unit]\nDescription=serves what is in {vol}/models\n"
         f"Documentation=file://{vol}/docs/serve.html\n[Service]\nExecStart=/usr/bin/serve\n"
         "[Install]\nWantedBy=multi-user.target\n")
    rc, doc = check_with(ext4_volume, stage)
    assert (rc, doc["consumers"]) == (0, [])
