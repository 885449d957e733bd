"""The report of the story's saved observation (tests/fixtures/observations/story.json), in
the terminal and as a page, and the treemap's bounds on a drill-down table of a million
entries' shape (no browser, no root: see test_report_page.py for the page in Chromium)."""

from __future__ import annotations

import io
import json
import re
import time

from harness.paths import STORY

from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.model.observation import Observation
from vacate.output.html import treemap
from vacate.output.html.page import render
from vacate.output.report import report_of_observation
from vacate.output.report_names import Hider, shown


def _story() -> Observation:
    with open(STORY) as f:
        return Observation.loads(f.read())


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), Env(stdout=out, stderr=err, stdin=None))
    return rc, out.getvalue(), err.getvalue()


def test_a_saved_observation_is_reported():
    rc, out, err = cli("report", STORY, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "vacate.report/1" and doc["source"] == "observation"
    rows = {r["path"]: r for r in doc["there"]["rows"]}
    assert rows["/data/models"]["status"] == "active"
    assert rows["/data/eagle3"]["status"] == "referenced"
    assert rows["/data/eagle3"]["users"] == ["systemd-unit:sglang-kimi.service"]
    inside = {i["path"]: i for i in doc["there"]["inside"]}
    assert inside["/data/models/Qwen3.5-397B-A17B-NVFP4"]["parent"] == "/data/models"
    assert inside["/data/eagle3/cache/hidden_states"]["kind"]
    assert {g["key"] for g in doc["used_by"]} == {"process:6206:76477",
                                                  "systemd-unit:sglang-kimi.service"}
    rc, text, err = cli("report", STORY)
    assert rc == 0, err
    assert "/data: observed" in text and "/etc/systemd/system/sglang-kimi.service:4" in text


def test_names_are_text_in_the_terminal_and_on_the_page():
    obs = _story()
    doc = report_of_observation(obs)
    evil = "/data/[bold red]x[/]<script>alert(1)</script>\n\udcff\u202e"
    doc["there"]["rows"][0]["path"] = evil
    doc["remains"]["kept"][0]["path"] = evil
    from rich.console import Console

    from vacate.output import report_text

    out = io.StringIO()
    report_text.render(doc, Console(file=out, width=200))
    assert "[bold red]x[/]<script>alert(1)</script>\\n\\xff\\u202e" in out.getvalue()
    page = render(doc, obs)
    assert "<script>alert" not in page
    assert "[bold red]x[/]&lt;script&gt;alert(1)&lt;/script&gt;\\n\\xff\\u202e" in page
    assert shown("ok") == "ok"


def test_hidden_names_leave_no_path_below_the_top_level():
    obs = _story()
    page = render(report_of_observation(obs), obs, hide_names=True)
    below = {d.path for d in obs.inventory.dirs if d.path.count("/") > 2}
    below |= {p for c in obs.consumers for p in c.paths}
    for p in below:
        assert p not in page, p
    for name in ("hidden_states", "Qwen3.5-397B-A17B-NVFP4", "SpecForge", "epoch_3",
                 "sharegpt", "model-00001-of-00061"):
        assert name not in page, name
    assert "/data/models/…" in page
    h = Hider("/data", ["runs"])
    assert h.text('ExecStart=/x /data/runs/a"b c') == "ExecStart=/x /data/runs/…"
    assert h.text("restore /b/runs runs/exp1/ckpt --to DIR") == "restore /b/runs runs/…"


def _big_table(dirs: int, per: int) -> tuple[list, list]:
    """A drill-down table shaped like a million-entry tree: ``dirs`` directories of
    ``per`` files each, under 4 top-level directories, three levels deep."""
    rows, tops = [], []
    for t in range(4):
        top = f"/v/top{t}"
        subs = []
        for a in range(dirs // 40):
            mid = f"{top}/m{a}"
            big = 4096 * (1 + 2000 // (a + 1))          # a few large, many small
            leaves = [[f"{mid}/d{b}", per * big, per * big * (1 + b % 3), per, 1, 0, 0]
                      for b in range(10)]
            rows += leaves
            rows.append([mid, sum(r[1] for r in leaves), sum(r[2] for r in leaves),
                         10 * per, 11, 0, 0])
            subs.append(rows[-1])
        rows.append([top, sum(r[1] for r in subs), sum(r[2] for r in subs),
                     sum(r[3] for r in subs), 0, 0, 0])
        tops.append({"path": top, "kind": "directory", "label": "", "is_dir": True,
                     "disk_bytes": rows[-1][2], "apparent_bytes": rows[-1][1],
                     "files": rows[-1][3]})
    rows.sort()
    return tops, rows


def test_the_treemap_is_bounded_by_design():
    tops, rows = _big_table(40_000, 25)          # 40,000 directories, 1,000,000 files
    started = time.perf_counter()
    lay = treemap.layout(tops, rows, [], max_tiles=3000)
    took = time.perf_counter() - started
    assert 100 < len(lay.tiles) <= 3000 and lay.folded > 0
    assert any(t.kind == "fold" and re.match(r"\d+ smaller items \(", t.name)
               for t in lay.tiles)
    assert took < 5, took
    # siblings' areas are proportional to their bytes
    by_parent: dict[int, list] = {}
    for t in lay.tiles:
        by_parent.setdefault(t.parent, []).append(t)
    for sib in by_parent.values():
        q = [t.w * t.h / t.bytes for t in sib]
        assert max(q) / min(q) < 1.0001


def test_what_used_it_shows_each_piece_of_evidence_on_its_own_line_and_no_name_twice():
    """Issue 31: the evidence cell showed a literal ``\\n`` between its lines, and "who" and
    "consumer" repeated the same text for a consumer that is its own group."""
    from rich.console import Console

    from vacate.output.report_text import render as render_text

    doc = report_of_observation(_story())
    proc = next(c for c in doc["used"] if c["type"] == "process")
    proc["evidence"] = [dict(proc["evidence"][0], source="/proc/6206/fd/4", kind="fd"),
                        *proc["evidence"]]
    # a process that runs in a unit is shown under the unit, by name once
    doc["used_by"] = [{"key": "systemd-unit:sglang-kimi.service", "type": "systemd-unit",
                       "name": "sglang-kimi.service",
                       "consumers": ["systemd-unit:sglang-kimi.service", proc["id"]]}]
    console = Console(file=io.StringIO(), width=200, color_system=None)
    render_text(doc, console)
    out = console.file.getvalue()
    table = out[out.index("what used it"):]
    assert "\\n" not in table
    rows = [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in table.splitlines() if line.startswith("│")]
    assert ["systemd-unit sglang-kimi.service", "",
            "/etc/systemd/system/sglang-kimi.service:4 (unit-file)"] in rows
    assert ["", "process python3", "/proc/6206/fd/4 (fd)"] in rows
    assert ["", "", "/proc/6206/maps (mmap)"] in rows
    assert all(r[0] != r[1] for r in rows if r[0])
