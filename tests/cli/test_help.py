"""Issue 31: help a sysadmin can trust. Every command's ``--help`` lists its exit status;
apply's says what it does to the machine (and its 4); ``-o`` is a file to write wherever it
is taken; a required PATH is shown as required; the README lists every command and option
the issue named, and its claims about ``--json`` are true of the parsers."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import pytest
from harness.paths import ROOT, STORY

from vacate.cli.env import Env
from vacate.cli.main import COMMANDS, build_parser, main


def helps(name: str) -> str:
    r = subprocess.run([sys.executable, "-m", "vacate", name, "--help"], capture_output=True,
                       text=True, env=dict(os.environ, COLUMNS="100"), check=True)
    return r.stdout


def subparsers():
    p = build_parser()
    (sub,) = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sub.choices


@pytest.mark.parametrize("name", [n for n, _ in COMMANDS])
def test_every_command_lists_its_exit_status(name):
    text = helps(name)
    assert "exit status:" in text
    codes = re.findall(r"^\s+(\d)\s", text.split("exit status:")[1], re.MULTILINE)
    assert "0" in codes and "2" in codes, text


def test_apply_says_what_it_does_to_the_machine_and_what_4_means():
    text = " ".join(helps("apply").split())
    for does in ("stops", "ends processes", "deletes", "unmounts", "chattr +i", "swap",
                 "asks first", "--dry-run checks every step"):
        assert does in text, does
    assert re.search(r"\b4 all vacate can do is done and manual steps remain", text)


def test_o_is_a_file_to_write_for_every_command_that_takes_it():
    for name, sp in subparsers().items():
        for a in sp._actions:
            if "-o" in a.option_strings:
                assert "--output" in a.option_strings, name
                assert a.metavar in ("FILE", "PLAN"), (name, a.metavar)


def test_check_o_writes_the_document_and_o_dir_is_not_a_file(tmp_path):
    out = tmp_path / "check.json"
    e = io.StringIO()
    rc = main(["check", "--from", STORY, "-o", str(out)],
              Env(stdout=io.StringIO(), stderr=e, stdin=None))
    assert rc == 1, e.getvalue()
    assert json.loads(out.read_text())["schema"] == "vacate.check/1"
    rc = main(["check", "--from", STORY, "-o", str(tmp_path)],
              Env(stdout=io.StringIO(), stderr=e, stdin=None))
    assert rc == 2 and "is a directory" in e.getvalue()


@pytest.mark.parametrize("name", ["check", "plan", "scan"])
def test_a_required_path_is_shown_as_required(name):
    usage = helps(name).split("\n\n")[0]
    assert f"vacate {name} [options] PATH" in usage and "[PATH]" not in usage
    assert "[path]" not in usage


def test_the_same_words_for_the_same_thing():
    for name in ("check", "scan", "observe"):
        assert "mountpoint" not in helps(name)


def test_the_readme_lists_every_command_and_tells_the_truth_about_json():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    for name, _ in COMMANDS:
        assert f"`vacate {name}" in readme, name
    for said in ("--migrate P=DEST", "--mask-references", "--html FILE", "--hide-names",
                 "`vacate undo PLAN`"):
        assert said in readme, said
    assert "Every command but `demo` takes `--json`" not in readme
    line = re.search(r"^(.*?) take `--json`", readme, re.MULTILINE | re.DOTALL)
    claimed = set(re.findall(r"`(\w+)`", readme[line.start():line.end()].split("\n\n")[-1]))
    takes = {n for n, sp in subparsers().items()
             if any("--json" in a.option_strings for a in sp._actions)}
    assert claimed == takes, (claimed, takes)
