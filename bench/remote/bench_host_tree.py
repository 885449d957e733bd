"""`--host` at 1,000,000 entries (issue 30's figures), side by side over a real sshd on
127.0.0.1, cache warm, medians of R rounds, the order rotating each round:

check  `vacate check --json --host vacate-test MNT` of the 1M bench tree
       (bench/scan/bench_scan_tree.py, tree 2, mounted read-only) against the local
       `vacate check --json MNT` with ``VACATE_NO_C=1`` (the Python loops the far side runs)
       and against the local check with its C loops.
delete `vacate plan --host vacate-test MNT --delete item -o P.plan` then `vacate apply P.plan
       --yes` deleting the 1M-entry ``item/`` against `ssh vacate-test rm -rf MNT/item`. Every
       run deletes a fresh block-for-block copy of an image holding the bench tree in
       ``item/`` (made once from tree 2's image: /var/tmp/vacate-bench/host-delete.img); each
       run, rm's included, first makes the same plan over ssh (so both start from the same
       warm cache); the apply's wall is timed against rm's, the plan's is printed apart.
far    the far side's largest process (``ru_maxrss`` of the far interpreter and every
       process it waited for: the supervisor, the worker, its walkers) and its CPU time over
       its wall time, for each --host run: ``--python`` is a wrapper that runs the far
       interpreter as its child and records ``os.wait4``'s usage (~10 ms of start added to
       each --host run).

    sudo python3 bench/remote/bench_host_tree.py [--rounds 5] [--part check|delete|all]
        [--python /usr/bin/python3]

The code measured is HEAD's ``src/`` (copied once, with the C modules built in the working
tree). (root: loop mounts, an sshd with throwaway keys; all made here is removed, on failure too.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "bench", "scan"))
sys.path.insert(0, HERE)

import bench_scan_tree as scan_tree
from harness import sshd
from soak_host import far_left, snapshot_src

CACHE = scan_tree.CACHE
DELETE_IMG = os.path.join(CACHE, "host-delete.img")
SRC: list[str] = []         # the copy of HEAD's src/ every run imports (snapshot_src)

# The far interpreter's stand-in: runs the real one as its child, then appends the child's
# usage (wait4: its own and that of every process it waited for) to a JSON-lines file.
FARWRAP = r"""
import json, os, sys, time
record, argv = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    os.execv(argv[0], argv)
_, status, ru = os.wait4(pid, 0)
with open(record, "a") as f:
    f.write(json.dumps({"wall_s": time.monotonic() - t0, "user_s": ru.ru_utime,
                        "sys_s": ru.ru_stime, "maxrss_kb": ru.ru_maxrss}) + "\n")
os._exit(os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode")
         else status >> 8)
"""


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


class Far:
    """The --python wrapper and what it recorded."""

    def __init__(self, tmp: str, python: str):
        self.record = os.path.join(tmp, "far.jsonl")
        code = os.path.join(tmp, "farwrap.py")
        with open(code, "w") as f:
            f.write(FARWRAP)
        self.wrapper = os.path.join(tmp, "farpy.sh")
        with open(self.wrapper, "w") as f:
            f.write(f'#!/bin/sh\nexec /usr/bin/python3 -I -S {code} {self.record} {python} "$@"\n')
        os.chmod(self.wrapper, 0o755)

    def take(self) -> list[dict]:
        """The far sessions recorded since the last take."""
        try:
            with open(self.record) as f:
                out = [json.loads(line) for line in f if line.strip()]
            os.unlink(self.record)
        except FileNotFoundError:
            out = []
        return out


def run(argv: list[str], env: dict, ok=(0, 1)) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if r.returncode not in ok:
        raise SystemExit(f"{argv}: exit {r.returncode}\n{r.stderr[-3000:]}")
    return took, r


def rotated(names: list[str], r: int) -> list[str]:
    k = r % len(names)
    return names[k:] + names[:k]


def load() -> float:
    return os.getloadavg()[0]


def far_line(sessions: list[dict]) -> str:
    return ", ".join(f"{s['maxrss_kb'] / 1024:.0f} MB, cpu/wall "
                     f"{(s['user_s'] + s['sys_s']) / s['wall_s']:.2f}" for s in sessions)


# -- check ---------------------------------------------------------------------------------

def bench_check(server, far: Far, rounds: int) -> None:
    mnt = scan_tree.mount()
    env = dict(server.environ(), PYTHONPATH=SRC[0])
    vacate = [sys.executable, "-m", "vacate", "check", "--json"]
    runs = {
        "local (no C)": (vacate + [mnt], dict(env, VACATE_NO_C="1")),
        "local (C)": (vacate + [mnt], env),
        "--host": (vacate + ["--host", "vacate-test", "--python", far.wrapper, mnt], env),
    }
    names = list(runs)
    times: dict[str, list[float]] = {k: [] for k in names}
    sessions: list[dict] = []
    loads = [load()]
    run(*runs["local (C)"])                          # warm the cache
    far.take()
    print(f"check of {mnt}, {rounds} rounds", flush=True)
    for r in range(rounds):
        line = []
        for k in rotated(names, r):
            took, _ = run(*runs[k])
            times[k].append(took)
            line.append(f"{k} {took:.2f} s")
            if k == "--host":
                s = far.take()
                sessions += s
                line[-1] += f" [far {far_line(s)}]"
        loads.append(load())
        print(f"  round {r + 1}: " + ", ".join(line) + f"  (load {loads[-1]:.2f})", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in names:
        print(f"{k:14s} median {med[k]:6.2f} s  (min {min(times[k]):.2f}, "
              f"max {max(times[k]):.2f})")
    print(f"--host / local (no C): {med['--host'] / med['local (no C)']:.2f}   (floor 1.5)")
    print(f"--host / local (C):    {med['--host'] / med['local (C)']:.2f}   (goal 1.1)")
    cpu = [(s["user_s"] + s["sys_s"]) / s["wall_s"] for s in sessions]
    print(f"far side: largest process {max(s['maxrss_kb'] for s in sessions) / 1024:.0f} MB "
          f"(floor 300 MB); CPU/wall median {statistics.median(cpu):.2f} "
          f"(min {min(cpu):.2f}, max {max(cpu):.2f}; over 1.5: the far walk is parallel)")
    print(f"load (1 min) {min(loads):.2f}-{max(loads):.2f}", flush=True)


# -- delete --------------------------------------------------------------------------------

def delete_image() -> str:
    """An image of tree 2 with the whole tree moved into ``item/`` (made once)."""
    stamp = DELETE_IMG + ".done"
    if os.path.exists(stamp):
        return DELETE_IMG
    src = scan_tree.DEFAULT
    if not os.path.exists(src.stamp):
        raise SystemExit("build the bench tree first: python3 bench/scan/bench_scan_tree.py build")
    scan_tree.mount(src)                             # read-only: its image is copied whole
    sh("cp", "--sparse=always", src.image, DELETE_IMG)
    mnt = tempfile.mkdtemp(prefix="vacate-hostdel-build-")
    sh("mount", "-o", "loop", DELETE_IMG, mnt)
    try:
        os.mkdir(os.path.join(mnt, "item"))
        for name in os.listdir(mnt):
            if name not in ("item", "lost+found"):
                os.rename(os.path.join(mnt, name), os.path.join(mnt, "item", name))
    finally:
        os.sync()
        sh("umount", mnt)
        os.rmdir(mnt)
    with open(stamp, "w") as f:
        f.write("ok\n")
    return DELETE_IMG


class Copy:
    """A fresh copy of the delete image, attached and mounted read-write."""

    def __init__(self, base: str, tmp: str):
        self.img = os.path.join(CACHE, "host-delete.run.img")
        sh("cp", "--sparse=always", base, self.img)
        self.mnt = tempfile.mkdtemp(prefix="vacate-hostdel-", dir=tmp)
        try:
            sh("mount", "-o", "loop", self.img, self.mnt)
        except Exception:
            self.close()
            raise
        self.item = os.path.join(self.mnt, "item")

    def assert_gone(self) -> None:
        """``item/`` is gone (apply unmounts the volume after its delete: looked at read-only)."""
        if not os.path.ismount(self.mnt):
            sh("chattr", "-i", self.mnt)                 # apply's lock of the empty mountpoint
            sh("mount", "-o", "loop,ro", self.img, self.mnt)
        if os.path.lexists(self.item):
            raise SystemExit(f"{self.item} is still there")

    def close(self) -> None:
        if os.path.ismount(self.mnt):
            subprocess.run(["umount", self.mnt], check=False)
        if os.path.ismount(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], check=False)
        subprocess.run(["chattr", "-i", self.mnt], check=False, capture_output=True)
        os.rmdir(self.mnt)
        os.unlink(self.img)


def one_delete(tool: str, base: str, tmp: str, server, far: Far) -> dict:
    env = dict(server.environ(), PYTHONPATH=SRC[0])
    out: dict = {}
    c = Copy(base, tmp)
    try:
        plan = os.path.join(tmp, "p", "retire.plan")
        shutil.rmtree(os.path.dirname(plan), ignore_errors=True)
        os.makedirs(os.path.dirname(plan))
        out["plan_s"], _ = run([sys.executable, "-m", "vacate", "plan", "--host", "vacate-test",
                                "--python", far.wrapper, c.mnt, "--delete", "item",
                                "-o", plan], env)
        out["plan_far"] = far.take()
        if tool == "rm -rf":
            out["delete_s"], _ = run(["ssh", "-F", server.config, "vacate-test", "rm", "-rf",
                                      c.item], env, ok=(0,))
        else:
            out["delete_s"], r = run([sys.executable, "-m", "vacate", "apply", plan, "--yes",
                                      "--json"], env, ok=(0,))
            out["apply_far"] = far.take()
            steps = json.loads(r.stdout)["done"]["steps"]
            out["steps"] = {x["id"]: round(x["ended"] - x["started"], 2) for x in steps
                            if x["started"] and x["ended"]}
            bad = [x["id"] for x in steps if x["status"] != "ok"]
            if bad:
                raise SystemExit(f"apply: steps not ok: {bad}\n{r.stderr[-2000:]}")
        c.assert_gone()
        return out
    finally:
        c.close()


def bench_delete(server, far: Far, rounds: int, tmp: str) -> None:
    base = delete_image()
    names = ["vacate apply --host", "rm -rf"]
    res: dict[str, list[dict]] = {k: [] for k in names}
    loads = [load()]
    print(f"delete of a 1M-entry item ({base}), {rounds} rounds", flush=True)
    for r in range(rounds):
        line = []
        for k in rotated(names, r):
            o = one_delete(k, base, tmp, server, far)
            res[k].append(o)
            line.append(f"{k} {o['delete_s']:.2f} s (plan {o['plan_s']:.2f} s"
                        f" [far {far_line(o['plan_far'])}])")
            if "apply_far" in o:
                line[-1] += f" [apply far {far_line(o['apply_far'])}] steps {o['steps']}"
        loads.append(load())
        print(f"  round {r + 1}: " + "; ".join(line) + f"  (load {loads[-1]:.2f})", flush=True)
    med = {k: statistics.median(o["delete_s"] for o in v) for k, v in res.items()}
    for k in names:
        d = [o["delete_s"] for o in res[k]]
        print(f"{k:20s} median {med[k]:6.2f} s  (min {min(d):.2f}, max {max(d):.2f})")
    print(f"apply --host / ssh rm -rf: {med['vacate apply --host'] / med['rm -rf']:.2f}   "
          "(floor 2.0, goal 1.0)")
    step = statistics.median(o["steps"].get("01-delete", 0) for o in res["vacate apply --host"])
    print(f"the apply's delete step alone (its journal): median {step:.2f} s, "
          f"{step / med['rm -rf']:.2f}x ssh rm -rf")
    plans = [o["plan_s"] for v in res.values() for o in v]
    print(f"plan --host --delete item: median {statistics.median(plans):.2f} s")
    plan_far = [s for v in res.values() for o in v for s in o["plan_far"]]
    apply_far = [s for o in res["vacate apply --host"] for s in o["apply_far"]]
    print(f"far side's largest process: plan {max(s['maxrss_kb'] for s in plan_far) / 1024:.0f}"
          f" MB, apply {max(s['maxrss_kb'] for s in apply_far) / 1024:.0f} MB (floor 300 MB)")
    print(f"load (1 min) {min(loads):.2f}-{max(loads):.2f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--part", choices=("check", "delete", "all"), default="all")
    ap.add_argument("--python", default="/usr/bin/python3", help="the far interpreter")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="vacate-bench-host-tree-")
    server = None
    try:
        src, commit = snapshot_src(tmp)
        SRC.append(src)
        print(f"HEAD {commit}'s src", flush=True)
        server = sshd.start(os.path.join(tmp, "sshd"))
        far = Far(tmp, args.python)
        if args.part in ("check", "all"):
            bench_check(server, far, args.rounds)
        if args.part in ("delete", "all"):
            bench_delete(server, far, args.rounds, tmp)
    finally:
        if server is not None:
            left = far_left(server.proc.pid)
            if left:
                print(f"far processes left under this run's sshd: {left}")
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
