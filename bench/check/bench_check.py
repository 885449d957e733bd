"""``vacate check`` against ``fuser -vm MNT`` and ``lsof MNT``, side by side in one run.

Builds a real loop volume (ext4 or btrfs) with holders of every kind (fd, writer, Python mmap,
mapping-only mmap, shared library, cwd, exe, deleted-open, a private mount namespace seeing a
bind of a subdirectory, on btrfs a subvolume fd and mapping), a swap file and a loop device on
it, plus N background sleepers (default 1,000, 50 of them with their cwd on the volume), then
runs every tool R times interleaved and prints medians, ratios to ``fuser -vm``, and how many
of the known holders each one found. Needs root. Cleans up everything it started.

vacate is timed as a user runs it, three ways (the same code; only what starts Python differs):

* ``vacate`` found on PATH (here a pyenv shim: a bash script in front, ~60 ms);
* the console script pip installed next to this interpreter (no shim; this interpreter's
  site-packages and its ``.pth`` files are read at start-up);
* the same console script in a fresh venv holding only vacate (built here: ``venv
  --without-pip``, a ``.pth`` naming ``src/`` and pip's console-script text, exactly what
  ``pip install -e .`` writes; the ``--json`` path needs no third-party package).

The package's bytecode is compiled first (``compileall``), as any installed package's is: with
``PYTHONDONTWRITEBYTECODE=1`` (set in some environments) every run would compile the sources.

``--baseline-src DIR`` (the ``src/`` of another checkout, its C modules built) runs that
vacate too, in a clean venv of its own, interleaved with the rest; the report ends with each
of this checkout's rows against the baseline's (median ÷ median: above 1.00 is slower).

    python3 bench/check/bench_check.py [--fs ext4|btrfs] [--procs 1000] [--runs 7]
        [--baseline-src /tmp/before/src]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

from harness.holders import MMAP_ONLY, Crowd, Holders
from harness.volumes import make_volume

SRC = os.path.abspath(os.path.join(HERE, "..", "..", "src"))
# The console script next to this interpreter; and what a user's PATH finds.
SCRIPT = os.path.join(os.path.dirname(sys.executable), "vacate")


def _on_path() -> str | None:
    """What a user's shell runs for ``vacate``: PATH without the interpreter's own bin
    directory, which ``pyenv exec`` puts first for this script."""
    own = os.path.realpath(os.path.dirname(sys.executable))
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and os.path.realpath(d) != own]
    return shutil.which("vacate", path=os.pathsep.join(dirs))


ON_PATH = _on_path()
CONSOLE_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from vacate.cli.main import entry
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(entry())
"""


def dependencies() -> list[str]:
    """The names in pyproject's ``[project] dependencies`` (each imported under that name)."""
    import tomllib

    with open(os.path.join(SRC, "..", "pyproject.toml"), "rb") as f:
        reqs = tomllib.load(f)["project"]["dependencies"]
    return [re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in reqs]


def clean_venv(where: str, src: str = SRC) -> str:
    """A venv holding only the vacate of ``src`` (editable, as pip writes it) and its
    dependencies (the directories they are installed in, on the path as plain entries: none
    of the ``.pth`` start-up hooks that sit beside them runs); its ``vacate`` script. Without
    orjson the scan parses safetensors headers with json, ~0.4 s slower on the scan bench's
    tree."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", where], check=True)
    py = os.path.join(where, "bin", "python3")
    purelib = subprocess.run([py, "-c", ("import sysconfig; print(sysconfig.get_paths()"
                                        "['purelib'])")], check=True, capture_output=True,
                             text=True).stdout.strip()
    deps = []
    for name in dependencies():
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            raise SystemExit(f"{name} is not installed here (pip install -e .)")
        site = os.path.dirname(os.path.dirname(spec.origin))
        if site not in deps:
            deps.append(site)
    with open(os.path.join(purelib, "__editable__.vacate.pth"), "w") as f:
        f.write("\n".join([src, *deps]) + "\n")
    script = os.path.join(where, "bin", "vacate")
    with open(script, "w") as f:
        f.write(CONSOLE_SCRIPT.format(python=py))
    os.chmod(script, 0o755)
    return script


C_MODULES = ("vacate.observing.collectors._fastwalk", "vacate.observing.collectors._fastproc",
             "vacate.observing.recognise.formats._fastst")
_C_PROBE = """import importlib
for n in %r:
    try:
        m = importlib.import_module(n)
    except ImportError:
        print(n.rpartition('.')[2], 'not-built')
    else:
        print(n.rpartition('.')[2], getattr(m, 'VERSION', 'built'), m.__file__)
"""


def c_modules(script: str) -> str:
    """What the venv of the console script ``script`` imports of the optional C modules
    (their VERSION, where they have one); exits where one is not built: the Python loops
    measured against C ones would say nothing about the change."""
    py = os.path.join(os.path.dirname(script), "python3")
    out = subprocess.run([py, "-c", _C_PROBE % (C_MODULES,)], capture_output=True, text=True,
                         check=True, cwd="/").stdout.split("\n")
    missing = [line.split()[0] for line in out if line.endswith(" not-built")]
    if missing:
        raise SystemExit(f"{script}: {', '.join(missing)} not built: build the C modules of "
                         "that checkout first (build_ext --inplace)")
    return "; ".join(line.rsplit(" ", 1)[0] for line in out if line)


def add_baseline(tools: dict[str, list[str]], baseline: str, new: str) -> dict[str, str]:
    """Beside each of ``tools`` run by the clean venv script ``new``, the same command run by
    ``baseline`` (named with " baseline" after the first word), inserted right after it;
    returns {new row: baseline row}."""
    out: dict[str, list[str]] = {}
    pairs: dict[str, str] = {}
    for name, cmd in tools.items():
        out[name] = cmd
        if cmd and cmd[0] == new:
            first, _, rest = name.partition(" ")
            twin = f"{first} baseline {rest}".strip() if not first.startswith("(") else (
                f"{name[:-1]}, baseline)")
            out[twin] = [baseline, *cmd[1:]]
            pairs[name] = twin
    tools.clear()
    tools.update(out)
    return pairs


def against_baseline(med: dict[str, float], pairs: dict[str, str]) -> list[str]:
    """Each row against its baseline twin: median ÷ the baseline's median."""
    lines = ["# against the baseline (median ÷ baseline median; above 1.00: slower than it)"]
    for name, twin in pairs.items():
        r = med[name] / med[twin]
        lines.append(f"{name:36} {med[name] * 1000:10.1f} ms vs {med[twin] * 1000:10.1f} ms  "
                     f"{r:5.2f}  {'within 10 %' if r <= 1.10 else 'SLOWER by more than 10 %'}")
    return lines


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, r


def holders_found(tool: str, r: subprocess.CompletedProcess, known: set[int]) -> tuple[int, int]:
    """(known holders found, all pids reported)."""
    if tool.startswith("("):
        return 0, 0
    if tool.startswith("vacate"):
        doc = json.loads(r.stdout)
        pids = {c["pid"] for c in doc["consumers"] if c["type"] == "process"}
    elif tool == "fuser -vm":
        pids = {int(x) for x in re.findall(r"\d+", r.stdout)}
    else:
        pids = set()
        for line in r.stdout.splitlines()[1:]:
            parts = line.split()
            if len(parts) > 1 and parts[1].isdigit():
                pids.add(int(parts[1]))
    return len(pids & known), len(pids)


def kernel_found(tool: str, r: subprocess.CompletedProcess) -> int:
    if tool.startswith("("):
        return 0
    if tool.startswith("vacate"):
        doc = json.loads(r.stdout)
        return sum(c["type"] in ("swap", "loop-device", "mount") for c in doc["consumers"])
    if tool == "fuser -vm":
        return len(re.findall(r"^\s+\S+\s+(swap|mount)\s", r.stderr, re.MULTILINE)) - 1  # minus MNT
    return 0


def in_process_passes(mnt: str) -> dict:
    """The /proc pass alone, inside this process (no interpreter start, no imports): as
    vacate runs it (the first look in C on threads, or split across a forked child where the C
    module is missing), in one thread, and the full read of every process (the pass before the
    first look existed)."""
    from vacate.observing.collectors import mounts, procs, procs_probe
    from vacate.observing.host import Host

    host = Host.local()
    target = mounts.resolve_target(mnt, host)
    fast = procs_probe._fastproc

    def run(c: bool, split: bool):
        keep = procs_probe._fastproc, procs_probe.SPLIT_MIN
        procs_probe._fastproc = fast if c else None
        if not split:
            procs_probe.SPLIT_MIN = 10 ** 9
        try:
            procs.collect(host, target)
        finally:
            procs_probe._fastproc, procs_probe.SPLIT_MIN = keep

    def every(proc, pids, *rest):
        p = procs_probe.Probe()
        p.candidates = list(pids)
        return p

    def full():
        keep, procs_probe.probe_split = procs_probe.probe_split, every
        try:
            procs.collect(host, target)
        finally:
            procs_probe.probe_split = keep

    out = {}
    if fast is not None:
        out["(in-process pass: C, threads)"] = lambda: run(True, True)
        out["(in-process pass: C, 1 thread)"] = lambda: run(True, False)
    out["(in-process pass: Python, fork)"] = lambda: run(False, True)
    out["(in-process pass: Python, 1 proc)"] = lambda: run(False, False)
    out["(in-process: full read of all)"] = full
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fs", default="ext4", choices=("ext4", "xfs", "btrfs"))
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--baseline-src", metavar="DIR",
                    help="the src/ of another checkout (its C modules built), run beside this "
                         "one in a clean venv of its own")
    ap.add_argument("--hold", type=float, default=0,
                    help="keep the volume, holders and crowd up this many seconds after the "
                         "runs (to profile by hand; the mountpoint is printed)")
    args = ap.parse_args()
    compileall.compile_dir(os.path.join(SRC, "vacate"), quiet=1)
    baseline_src = os.path.abspath(args.baseline_src) if args.baseline_src else None
    if baseline_src:
        if not os.path.isfile(os.path.join(baseline_src, "vacate", "__init__.py")):
            raise SystemExit(f"{baseline_src}: not a src/ directory holding vacate")
        compileall.compile_dir(os.path.join(baseline_src, "vacate"), quiet=1)
    venv_dir = tempfile.mkdtemp(prefix="vacate-bench-venv-")
    v = make_volume(args.fs)
    h = Holders(v.mountpoint)
    crowd = None
    try:
        clean = clean_venv(os.path.join(venv_dir, "new"))
        print(f"# this checkout: {SRC}: {c_modules(clean)}")
        baseline = None
        if baseline_src:
            baseline = clean_venv(os.path.join(venv_dir, "baseline"), baseline_src)
            print(f"# baseline: {baseline_src}: {c_modules(baseline)}")
        m = v.mountpoint
        for d in ("db", "work", "images"):
            os.makedirs(f"{m}/{d}")
        with open(f"{m}/db/data.txt", "w") as f:
            f.write("x\n" * 50000)
        with open(f"{m}/work/app.log", "w") as f:
            f.write("start\n")
        h.fd(f"{m}/db/data.txt")
        h.writer(f"{m}/work/app.log")
        h.py_mmap(f"{m}/db/data.txt")
        h.mmap_only(f"{m}/db/data.txt")
        h.shared_lib(f"{m}/lib")
        h.cwd(f"{m}/work")
        h.exe(f"{m}/bin")
        h.deleted(f"{m}/db/scratch.tmp")
        h.private_ns_bind(f"{m}/work", "app.log")
        if args.fs == "btrfs":
            subprocess.run(["btrfs", "-q", "subvolume", "create", f"{m}/subvol"], check=True)
            with open(f"{m}/subvol/f", "w") as f:
                f.write("y" * 8192)
            h.sh("subvolfd", f"exec 3<'{m}/subvol/f'")
            h.spawn("subvolmmap", [sys.executable, "-c", MMAP_ONLY, f"{m}/subvol/f",
                                   h._flag("subvolmmap")], ready=h._flag("subvolmmap"))
        h.swapfile(f"{m}/swapfile", args.fs, mb=16)
        h.loop_device(f"{m}/images/nested.img")
        # the crowd: N sleepers, 50 of them with their cwd on the volume
        n_on = min(50, args.procs)
        crowd = Crowd(f"{m}/work", n_on, args.procs - n_on)
        known = {p.pid for p in h.procs.values()} | crowd.on
        nproc = len([p for p in os.listdir("/proc") if p.isdigit()])
        like = ["check", "--json", "--no-scan", "--no-config", m]
        tools = {}
        if ON_PATH and os.path.realpath(ON_PATH) != os.path.realpath(SCRIPT):
            tools["vacate (on PATH: shim)"] = [ON_PATH, *like]
        tools["vacate (console script)"] = [SCRIPT, *like]
        tools["vacate (clean venv)"] = [clean, *like]
        tools["fuser -vm"] = ["fuser", "-vm", m]
        tools["lsof"] = ["lsof", "-n", m]
        tools["vacate --no-scan (+config)"] = [SCRIPT, "check", "--json", "--no-scan", m]
        tools["vacate check (+walk)"] = [SCRIPT, "check", "--json", m]
        tools["(startup: console --version)"] = [SCRIPT, "--version"]
        tools["(startup: clean --version)"] = [clean, "--version"]
        tools["(startup: clean venv python)"] = [os.path.join(venv_dir, "new", "bin",
                                                              "python3"), "-c", "pass"]
        pairs = add_baseline(tools, baseline, clean) if baseline else {}
        passes = in_process_passes(m)
        times: dict[str, list[float]] = {t: [] for t in [*tools, *passes]}
        last: dict[str, subprocess.CompletedProcess] = {}
        for _ in range(args.runs):
            for name, cmd in tools.items():   # interleaved: one of each per round
                dt, r = timed(cmd)
                times[name].append(dt)
                last[name] = r
            for name, fn in passes.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        base = statistics.median(times["fuser -vm"])
        w = max(len(n) for n in times)
        print(f"# {args.fs}, {nproc} processes on the host, {len(known)} known holder "
              f"processes (+ swap file, loop device, private-namespace bind), "
              f"{args.runs} interleaved runs; ratio = median / median of fuser -vm")
        print(f"{'tool':{w}} {'median ms':>10} {'min ms':>8} {'ratio':>7} {'holders found':>14} "
              f"{'pids reported':>14} {'kernel users':>13}")
        for name in [*tools, *passes]:
            med = statistics.median(times[name])
            if name not in tools:
                print(f"{name:{w}} {med * 1000:10.1f} {min(times[name]) * 1000:8.1f} "
                      f"{med / base:7.2f}")
                continue
            found, reported = holders_found(name, last[name], known)
            print(f"{name:{w}} {med * 1000:10.1f} {min(times[name]) * 1000:8.1f} "
                  f"{med / base:7.2f} {found:>8}/{len(known):<5} {reported:>14} "
                  f"{kernel_found(name, last[name]):>13}")
        if pairs:
            print("\n".join(against_baseline(
                {k: statistics.median(v) for k, v in times.items()}, pairs)))
        if args.hold:
            # SIGTERM (or SIGINT) ends the hold early; the finally below takes it all down
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            print(f"# holding {m} for {args.hold:g} s", flush=True)
            time.sleep(args.hold)
        return 0
    finally:
        if crowd is not None:
            crowd.close()
        h.close()
        v.close()
        shutil.rmtree(venv_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
