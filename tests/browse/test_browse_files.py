"""The full file listing: ``vacate observe -o OBS --files`` on a real volume writes
``OBS.files`` beside the observation; ``vacate browse OBS`` then lists every file of a
directory (odd names escaped) and marks a single file, which the plan takes as an override.
Without the listing, or with one of another observation, a directory shows its files as
"N files"."""

from __future__ import annotations

import os

import pytest
from harness.browse_run import run, screen_text
from harness.retire import cli

from vacate.browse.app import Browse
from vacate.browse.model import View, Volume
from vacate.cli.browse_cmd import _files_beside
from vacate.observing.model.observation import Observation
from vacate.output import files_listing


def _tree(root: str) -> None:
    os.makedirs(os.path.join(root, "runs", "exp1"))
    for i, size in enumerate((30000, 200000, 1000)):
        with open(os.path.join(root, "runs", f"ckpt{i}.pt"), "wb") as f:
            f.write(b"x" * size)
    with open(os.path.join(root, "runs", "exp1", "log.txt"), "w") as f:
        f.write("loss 0.1\n")
    with open(os.fsencode(os.path.join(root, "runs", "bad")) + b"\xff[bold]", "wb") as f:
        f.write(b"y")
    os.makedirs(os.path.join(root, "many"))     # more files than the observation names
    for i in range(60):
        with open(os.path.join(root, "many", f"part-{i:02d}"), "w") as f:
            f.write("z")


def _observe(ext4_volume, tmp_path, *more) -> str:
    _tree(ext4_volume.mountpoint)
    obs = str(tmp_path / "obs.json")
    rc, _, err = cli("observe", ext4_volume.mountpoint, "-o", obs, *more)
    assert rc == 0, err
    return obs


def _volume(obs: str) -> tuple[Volume, str]:
    files, said = _files_beside(obs)
    with open(obs) as f:
        return Volume(Observation.loads(f.read()), archive_to="/mnt/backup", files=files), said


def _rows(files) -> list[tuple]:
    return [files.row(k) for k in range(len(files))]


@pytest.mark.slow
def test_browse_lists_every_file_and_marks_one(ext4_volume, tmp_path):
    obs = _observe(ext4_volume, tmp_path, "--files")
    assert os.path.exists(obs + ".files")
    vol, said = _volume(obs)
    assert said == ""
    app = Browse(vol)

    async def script(app, pilot):
        names = [e.name for e in app.lst.entries]
        at = names.index("runs")
        await pilot.press("home", *["j"] * at, "enter")
        entries = list(app.lst.entries)
        # every file, largest first (equal sizes by name), each a file row; no "N files"
        assert [(e.name, e.kind) for e in entries] == [
            ("ckpt1.pt", "file"), ("ckpt0.pt", "file"), ("exp1", "dir"),
            ("bad\udcff[bold]", "file"), ("ckpt2.pt", "file")]
        screen = screen_text(app)
        assert "ckpt1.pt" in screen and "ckpt2.pt" in screen
        assert "bad\\xff[bold]" in screen          # escaped, never read as markup
        await pilot.press("home", "space", "k")     # a single file, kept
        assert app.vol.marks == {f"{ext4_volume.mountpoint}/runs/ckpt1.pt": "keep"}
        assert app.vol.overrides() == [("keep", "runs/ckpt1.pt")]
        item = app.vol.plan_items[f"{ext4_volume.mountpoint}/runs/ckpt1.pt"]
        assert item.action == "keep"
        await pilot.press("enter")                  # a file: nothing to go into
        assert app.cwd == f"{ext4_volume.mountpoint}/runs"
        await pilot.press("j", "j", "enter")        # exp1/: its one file
        assert [e.name for e in app.lst.entries] == ["log.txt"]
    run(app, script)
    many = vol.listing(f"{ext4_volume.mountpoint}/many", View())
    assert [e.name for e in many] == [f"part-{i:02d}" for i in range(60)]


def test_without_the_listing_a_directory_counts_its_files(ext4_volume, tmp_path):
    obs = _observe(ext4_volume, tmp_path)
    assert not os.path.exists(obs + ".files")
    vol, _ = _volume(obs)
    got = list(vol.listing(f"{ext4_volume.mountpoint}/many", View()))
    named = [e for e in got if e.kind == "file"]
    assert len(named) < 60
    assert got[-1].kind == "rest" and got[-1].files == 60 - len(named)
    assert got[-1].name == f"{60 - len(named)} files" + (" more" if named else "")


def test_a_listing_of_another_observation_is_not_used(ext4_volume, tmp_path):
    obs = _observe(ext4_volume, tmp_path, "--files")
    with open(obs, "ab") as f:            # the observation is not the one listed
        f.write(b" ")
    vol, said = _volume(obs)
    assert vol.listed is None
    assert "another observation" in said


def test_the_listing_reads_one_directory_at_a_time(ext4_volume, tmp_path):
    obs = _observe(ext4_volume, tmp_path, "--files")
    with open(obs, "rb") as f:
        lst = files_listing.Listing(obs + ".files", files_listing.digest(f.read()))
    runs = f"{ext4_volume.mountpoint}/runs"
    assert lst.head["root"] == ext4_volume.mountpoint and lst.files >= 5
    # in name order, each as a drill-down row: (path, apparent, disk, 1 file, 0 dirs, mtime)
    assert [r[0] for r in _rows(lst.get(runs))] == [f"{runs}/{n}" for n in (
        "bad\udcff[bold]", "ckpt0.pt", "ckpt1.pt", "ckpt2.pt")]
    rows = {r[0]: r for r in _rows(lst.get(runs))}
    ckpt1 = rows[f"{runs}/ckpt1.pt"]
    assert ckpt1[1] == 200000 and ckpt1[2] >= 200000 and ckpt1[3:5] == (1, 0)
    assert abs(ckpt1[5] / 1e9 - os.stat(f"{runs}/ckpt1.pt").st_mtime) < 1e-6
    assert _rows(lst.get(f"{runs}/nothing-here")) == []
    # the walk's own record (browse on a PATH) reads the same
    from vacate.observing.observe import observe

    walked = observe(ext4_volume.mountpoint, users=False, record_tree=True).inventory.listing
    own = files_listing.FromWalk(walked)
    assert {d: _rows(own.get(d)) for d in walked if len(own.get(d))} == \
        {d: _rows(lst.get(d)) for d in lst}
    own.close()
    lst.close()


def test_observe_files_needs_an_output_and_the_volume_here(ext4_volume, tmp_path):
    rc, _, err = cli("observe", ext4_volume.mountpoint, "--files")
    assert rc != 0 and "-o FILE" in err
    rc, _, err = cli("observe", ext4_volume.mountpoint, "--files", "--no-scan",
                     "-o", str(tmp_path / "o.json"))
    assert rc != 0 and "--no-scan" in err
    assert not os.path.exists(tmp_path / "o.json.files")
