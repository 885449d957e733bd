"""`vacate check --host` over a real sshd on 127.0.0.1 against a local `vacate check` without
the C modules (what the far side runs), and one ssh round trip (`ssh HOST true`), on a small
real volume: medians of N rounds, the order rotating each round; and the bytes sent per run
(the bootstrap on the command line, the payload and the request on stdin).

    sudo python3 bench/remote/bench_host.py --rounds 9 [--python /usr/bin/python3] [--scan]

(root: a loop-mounted ext4 volume and an sshd with throwaway keys are made and removed.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src"))

from harness import sshd
from harness.volumes import make_volume


def timed(argv, env) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if r.returncode not in (0, 1, 3):
        raise SystemExit(f"{argv}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--python", default="/usr/bin/python3", help="the far interpreter")
    ap.add_argument("--scan", action="store_true", help="check with the walk (default --no-scan)")
    args = ap.parse_args()
    from vacate.observing import wire
    from vacate.remote import payload
    from vacate.remote.ssh import SshTarget

    tmp = tempfile.mkdtemp(prefix="vacate-bench-host-")
    server = sshd.start(os.path.join(tmp, "sshd"))
    v = make_volume("ext4")
    m = v.mountpoint
    try:
        os.makedirs(f"{m}/models/q")
        with open(f"{m}/models/q/config.json", "w") as f:
            json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, f)
        for i in range(2000):
            d = f"{m}/data/{i // 100:03d}"
            os.makedirs(d, exist_ok=True)
            with open(f"{d}/{i:05d}.json", "w") as f:
                f.write("{}\n")
        env = server.environ()
        flags = [] if args.scan else ["--no-scan"]
        vacate = [sys.executable, "-m", "vacate", "check", "--json", *flags]
        runs = {
            "local (no C)": (vacate + [m], dict(env, VACATE_NO_C="1")),
            "local (C)": (vacate + [m], env),
            "--host": (vacate + ["--host", "vacate-test", "--python", args.python, m], env),
            "ssh true": (["ssh", "-F", server.config, "vacate-test", "true"], env),
        }
        times: dict[str, list[float]] = {k: [] for k in runs}
        names = list(runs)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for k in order:
                times[k].append(timed(*runs[k]))
        med = {k: statistics.median(x) for k, x in times.items()}
        for k in names:
            print(f"{k:14s} median {med[k] * 1000:7.1f} ms  (min {min(times[k]) * 1000:.1f})")
        base = med["local (no C)"]
        print(f"--host / local (no C): {med['--host'] / base:.2f}")
        print(f"(--host - ssh round trip) / local (no C): "
              f"{(med['--host'] - med['ssh true']) / base:.2f}")
        target = SshTarget.parse("vacate-test", options=())
        boot = len(wire.frame(wire.BOOT, payload.build()))
        req = len(wire.frame(wire.REQUEST, json.dumps(
            {"op": "observe", "args": {"path": m, "ct": None, "scan_tree": args.scan,
                                       "configured": True}}).encode()))
        print(f"bytes sent: command line {len(target.remote_command())}, payload {boot:,} "
              f"(zip {len(payload.build()):,}), request {req}, bye 60")
    finally:
        v.close()
        server.stop()


if __name__ == "__main__":
    main()
