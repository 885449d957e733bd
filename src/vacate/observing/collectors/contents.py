"""What an item holds: one definition for scan, check, archive, verify and delete.

An item's contents are everything below it on the same filesystem, never following a
symlink. On btrfs that includes its subvolumes: a subvolume has an ``st_dev`` of its own but
is not a mount (mountinfo does not list it) and belongs to the same filesystem, so ``du -x``
counts it and so does every vacate command. Mounts below the item (mountinfo lists them: other
filesystems, binds, a subvolume mounted somewhere) are never entered, nor even stat'ed (a dead
FUSE or NFS server hangs a stat); ``check`` makes each one a blocker. A directory with another
``st_dev`` that mountinfo did not list, on a filesystem without subvolumes, is another
filesystem too (mounted after mountinfo was read): not entered, and said so.

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from vacate.observing.compat import SLOTS
from vacate.observing.model.mount import Target

INSIDE = None
MOUNT = "mount"                      # a mountpoint below the item
OTHER_FILESYSTEM = "other-filesystem"  # another st_dev that is neither a subvolume nor listed


def same_filesystem(root_dev: int, subvolumes: bool, dev: int) -> bool:
    """Whether a directory on ``dev`` (not a listed mountpoint) is part of an item on
    ``root_dev``: the same device, or any device where the filesystem has subvolumes."""
    return dev == root_dev or subvolumes


def skip_by_parent(skip, root: str) -> dict[str, frozenset[str]]:
    """The mountpoints ``skip`` as {parent directory: names in it} (``root`` itself left out:
    it is the item), so that a listing drops them by name before anything stats them."""
    by_parent: dict[str, set[str]] = {}
    for m in skip:
        if m != root:
            head, _, name = m.rpartition("/")
            by_parent.setdefault(head or "/", set()).add(name)
    return {k: frozenset(v) for k, v in by_parent.items()}


@dataclass(frozen=True, **SLOTS)
class Contents:
    """The contents of the item at ``root``: on device ``root_dev``; ``subvolumes``: the
    filesystem has subvolumes (btrfs), walked as part of it; ``skip``: the mountpoints below
    ``root`` (absolute paths as mountinfo gives them), never entered."""

    root: str
    root_dev: int
    subvolumes: bool
    skip: frozenset[str]

    def is_mount(self, path: str) -> bool:
        """``path`` (absolute, below ``root``) is a mountpoint: leave it out unlooked-at."""
        return path in self.skip

    def descends(self, path: str, dev: int) -> str | None:
        """Whether the directory ``path`` on ``dev`` is walked as part of the item: None
        (:data:`INSIDE`), or why not (:data:`MOUNT`, :data:`OTHER_FILESYSTEM`)."""
        if path in self.skip:
            return MOUNT
        if same_filesystem(self.root_dev, self.subvolumes, dev):
            return INSIDE
        return OTHER_FILESYSTEM


def of_target(target: Target) -> Contents:
    """The contents of the target's path (:func:`vacate.observing.collectors.mounts.resolve_target`)."""
    return Contents(root=target.path, root_dev=target.st_dev,
                    subvolumes=target.mount.fstype == "btrfs",
                    skip=frozenset(m.mountpoint for m in target.nested_mounts))


def of_path(path: str, host=None) -> Contents:
    """The contents of the directory ``path``, resolved as ``scan`` resolves it (``root`` is
    its real path, symlinks resolved: mountinfo's paths are real ones)."""
    from vacate.observing.collectors import mounts

    return of_target(mounts.resolve_target(path, host))
