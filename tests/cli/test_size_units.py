"""Issue 31: one unit convention everywhere, said. Sizes are shown in powers of 1000 (kB,
MB, GB, TB: ``df -H``, ``du --si``); what a user types is read the same way (KiB, MiB, GiB,
TiB when they are meant), and what the README and the help say of the demo is what the demo
shows."""

from __future__ import annotations

import io
import os
import re
import time

from harness.paths import README

from vacate import demo
from vacate.cli.archive_cmd import parse_size
from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.human import human_bytes


def test_a_size_typed_is_read_as_a_size_shown():
    assert parse_size("1G") == parse_size("1GB") == 10**9
    assert human_bytes(parse_size("1G")) == "1.0 GB"
    assert human_bytes(parse_size("256K")) == "256.0 kB"
    assert parse_size("1GiB") == parse_size("1Gi") == 2**30
    assert parse_size("4MiB") == 4 << 20


def test_the_demo_model_is_the_size_the_readme_and_help_say(tmp_path, capsys):
    demo.build_model(str(tmp_path), time.time())
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(tmp_path)
                for f in fs)
    said = f"{total / 10**9:.0f} GB"               # as the demo shows it: 234.0 GB
    assert human_bytes(total).startswith(said.split()[0])
    with open(README) as f:
        readme = f.read()
    assert f"a {said} NVFP4 model" in readme
    assert re.search(r"powers of 1000", readme)
    main(["--help"], Env(stdout=io.StringIO(), stderr=io.StringIO(), stdin=None))
    shown = " ".join(capsys.readouterr().out.split())
    assert f"{said} model" in shown and "powers of 1000" in shown
