"""The report's page opened in a real headless Chromium (Debian's, driven by chromedriver
through selenium) in an empty network namespace: no console errors, no request but the file
itself, no dialog; hostile file names render as text; one tile per shown item, areas
proportional to bytes (from the DOM); the text a person needs is there with scripts off.
The screenshots stay in the test's tmp dir (``pytest --basetemp=DIR`` keeps them where a
person can look)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict

import pytest
from harness import extras
from harness.paths import HARNESS, STORY
from harness.retire import Story, cli
from harness.volumes import can_loop_mount

pytestmark = [pytest.mark.root, pytest.mark.slow]

HOSTILE = ["<img src=x onerror=alert(1)>", '"><svg onload=alert(2)>', "{{7*7}}",
           "new\nline", "rtl-\u202egnp.exe", b"latin1-\xe9\xff"]
BROWSER = os.path.join(HARNESS, "report_browser.py")


def _browser_missing() -> str | None:
    for b in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        if not os.path.exists(b):
            return f"{b} is missing (scripts/test-deps.sh installs it)"
    extras.module("selenium")        # a test extra: missing, the test fails
    return None


def look(page: str, tmp: str) -> dict:
    out = os.path.join(tmp, "look.json")
    shot = os.path.join(tmp, os.path.basename(page).replace(".html", ".png"))
    subprocess.run(["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"',
                    sys.executable, BROWSER, page, out, shot], check=True, timeout=240)
    with open(out) as f:
        return json.load(f)


@pytest.fixture
def story(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    why = _browser_missing()
    if why:
        pytest.skip(why)
    s = Story(str(tmp_path), size_mb=160)
    hostile = os.path.join(s.m, "runs", "odd")
    os.makedirs(hostile)
    for n in HOSTILE:
        p = os.path.join(os.fsencode(hostile), n if isinstance(n, bytes) else n.encode())
        os.makedirs(p)
        with open(os.path.join(p, b"f"), "wb") as f:
            f.write(os.urandom(300_000 * (2 + HOSTILE.index(n))))
    with open(os.path.join(s.m, "<b onmouseover=alert(3)>top{{1+1}}.txt"), "wb") as f:
        f.write(os.urandom(300_000))
    yield s
    s.close()


def _check_page(res: dict, names: list[str]) -> None:
    for mode in ("on", "off", "phone"):
        r = res[mode]
        assert r["alert"] is None and r.get("alert_after") is None, mode
        assert [c for c in r["console"] if c["level"] in ("SEVERE", "WARNING")] == [], mode
        assert {u for u in r["requests"]} <= {u for u in r["requests"]
                                              if u.startswith("file://")}, mode
        assert len(r["requests"]) == 1, r["requests"]
    on = res["on"]
    assert on["injected"] == 0
    assert on["zoomed"] is True
    for n in names:
        assert n in on["text"] or n in res["off"]["text"], n


def _proportional(tiles: list[dict]) -> int:
    """Sibling tiles' areas are proportional to their bytes, within the rounding of a few
    pixels; returns how many sibling groups were checked."""
    groups = defaultdict(list)
    for t in tiles:
        groups[t["p"]].append(t)
    checked = 0
    for sib in groups.values():
        big = [t for t in sib if t["w"] > 12 and t["h"] > 12]
        if len(big) < 2:
            continue
        ratio = [t["w"] * t["h"] / t["bytes"] for t in big]
        for t, q in zip(big, ratio):
            slack = 2 * (t["w"] + t["h"]) * 1.5 / (t["w"] * t["h"])   # a border's pixels
            assert abs(q / ratio[0] - 1) < 0.05 + slack, (t, big[0])
        checked += 1
    return checked


def test_the_page_of_an_applied_plan(story, tmp_path):
    s = story
    s.make_plan("--keep", "<b onmouseover=alert(3)>top{{1+1}}.txt")
    rc, _out, err = cli("apply", s.plan, "--yes", "--json")
    assert rc == 0, err
    page = os.path.join(tmp_path, "report.html")
    rc, _out, err = cli("report", s.plan, "--html", page)
    assert rc == 0, err
    with open(page, encoding="utf-8") as f:
        html = f.read()
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert "<img src=x" not in html and "<svg onload" not in html
    assert "{{7*7}}" in html and "<bdi>49</bdi>" not in html
    res = look(page, str(tmp_path))
    _check_page(res, ["<b onmouseover=alert(3)>top{{1+1}}.txt", "space freed", "archived", "What remains"])
    on = res["on"]
    # one tile per shown item, the hostile names among them as text
    texts = " ".join(t["text"] for t in on["tiles"])
    for n in ("<img src=x onerror=alert(1)>", '"><svg onload=alert(2)>', "{{7*7}}",
              "new\\nline", "latin1-\\xe9\\xff"):
        assert n in texts, n
    assert _proportional(on["tiles"]) >= 2
    tops = [t for t in on["tiles"] if t["p"] == -1]
    assert {t["text"].split(" ")[0] for t in tops} >= {"runs", "cache", "cuda.run"}
    # what a person needs is in the page with scripts off too
    off = res["off"]["text"]
    for needed in ("retired", "gone:", "What was there", "What used it", "What was done",
                   "What remains", f"{s.m}/notes.txt"):
        assert needed in off, needed
    assert os.path.getsize(os.path.join(tmp_path, "report.png")) > 10_000


def test_the_page_with_names_hidden(story, tmp_path):
    s = story
    s.make_plan()
    page = os.path.join(tmp_path, "hidden.html")
    rc, _out, err = cli("report", s.plan, "--html", page, "--hide-names")
    assert rc == 0, err
    with open(page, encoding="utf-8") as f:
        html = f.read()
    for secret in ("exp1", "ckpt", "w.bin", "00001.bin", "onerror", "svg", "7*7", "latin1"):
        assert secret not in html, secret
    res = look(page, str(tmp_path))
    _check_page(res, ["runs", "cache", "cuda.run"])


def test_the_page_of_a_saved_observation(tmp_path):
    """The story's observation (tests/fixtures/observations/story.json): a sparse volume
    (4.3 GB apparent, 4 kB on disk), drawn both ways."""
    why = _browser_missing()
    if why:
        pytest.skip(why)
    from vacate.cli.env import Env
    from vacate.cli.main import main

    src = STORY
    page = os.path.join(tmp_path, "story.html")
    assert main(["report", src, "--html", page], Env()) == 0
    res = look(page, str(tmp_path))
    _check_page(res, ["sglang-kimi.service", "/etc/systemd/system/sglang-kimi.service:4",
                      "Qwen3.5-397B-A17B-NVFP4"])
    assert _proportional(res["on"]["tiles"]) >= 2
    shutil.copy(os.path.join(tmp_path, "story.png"), os.path.join(tmp_path, "story-kept.png"))
