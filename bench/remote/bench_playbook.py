"""A fleet checked by `ansible-playbook` (the `vacate.volume` collection) against
`vacate check --inventory`, side by side in one run (issue 32's figure): the loopback sshd as
20 inventory hosts, each 3 s away (a ProxyCommand that sleeps, then relays), `--forks 5`,
`/tmp` with `--no-scan --no-config` (`scan_tree: false`, `configured: false`), the order
alternating each round; medians of R rounds and their ratio.

    sudo python3 bench/remote/bench_playbook.py [--rounds 3] [--hosts 20] [--delay 3]

(root: an sshd with throwaway keys and the collection built and installed into a temporary
directory; all of it is removed at the end.)
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src"))

from harness import collection, sshd
from harness.inventories import delayed_inventory

PLAY = """\
- hosts: slow
  gather_facts: false
  tasks:
    - name: Is /tmp still used?
      vacate.volume.check:
        path: /tmp
        scan_tree: false
        configured: false
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--delay", type=float, default=3.0)
    ap.add_argument("--forks", type=int, default=5)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="vacate-bench-playbook-")
    server = sshd.start(os.path.join(tmp, "sshd"))
    try:
        installed = collection.build_and_install(tmp)
        names = [f"h{i:02}" for i in range(args.hosts)]
        inv = delayed_inventory(pathlib.Path(tmp, "fleet.ini"), server, names, args.delay)
        play = pathlib.Path(tmp, "check.yml")
        play.write_text(PLAY)
        env = installed.environ(ANSIBLE_PIPELINING="1")
        door = [sys.executable, "-m", "vacate", "check", "--json", "--no-scan", "--no-config",
                "--forks", str(args.forks), "--inventory", inv, "/tmp"]
        took = {"check --inventory": [], "ansible-playbook": []}
        for r in range(args.rounds):
            runs = [("check --inventory", lambda: subprocess.run(
                        door, capture_output=True, text=True, env=env, check=False)),
                    ("ansible-playbook", lambda: collection.playbook(
                        installed, "-i", inv, "--forks", str(args.forks), str(play),
                        env=env))]
            for name, run in runs if r % 2 == 0 else runs[::-1]:
                t0 = time.monotonic()
                p = run()
                took[name].append(time.monotonic() - t0)
                if p.returncode not in (0, 1):
                    raise SystemExit(f"{name}: exit {p.returncode}\n{p.stderr[-2000:]}")
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in took.items()),
                  flush=True)
        med = {k: statistics.median(v) for k, v in took.items()}
        print(f"\n{args.hosts} hosts {args.delay:g} s away, forks {args.forks}, "
              f"medians of {args.rounds}: check --inventory {med['check --inventory']:.1f} s, "
              f"ansible-playbook {med['ansible-playbook']:.1f} s "
              f"(ratio {med['ansible-playbook'] / med['check --inventory']:.2f}x; "
              "the goal: at most 1.5x)")
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
