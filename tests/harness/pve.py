"""A Proxmox host's side of a container for the ``--ct`` tests: ``/etc/pve/lxc/CTID.conf`` and
``/etc/pve/storage.cfg`` as Proxmox writes them, and a stand-in ``pct`` (Proxmox cannot be
installed here) with the real command line -- ``status CTID``, ``config CTID [--current]``,
``pending CTID``, ``exec CTID [--keep-env 0] -- CMD...``, ``set CTID --delete mpN`` (pending
while the container runs, as Proxmox records it) -- over a real container: the pid of
its init is written to ``STATE/CTID.pid`` by the test, and ``exec`` enters its namespaces
with ``nsenter``. Every call is logged to ``STATE/calls``.

``/etc/pve`` is made only where this machine has none (a real Proxmox host is never
touched), and removed with everything under it by :meth:`PveHost.close`.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

PCT = r"""#!/bin/sh
# stand-in for Proxmox's pct: the same command line, over a container of the tests
state=@STATE@
echo "$*" >> "$state/calls"
cmd=$1; ctid=$2
[ -n "$cmd" ] && [ -n "$ctid" ] || { echo "usage: pct <command> <vmid> [OPTIONS]" >&2; exit 255; }
shift 2
conf=/etc/pve/lxc/$ctid.conf
[ -f "$conf" ] || { echo "Configuration file 'nodes/test/lxc/$ctid.conf' does not exist" >&2; exit 255; }
pid=$(cat "$state/$ctid.pid" 2>/dev/null)
running() { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }
case $cmd in
status) if running; then echo "status: running"; else echo "status: stopped"; fi ;;
config) if [ "$1" = "--current" ]; then sed '/^\[/,$d' "$conf"; else sed '/^\[/,$d' "$conf"; fi ;;
pending) sed '/^\[/,$d' "$conf" | sed 's/^/cur /'
    sed -n '/^\[pve:pending\]/,/^\[/s/^delete: //p' "$conf" | tr ',' '\n' | sed 's/^/del /' ;;
exec)
    running || { echo "CT $ctid not running" >&2; exit 255; }
    if [ "$1" = "--keep-env" ]; then shift 2; fi
    [ "$1" = "--" ] && shift
    exec nsenter -t "$pid" -m -u -i -n -p -- "$@" ;;
shutdown|stop)
    # the container's init told to power off (systemd: SIGRTMIN+4), or killed; then waited for
    running || exit 0
    if [ "$cmd" = stop ]; then kill -KILL "$pid"; else kill -s RTMIN+4 "$pid"; fi
    n=0
    while running && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done
    running && { echo "CT $ctid did not stop" >&2; exit 255; }
    exit 0 ;;
set)
    # only what vacate issues: --delete of mount points (never unusedN, which destroys)
    [ "$1" = "--delete" ] || { echo "pct stand-in: set $1 not supported" >&2; exit 255; }
    for key in $(echo "$2" | tr ',' ' '); do
        case $key in mp[0-9]*) ;; *) echo "pct stand-in: --delete $key refused" >&2; exit 255 ;; esac
        if running; then        # a running container: the deletion is pending
            grep -q '^\[pve:pending\]' "$conf" || printf '\n[pve:pending]\n' >> "$conf"
            echo "delete: $key" >> "$conf"
        else
            sed -i "1,/^\[/{/^$key: /d}" "$conf"
        fi
    done ;;
*) echo "pct stand-in: $cmd not supported" >&2; exit 255 ;;
esac
"""


@dataclass
class PveHost:
    etc: str          # /etc/pve
    bin: str          # a directory holding the stand-in pct, for PATH
    state: str
    made_etc: bool

    def write_ct(self, ctid: int, text: str) -> str:
        path = os.path.join(self.etc, "lxc", f"{ctid}.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def write_storage(self, text: str) -> None:
        with open(os.path.join(self.etc, "storage.cfg"), "w") as f:
            f.write(text)

    def running(self, ctid: int, pid: int | None) -> None:
        path = os.path.join(self.state, f"{ctid}.pid")
        if pid is None:
            if os.path.exists(path):
                os.unlink(path)
        else:
            with open(path, "w") as f:
                f.write(f"{pid}\n")

    def calls(self) -> list[str]:
        try:
            with open(os.path.join(self.state, "calls")) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def environ(self) -> dict:
        return dict(os.environ, PATH=f"{self.bin}:{os.environ['PATH']}")

    def close(self) -> None:
        if self.made_etc:
            shutil.rmtree(self.etc, ignore_errors=True)


def why_not() -> str | None:
    if os.path.exists("/etc/pve"):
        return "/etc/pve exists: this is a real Proxmox host, not touched by tests"
    if os.geteuid() != 0:
        return "needs root to write /etc/pve"
    return None


def make(tmp: str) -> PveHost:
    etc = "/etc/pve"
    os.makedirs(os.path.join(etc, "lxc"))
    bin_dir = os.path.join(tmp, "bin")
    state = os.path.join(tmp, "state")
    os.makedirs(bin_dir)
    os.makedirs(state)
    with open(os.path.join(bin_dir, "pct"), "w") as f:
        f.write(PCT.replace("@STATE@", state))
    os.chmod(os.path.join(bin_dir, "pct"), 0o755)
    return PveHost(etc, bin_dir, state, made_etc=True)
