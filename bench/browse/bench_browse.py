"""``vacate browse`` on an observation of the 1M-entry shape: open time (the document read,
the screen's model made, the first screen drawn), peak memory, and the time each keypress
takes to answer, headless (Textual's Pilot) at 80x24.

The observation is generated from the story's (tests/fixtures/observations/story.json): its
drill-down replaced by 40,000 directories holding 900,000 files under 4 top-level
directories, one directory of 100,000 subdirectories of a file each (the virtual list's
case) and one directory of 100,000 files. ``--files``: the full file listing beside it too
(``OBS.files``, as ``vacate observe --files`` writes it: 1,100,000 files), opened with it,
and Enter into the directory of 100,000 files measured.

    PYTHONPATH=src python3 bench/browse/bench_browse.py [--files] [--keep FILE]
"""

from __future__ import annotations

import asyncio
import gc
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
    rows.append(["/data/flat", 100_000 * 4096 + 4096, 100_000 * 4096 + 4096, 100_000, 1, t0, t0])
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


class _Record:
    """A walk's record of the generated tree (what ``scan(..., record_tree=True)`` keeps):
    the files each directory's row counts, named f0, f1, ..."""

    def __init__(self, rows: list[list]):
        self.rows = {r[0]: r for r in rows}
        self.own = {}
        for r in rows:       # the files directly in each directory: its own less its subdirs'
            self.own[r[0]] = self.own.get(r[0], 0) + r[3]
            parent = os.path.dirname(r[0])
            if parent in self.rows and r[0] != parent:
                self.own[parent] = self.own.get(parent, 0) - r[3]

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, path):
        r = self.rows[path]
        t = r[5] / 1e9
        n = self.own[path]
        return (path, 4096, 8, t, 0, [(f"f{i}", 4096, 8, t - i, i, 1, 0o100000)
                                      for i in range(n)], (), False)


def generate_files(path: str) -> str:
    """The full listing beside the generated observation, as vacate observe --files
    writes it."""
    from vacate.output import files_listing

    with open(path, "rb") as f:
        data = f.read()
    doc = json.loads(data)
    out = files_listing.beside(path)
    files_listing.write(out, _Record(doc["inventory"]["dirs"]["rows"]), "/data", data)
    return out


async def drive(path: str, files: bool = False) -> dict:
    from vacate.browse.app import Browse
    from vacate.browse.model import Volume
    from vacate.observing.model.observation import Observation

    started = time.perf_counter()
    listed = None
    if files:
        from vacate.cli.browse_cmd import _files_beside

        listed, said = _files_beside(path)
        assert listed is not None, said
    with open(path) as f:  # noqa: ASYNC230 (the read is what is timed)
        obs = Observation.loads(f.read())
    loaded = time.perf_counter()
    vol = Volume(obs, archive_to="/mnt/backup", files=listed)
    gc.freeze()                   # as vacate browse does
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
        # into the directory of 100,000 files (its files listed when --files)
        at = [e.name for e in app.lst.entries].index("flat")
        await pilot.press("home", *["j"] * at)
        t = time.perf_counter()
        await pilot.press("enter")
        await pilot.pause()
        times["enter flat"] = time.perf_counter() - t
        out["entries_in_flat"] = len(app.lst.entries)
        if files:
            t = time.perf_counter()
            await pilot.press("space", "k")
            await pilot.pause()
            times["flat: mark a file (space k)"] = time.perf_counter() - t
            out["marked"] = dict(app.vol.marks)
        out["keys"] = times
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    args = sys.argv[1:]
    files = "--files" in args
    keep = args[args.index("--keep") + 1] if "--keep" in args else None
    path = keep or os.path.join(tempfile.mkdtemp(), "big.obs.json")
    if not os.path.exists(path):
        generate(path)
    print(f"observation: {os.path.getsize(path) / 1e6:.1f} MB", file=sys.stderr)
    if files:
        from vacate.output import files_listing

        side = files_listing.beside(path)
        if not os.path.exists(side):
            t = time.perf_counter()
            generate_files(path)
            print(f"listing written in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        print(f"listing: {os.path.getsize(side) / 1e6:.1f} MB", file=sys.stderr)
    got = asyncio.run(drive(path, files))
    print(json.dumps(got, indent=1))


if __name__ == "__main__":
    main()
