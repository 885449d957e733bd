"""`vacate scan --json` against `du -s`, `gdu -npc` and `ncdu -o` on the cached 1,000,000-file
ext4 tree (bench_scan_tree.py; tree 2, the realistic hub, unless ``--tree 1``), warm and cold
page cache, runs interleaved, medians and ratios.

    sudo python3 bench/scan/bench_scan.py [--warm N] [--cold N] [--only warm|cold] [--tree 1|2]
        [--baseline-src /tmp/before/src] [--tools vacate,du,...] [--path DIR]

vacate is timed two ways: ``vacate`` / ``vacate-sizes`` are ``sys.executable -m vacate`` (this
interpreter's site-packages and its ``.pth`` files are read at start: here one imports certifi,
25-35 ms a user's install would not pay); ``vacate (clean venv)`` is the console script of a
fresh venv holding only vacate (bench/check/bench_check.py ``clean_venv``), removed at the end.
Before the first run the package's bytecode is compiled, as an installed package's is.

``--baseline-src DIR`` (the ``src/`` of another checkout, its C modules built) adds that
vacate's clean venv beside this one's (``baseline (clean venv)``, and ``baseline-sizes (clean
venv)`` beside ``vacate-sizes (clean venv)``), in the same interleaved rounds; the report ends
with each pair's ratio of medians (this ÷ baseline). ``--tools`` keeps only the rows named (du
and gdu always run: the ratios are to them); ``--path DIR`` scans an existing directory
instead of the bench tree (nothing built or mounted: for trying the bench itself).

Cold: ``sync; echo 3 > /proc/sys/vm/drop_caches`` before every run (root). Wall and CPU time
(user + system, worker processes included) and peak RSS from /usr/bin/time; for vacate the RSS
is its largest process, and ``memory()`` reports main process and walkers apart.
"""

from __future__ import annotations

import argparse
import collections
import compileall
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "check"))
import bench_scan_tree as tree
from bench_check import SRC, c_modules, clean_venv

PEERS = ("du", "gdu")       # always run: the ratios are to them


def commands(mnt: str, clean: str, baseline: str | None = None) -> dict[str, list[str]]:
    """The rows, and with a ``baseline`` clean venv its rows beside this checkout's."""
    py = sys.executable
    cmds = {
        "vacate": [py, "-m", "vacate", "scan", "--json", mnt],
        "vacate-sizes": [py, "-m", "vacate", "scan", "--json", "--no-recognise", mnt],
        "vacate (clean venv)": [clean, "scan", "--json", mnt],
    }
    if baseline:
        cmds["baseline (clean venv)"] = [baseline, "scan", "--json", mnt]
        cmds["vacate-sizes (clean venv)"] = [clean, "scan", "--json", "--no-recognise", mnt]
        cmds["baseline-sizes (clean venv)"] = [baseline, "scan", "--json", "--no-recognise",
                                               mnt]
    return {**cmds,
            "du": ["du", "-s", mnt],
            "gdu": ["gdu", "-npc", mnt],
            "ncdu": ["ncdu", "-x", "-o", "/dev/null", mnt]}


BASELINE_PAIRS = {"vacate (clean venv)": "baseline (clean venv)",
                  "vacate-sizes (clean venv)": "baseline-sizes (clean venv)"}


def against_baseline(title: str, res: dict[str, list]) -> list[str]:
    """Each of this checkout's clean-venv rows against the baseline's: medians (wall, CPU)
    and their ratio."""
    lines = []
    for new, old in BASELINE_PAIRS.items():
        if res.get(new) and res.get(old):
            w_new, w_old = (statistics.median(w for w, _, _ in res[k]) for k in (new, old))
            c_new, c_old = (statistics.median(c for _, c, _ in res[k]) for k in (new, old))
            r = w_new / w_old
            lines.append(f"| {new} | {w_new:.2f} | {w_old:.2f} | **{r:.2f}** | "
                         f"{c_new:.2f} | {c_old:.2f} | {c_new / c_old:.2f} | "
                         f"{'yes' if r <= 1.10 else 'NO'} |")
    if not lines:
        return []
    return [f"#### {title}: this checkout against the baseline", "",
            ("| row | wall s | baseline wall s | wall ÷ baseline | CPU s | baseline CPU s "
             "| CPU ÷ baseline | within 10 % |"),
            "|---|---:|---:|---:|---:|---:|---:|---|", *lines, ""]


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def run_once(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system, children included) and peak RSS (kB, of the
    largest process) of one run, through /usr/bin/time: the RSS that wait4() reports for a
    child forked from this (large) Python process would include the parent's pages."""
    fd, tmp = tempfile.mkstemp(prefix="vacate-bench-time-")
    os.close(fd)
    try:
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-o", tmp, "-f", "%U %S %M", *cmd],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall = time.perf_counter() - t
        if p.returncode != 0:
            raise RuntimeError(f"{cmd[0]} exited {p.returncode}")
        with open(tmp) as f:
            user, sys_, rss = f.read().split()[-3:]
    finally:
        os.unlink(tmp)
    return wall, float(user) + float(sys_), int(rss)


def series(cmds: dict[str, list[str]], rounds: int, cold: bool,
           seed: int) -> dict[str, list]:
    """``rounds`` interleaved rounds, the order shuffled each round (from ``seed``: a new one
    each invocation unless given, so that no tool keeps the same places run after run; with a
    fixed seed, cold, one tool ran right after gdu in two of three rounds every time). Warm: each
    timed run right after an untimed run of the same command, so that what that tool reads
    is in the cache when it is timed. (This machine runs DAMON reclaim, ``kdamond``, which
    evicts pages it sees unused; whether that reaches a series of runs is not settled, see
    bench/HISTORY.md, and warming each run rules it out.)"""
    rnd = random.Random(seed)
    res: dict[str, list] = {k: [] for k in cmds}
    for _ in range(rounds):
        order = list(cmds)
        rnd.shuffle(order)
        for name in order:
            if cold:
                drop_caches()
            else:
                run_once(cmds[name])
            res[name].append(run_once(cmds[name]))
    return res


def memory(mnt: str) -> dict[str, float]:
    """Peak RSS in MB of vacate's main process and of its largest walker process, scanning
    in-process (warm)."""
    code = (
        "import io, json, resource, sys\n"
        "from vacate.cli.main import main\n"
        "from vacate.cli.env import Env\n"
        f"rc = main(['scan', '--json', {mnt!r}], Env(stdout=io.StringIO(), stderr=sys.stderr))\n"
        "s = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "c = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(json.dumps({'main_mb': s / 1024, 'worker_mb': c / 1024}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def report(title: str, res: dict[str, list]) -> list[str]:
    med = {k: statistics.median(w for w, _, _ in v) for k, v in res.items() if v}
    cpu = {k: statistics.median(c for _, c, _ in v) for k, v in res.items() if v}
    lines = [f"### {title}", "",
             ("| tool | median wall s | runs (s) | wall × du | wall × gdu | median CPU s "
             "| CPU × du | peak RSS MB |"),
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for k, v in res.items():
        if not v:
            continue
        runs = " ".join(f"{w:.2f}" for w, _, _ in v)
        rss = max(r for _, _, r in v) / 1024
        lines.append(f"| {k} | {med[k]:.2f} | {runs} | {med[k] / med['du']:.2f} | "
                     f"{med[k] / med['gdu']:.2f} | {cpu[k]:.2f} | {cpu[k] / cpu['du']:.2f} | "
                     f"{rss:.0f} |")
    return lines + [""]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm", type=int, default=5, help="warm rounds")
    ap.add_argument("--cold", type=int, default=3, help="cold rounds")
    ap.add_argument("--only", choices=("warm", "cold"))
    ap.add_argument("--seed", type=int, help="the order of the tools in each round (default:"
                    " a new one each time, printed)")
    ap.add_argument("--tree", type=int, choices=sorted(tree.TREES), default=tree.DEFAULT.version,
                    help="1: the first tree (zero-filled weights); 2: the realistic hub")
    ap.add_argument("--baseline-src", metavar="DIR",
                    help="the src/ of another checkout (its C modules built), run beside this "
                         "one in a clean venv of its own")
    ap.add_argument("--tools", metavar="NAMES",
                    help="comma-separated rows to run (du and gdu always run)")
    ap.add_argument("--path", metavar="DIR",
                    help="scan this directory instead of the bench tree (builds nothing)")
    a = ap.parse_args()
    if os.geteuid() != 0 and (not a.path or a.only != "warm"):
        print("needs root (loop mount, drop_caches)", file=sys.stderr)
        return 2
    baseline_src = os.path.abspath(a.baseline_src) if a.baseline_src else None
    if baseline_src and not os.path.isfile(os.path.join(baseline_src, "vacate", "__init__.py")):
        print(f"{baseline_src}: not a src/ directory holding vacate", file=sys.stderr)
        return 2
    t = tree.TREES[a.tree]
    was_mounted = True
    if a.path:
        mnt = os.path.abspath(a.path)
    else:
        was_mounted = tree.mounted(t)
        tree.build(1_000_000, t)
        mnt = tree.mount(t)
    for src in filter(None, (SRC, baseline_src)):
        compileall.compile_dir(os.path.join(src, "vacate"), quiet=1)
    venv_dir = tempfile.mkdtemp(prefix="vacate-bench-venv-")
    try:
        clean = clean_venv(os.path.join(venv_dir, "new"))
        baseline = (clean_venv(os.path.join(venv_dir, "baseline"), baseline_src)
                    if baseline_src else None)
        return run_all(mnt, a, clean, baseline)
    finally:
        shutil.rmtree(venv_dir, ignore_errors=True)
        if not was_mounted:
            tree.umount(t)      # the image stays cached for the next run


def what_it_said(doc: dict) -> list[str]:
    """The warnings by kind, and what the recognisers made of the hub's repos."""
    kinds = collections.Counter(w.get("code") for w in doc["warnings"])
    repos = [i for i in doc["items"] if "/hub/models--" in i["path"]]
    rec = [i for i in repos if i.get("details", {}).get("parameters")]
    out = [f"warnings: {len(doc['warnings']):,} " + (
        "(" + ", ".join(f"{k} {v:,}" for k, v in kinds.most_common()) + ")" if kinds else ""),
        f"hub repos among the items: {len(repos):,}, with parameter counts: {len(rec):,}"]
    if rec:
        out.append(f"e.g. {rec[0]['label']}")
    return out


def run_all(mnt: str, a: argparse.Namespace, clean: str, baseline: str | None) -> int:
    cmds = commands(mnt, clean, baseline)
    if a.tools:
        keep = {n.strip() for n in a.tools.split(",")} | set(PEERS)
        unknown = keep - set(cmds)
        if unknown:
            print(f"no such rows: {', '.join(sorted(unknown))} (rows: {', '.join(cmds)})",
                  file=sys.stderr)
            return 2
        cmds = {k: v for k, v in cmds.items() if k in keep}
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 16)
    doc = json.loads(subprocess.run(commands(mnt, clean)["vacate (clean venv)"],
                                    capture_output=True, check=True, text=True).stdout)
    n = doc["totals"]
    where = f"({mnt})" if a.path else f"tree {a.tree} ({mnt})"
    out = [(f"{where}: {n['files']:,} files, {n['dirs']:,} directories, "
            f"{n['apparent_bytes'] / 1e12:.1f} TB apparent, {n['disk_bytes'] / 1e9:.1f} GB on "
            f"disk; load average before: {os.getloadavg()[0]:.1f}; order seed {seed}"),
           f"this checkout: {SRC}: {c_modules(clean)}",
           *([f"baseline: {a.baseline_src}: {c_modules(baseline)}"] if baseline else []),
           *what_it_said(doc), ""]
    if a.only != "cold":
        res = series(cmds, a.warm, False, seed)
        out += report(f"warm page cache, {a.warm} interleaved rounds", res)
        out += against_baseline("warm", res)
    if a.only != "warm":
        res = series(cmds, a.cold, True, seed + 1)
        out += report(f"cold page cache (drop_caches before each run), {a.cold} interleaved "
                      "rounds", res)
        out += against_baseline("cold", res)
    m = memory(mnt)
    out.append(f"vacate peak RSS (in-process run): main {m['main_mb']:.0f} MB, largest walker "
               f"{m['worker_mb']:.0f} MB; load average after: {os.getloadavg()[0]:.1f}")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
