"""Fixtures of the harness that the act tests share: ``vol`` (a fresh ext4 and btrfs volume)
for the delete tests, ``story`` (the model server in a booted systemd box) for migrate's."""

from harness.delete_trees import vol  # noqa: F401
from harness.migrate_box import story  # noqa: F401
