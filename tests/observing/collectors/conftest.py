"""Fixtures of the harness that the walk-record tests share with the delete tests: ``vol``,
a fresh ext4 and btrfs volume."""

from harness.delete_trees import vol  # noqa: F401
