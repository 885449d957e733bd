"""``vacate browse`` on an observation of the 1M-entry shape: open time (the document read,
the screen's model made, the first screen drawn), peak memory, and the time each keypress
takes to answer, headless (Textual's Pilot) at 80x24.

The observation is generated from the story's (tests/fixtures/observations/story.json): its
drill-down replaced by 40,000 directories holding 1,000,000 files under 4 top-level
directories, plus one directory of 100,000 subdirectories (the virtual list's case).

    PYTHONPATH=src python3 bench/browse/bench_browse.py [--keep FILE]
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STORY = os.path.join(HERE, "..", "..", "tests", "fixtures", "observations", "story.json")


def generate(path: str) -> None:
    with open(STORY) as f:
        doc = json.load(f)
    rows = []
    items = []
    t0 = doc["inventory"]["dirs"]["rows"][0][5]
    for t in range(4):
        top = f"/data/top{t}"
        subs = []
        for a in range(1000):
            mid = f"{top}/m{a}"
            leaves = [[f"{mid}/d{b}", 25 * 4096 * (b + 1), 25 * 4096 * (b + 1), 25, 1,
                       t0 - b * 10**9, t0] for b in range(9)]
            rows += leaves
            rows.append([mid, sum(r[1] for r in leaves), sum(r[2] for r in leaves), 225, 10,
                         t0, t0])
            subs.append(rows[-1])
        rows.append([top, sum(r[1] for r in subs), sum(r[2] for r in subs),
                     sum(r[3] for r in subs), len(subs) * 10 + 1, t0, t0])
        items.append(rows[-1])
    wide = "/data/wide"
    leaves = [[f"{wide}/w{i:06d}", 4096 * (i % 97 + 1), 4096 * (i % 97 + 1), 1, 1, t0, t0]
              for i in range(100_000)]
    rows += leaves
    rows.append([wide, sum(r[1] for r in leaves), sum(r[2] for r in leaves), len(leaves),
                 len(leaves) + 1, t0, t0])
    items.append(rows[-1])
    rows.append(["/data", sum(r[1] for r in items), sum(r[2] for r in items),
                 sum(r[3] for r in items), len(rows) + 1, t0, t0])
    rows.sort(key=lambda r: r[0])
    inv = doc["inventory"]
    inv["dirs"]["rows"] = rows
    template = inv["items"][0]
    inv["items"] = [dict(template, id="item:" + os.path.basename(r[0]), path=r[0], parent=None,
                         is_dir=True, apparent_bytes=r[1], disk_bytes=r[2], files=r[3],
                         dirs=r[4], kind="directory", label="directory", recoverable=None,
                         source=None, details={}, confidence=0.0, guess=False, evidence=[])
                    for r in items]
    inv["largest_files"] = []
    inv["entries"] = sum(r[3] for r in items) + len(rows)
    doc["consumers"] = []
    with open(path, "w") as f:
        json.dump(doc, f)


async def drive(path: str) -> dict:
    from vacate.observing.model.observation import Observation
    from vacate.output.browse.app import Browse
    from vacate.output.browse.model import Volume

    started = time.perf_counter()
    with open(path) as f:
        obs = Observation.loads(f.read())
    loaded = time.perf_counter()
    vol = Volume(obs, archive_to="/mnt/backup")
    made = time.perf_counter()
    app = Browse(vol)
    out = {"read": loaded - started, "model": made - loaded}
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        out["open"] = time.perf_counter() - started
        times = {}
        for keys in (["x"], ["j"], ["k"], ["pagedown"], ["end"], ["home"], ["enter"], ["backspace"],
                     ["n"], ["s"], ["a"], ["space", "k"]):
            # "wide" (100,000 entries) is the second biggest: into it and about
            if keys == ["enter"]:
                at = [e.name for e in app.lst.entries].index("wide")
                await pilot.press("home", *["j"] * at)
            t = time.perf_counter()
            await pilot.press(*keys)
            await pilot.pause()
            times["+".join(keys)] = time.perf_counter() - t
            if keys == ["enter"]:
                out["entries_in_wide"] = len(app.lst.entries)
                for k in ("j", "end", "pagedown", "home"):
                    t = time.perf_counter()
                    await pilot.press(k)
                    await pilot.pause()
                    times[f"wide:{k}"] = time.perf_counter() - t
        out["keys"] = times
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    keep = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--keep" else None
    path = keep or os.path.join(tempfile.mkdtemp(), "big.obs.json")
    if not os.path.exists(path):
        generate(path)
    print(f"observation: {os.path.getsize(path) / 1e6:.1f} MB", file=sys.stderr)
    got = asyncio.run(drive(path))
    print(json.dumps(got, indent=1))


if __name__ == "__main__":
    main()
