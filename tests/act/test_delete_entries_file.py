"""The delete-safety tests of test_delete.py run again, unchanged, against the record apply
uses: the entries file a plan writes beside itself (each directory's rows read from it, and
checked against its index, as that directory is emptied), not the record in memory.

Each test's ``record(vol, rel)`` also writes the entries file at that moment (before the test
changes anything), and its ``delete(vol, item, rec)`` deletes from that file."""

import os

import pytest
import test_delete as base
from test_delete import (  # noqa: F401  (vol: the fixture; the rest: the tests, collected again here)
    test_a_bind_of_the_same_filesystem_is_not_entered,
    test_a_btrfs_subvolume_in_an_item_is_deleted_a_read_only_snapshot_is_manual,
    test_a_file_changed_after_recording_is_kept,
    test_a_file_replaced_by_another_is_kept,
    test_a_file_written_after_recording_is_kept_and_named,
    test_a_recorded_tree_is_deleted_and_nothing_else,
    test_an_item_that_is_a_file_or_a_symlink,
    test_nothing_on_a_nested_mount_is_touched,
    test_odd_names_survive_a_json_round_trip_and_are_deleted,
    test_paths_longer_than_path_max,
    test_symlinks_are_removed_as_themselves_never_followed,
    test_the_workers_delete_what_one_process_would,
    test_what_a_nested_mount_hid_is_kept_when_it_goes_away,
    test_wide_directories_with_few_fds,
    vol,
)

from vacate.act.delete import EntriesFile, delete_item
from vacate.observing.entries import write_entries_file

pytestmark = pytest.mark.root


@pytest.fixture(autouse=True)
def through_the_entries_file(monkeypatch, tmp_path):
    written = {}                 # (item, digest) -> what write_entries_file said
    record, used = base.record, []

    def record_to_file(v, rel):
        item, rec = record(v, rel)
        w = write_entries_file(item, dev=os.stat(v.mountpoint).st_dev,
                               directory=str(tmp_path))
        assert w.digest == rec.digest() and w.entries == len(rec)
        written[(rec.item, rec.digest())] = w
        return item, rec

    def delete_from_file(v, item, rec, **kw):
        w = written[(rec.item, rec.digest())]
        with EntriesFile(os.path.join(str(tmp_path), w.file), sha256=w.sha256,
                         index_at=w.index_at) as f:
            used.append(w.file)
            return delete_item(item, f, target_root=v.mountpoint,
                               dev=os.stat(v.mountpoint).st_dev, **kw)

    monkeypatch.setattr(base, "record", record_to_file)
    monkeypatch.setattr(base, "delete", delete_from_file)
    yield
    assert used or not written, "the test deleted without its entries file"
