"""``zfs list -H -t all -r -o name,type,userrefs,origin,mounted POOL`` as zfs-fuse 0.7 prints
it (captured: tests/fixtures/misc/zfs-list-fuse-0.7.txt, see SOURCE.txt): a dataset's
snapshots with their holds and clones, its children, whether it is mounted."""

from __future__ import annotations

import os

from vacate.observing.model.dataset import ZfsSnapshot
from vacate.observing.parsers.zfs_list import parse

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "misc",
                       "zfs-list-fuse-0.7.txt")
DS = "scratch/subvol-129-disk-0"


def _text() -> str:
    with open(FIXTURE) as f:
        return f.read()


def test_snapshots_holds_clones_and_children_of_the_dataset():
    f = parse(_text(), DS)
    assert f.exists and f.mounted is True and not f.error
    assert f.snapshots == (ZfsSnapshot("daily-1", 0), ZfsSnapshot("held", 1),
                           ZfsSnapshot("base", 0, ("scratch/clone-of-base",)))
    assert f.children == (f"{DS}/child",)


def test_a_dataset_the_listing_lacks_is_not_there_and_a_prefix_is_not_a_child():
    assert parse(_text(), "scratch/nope").exists is False
    f = parse(_text(), "scratch/subvol-129")       # a name's prefix is not its parent
    assert not f.exists and f.snapshots == () and f.children == ()


def test_holds_not_shown_are_not_known_and_an_unmounted_dataset_says_so():
    text = f"{DS}\tfilesystem\t-\t-\tno\n{DS}@a\tsnapshot\t-\t-\t-\n"
    f = parse(text, DS)
    assert f.mounted is False and f.snapshots == (ZfsSnapshot("a", None),)
