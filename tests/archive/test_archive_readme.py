"""Every archive passes the stock check its own README gives, run as written: one of an empty
tree too (an empty SHA256SUMS makes `sha256sum -c` fail, so the README must not ask for it)."""

import os
import subprocess

import pytest
from harness.retire import cli


def _readme_commands(archive: str) -> list[str]:
    """The README's command lines, in order (its indented lines under 'Check' and
    'Restore'), as a person would paste them."""
    with open(os.path.join(archive, "README")) as f:
        text = f.read()
    block = text.split("Check the parts", 1)[1].split("\nNotes", 1)[0]
    return [ln.strip() for ln in block.splitlines()
            if ln.startswith("  ") and not ln.strip().startswith("#")]


@pytest.mark.parametrize("files", [0, 2])
def test_the_readme_check_passes_as_written(tmp_path, files):
    src = tmp_path / "models"
    (src / "empty-model").mkdir(parents=True)
    for i in range(files):
        (src / f"f{i}.txt").write_text(f"{i}\n")
    rc, _out, err = cli("archive", str(src), "--to", str(tmp_path / "bk"), "--no-progress")
    assert rc == 0, err
    arch = tmp_path / "bk" / "models"
    script = "set -e\ncd " + str(arch) + "\n" + "\n".join(_readme_commands(str(arch))) + "\n"
    r = subprocess.run(["sh", "-c", script], check=False, capture_output=True, text=True, cwd=arch)
    assert r.returncode == 0, r.stderr
    assert (arch / "OUT" / "models" / "empty-model").is_dir()


def test_a_destination_inside_the_source_is_said_so_not_excluded_as_asked(tmp_path):
    src = tmp_path / "data"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    rc, out, err = cli("archive", str(src), "--to", str(src / "bk"), "--no-progress")
    assert rc == 0, err
    assert "excluded as asked" not in out + err
    assert "the destination lies inside the source: data/bk/data" in out, out
    rc, out, err = cli("archive", str(src), "--to", str(tmp_path / "bk2"), "--exclude", "a.txt",
                       "--no-progress")
    assert rc == 0 and "excluded as asked: data/a.txt" in out, out + err


def test_the_rate_of_a_sparse_file_is_the_rate_of_what_was_hashed(tmp_path):
    src = tmp_path / "data"
    src.mkdir()
    with open(src / "sparse.img", "wb") as f:
        f.write(b"head")
        f.truncate(256 << 20)
    rc, out, err = cli("archive", str(src), "--to", str(tmp_path / "bk"), "--no-progress")
    assert rc == 0, err
    assert "268.4 MB hashed, holes included" in out, out
    assert "/s hashed)" in out, out
