"""Configured users: vacate's systemd/cron/env-file sources against the hand-run
`grep -rlE '/data(/|$)' ...` on a captured tree of ~2,000 unit files, interleaved runs.

Of the units, 25 really use the volume: 10 name /data directly, 5 through a bind mount of it
(/srv/models), 5 through an EnvironmentFile, 5 through an instance specifier (%f). 15 only look
like they do to grep: a reset ExecStart= in a drop-in, /database, commented lines.
Prints medians and ratios, and how many of the 25 each finds (and false positives).

    python3 bench/configured/bench_units.py [--runs 7] [--units 2000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from vacate.observing.collectors.configured import cron, envfiles, systemd
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.host import Host
from vacate.observing.model.mount import Mount, Target

UNIT_DIRS = ("etc/systemd/system", "lib/systemd/system")


def write(root: str, rel: str, text: str) -> None:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def build(root: str, n_units: int) -> set[str]:
    """The tree; returns the unit names that really use /data."""
    real = set()
    src = "/lib/systemd/system"
    copied = 0
    for name in sorted(os.listdir(src)) if os.path.isdir(src) else []:
        p = os.path.join(src, name)
        if os.path.isfile(p) and not os.path.islink(p) and copied < n_units // 4:
            shutil.copy(p, os.path.join(root, "lib/systemd/system", name))
            copied += 1
    for i in range(n_units - copied - 40):
        write(root, f"lib/systemd/system/filler{i}.service",
              f"[Unit]\nDescription=filler {i}\n[Service]\nExecStart=/usr/bin/true {i}\n"
              f"Environment=A={i} B=/var/lib/x{i}\nWorkingDirectory=/srv/w{i}\n")
    for i in range(10):
        write(root, f"etc/systemd/system/direct{i}.service",
              f"[Service]\nExecStart=/usr/bin/python3 -m srv --model /data/models/m{i}\n")
        real.add(f"direct{i}.service")
    for i in range(5):
        write(root, f"etc/systemd/system/bind{i}.service",
              f"[Service]\nExecStart=/opt/serve --weights /srv/models/m{i}\n")
        real.add(f"bind{i}.service")
        write(root, f"etc/default/app{i}", f'ARGS="--cache /data/cache{i}"\n')
        write(root, f"etc/systemd/system/envf{i}.service",
              f"[Service]\nEnvironmentFile=/etc/default/app{i}\nExecStart=/opt/app $ARGS\n")
        real.add(f"envf{i}.service")
        write(root, f"etc/systemd/system/inst{i}@.service",
              "[Service]\nWorkingDirectory=%f\nExecStart=/bin/sleep infinity\n")
        os.makedirs(os.path.join(root, "etc/systemd/system/multi-user.target.wants"),
                    exist_ok=True)
        os.symlink(f"../inst{i}@.service", os.path.join(
            root, f"etc/systemd/system/multi-user.target.wants/inst{i}@data-jobs{i}.service"))
        real.add(f"inst{i}@data-jobs{i}.service")
        write(root, f"etc/systemd/system/reset{i}.service",
              f"[Service]\nExecStart=/data/old/bin/x{i}\n")
        write(root, f"etc/systemd/system/reset{i}.service.d/override.conf",
              f"[Service]\nExecStart=\nExecStart=/usr/local/bin/x{i}\n")
        write(root, f"etc/systemd/system/db{i}.service",
              f"[Service]\nExecStart=/usr/bin/pg --dir /database/p{i}\n")
        write(root, f"etc/systemd/system/old{i}.service",
              f"[Service]\n# was: ExecStart=/data/legacy{i}\nExecStart=/usr/bin/true\n")
    return real


def target() -> Target:
    m = Mount(10, 1, 7, 3, "/", "/data", ("rw",), (), "ext4", "/dev/loop3", ())
    bind = Mount(11, 1, 7, 3, "/models", "/srv/models", ("rw",), (), "ext4", "/dev/loop3", ())
    return Target("/data", m, 0, None, None, None, True, "", None, (), (bind,))


def run_vacate(root: str) -> tuple[float, set[str]]:
    t0 = time.perf_counter()
    host = Host.under(root)
    t = target()
    view = host_view(t)
    found = set()
    for mod in (systemd, cron, envfiles):
        cs, _ps = mod.collect(host, t, view)
        found |= {c.name for c in cs if c.type == "systemd-unit"}
    return time.perf_counter() - t0, found


def run_grep(root: str) -> tuple[float, set[str]]:
    dirs = [os.path.join(root, d) for d in (*UNIT_DIRS, "etc/default", "etc/cron.d")]
    t0 = time.perf_counter()
    p = subprocess.run(["grep", "-rlE", r"/data(/|$|[^A-Za-z0-9_])", *dirs],
                       capture_output=True, text=True, check=False)
    dt = time.perf_counter() - t0
    names = set()
    for line in p.stdout.splitlines():
        parts = line.split("/")
        # a drop-in counts for its unit, like a person reading grep's output would
        name = parts[-2][:-2] if parts[-2].endswith(".d") else parts[-1]
        if "." in name and not name.startswith("app"):
            names.add(name)
    return dt, names


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--units", type=int, default=2000)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="vacate-bench-units-")
    try:
        for d in UNIT_DIRS:
            os.makedirs(os.path.join(root, d), exist_ok=True)
        real = build(root, a.units)
        tv, tg = [], []
        for _ in range(a.runs):      # interleaved
            dt, fv = run_vacate(root)
            tv.append(dt)
            dt, fg = run_grep(root)
            tg.append(dt)
        mv, mg = statistics.median(tv), statistics.median(tg)
        print(f"unit files: {a.units}, really using /data: {len(real)}, runs: {a.runs}")
        print(f"vacate sources (in-process): median {mv * 1000:.1f} ms, "
              f"found {len(fv & real)}/{len(real)}, false positives {len(fv - real)}")
        print(f"grep -rlE (a process):       median {mg * 1000:.1f} ms, "
              f"found {len(fg & real)}/{len(real)}, false positives {len(fg - real)}")
        print(f"ratio vacate/grep: {mv / mg:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
