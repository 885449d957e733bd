"""A Proxmox host's side of a container for the ``--ct`` tests: ``/etc/pve/lxc/CTID.conf`` and
``/etc/pve/storage.cfg`` as Proxmox writes them, and a stand-in ``pct`` (Proxmox cannot be
installed here) with the real command line -- ``status CTID``, ``config CTID [--current]``,
``pending CTID``, ``exec CTID [--keep-env 0] -- CMD...``, ``shutdown|stop|start|reboot CTID``,
``set CTID --delete KEYS`` -- over a real container: the pid of its init is written to
``STATE/CTID.pid`` by the test (a start runs ``STATE/CTID.start``, the test's, which writes
the new one), and ``exec`` enters its namespaces with ``nsenter``. Every call is logged to
``STATE/calls``.

``set --delete`` and the pending changes follow pve-container's rules
(tests/fixtures/proxmox/pve-free-rules.txt, R1-R5; :data:`CONFIG_HELPER`): ``mpN`` of a
running container stays pending (``[pve:pending]``, ``delete: mpN``) and is applied when it
stops or starts, its storage volume becoming ``unusedN``; deleting ``unusedN`` frees the
volume -- a real ``zfs destroy -r`` on zfspool storage -- only when this container owns it
and no rootfs/mpN of the current config, a snapshot section or the pending changes names it,
and drops the key either way; a failed destroy (a held snapshot, a clone) fails the command
and leaves the config as it was. ``STATE/die-after-free`` (the test's, taken once) makes it
kill itself (-9) between the destroy and the config write; ``STATE/slow-free`` makes it wait
a second before the destroy.

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
    # lxc-pve-poststop-hook: the pending changes applied once it stopped
    exec python3 "$state/../bin/pct-config.py" apply "$conf" "$ctid" 0 "" ;;
set)
    # --delete KEYS as pve-container does it (the config helper: pending while running)
    [ "$1" = "--delete" ] || { echo "pct stand-in: set $1 not supported" >&2; exit 255; }
    if running; then r=1; else r=0; fi
    exec python3 "$state/../bin/pct-config.py" set "$conf" "$ctid" "$r" "$2" ;;
start)
    running && { echo "CT $ctid already running" >&2; exit 255; }
    python3 "$state/../bin/pct-config.py" apply "$conf" "$ctid" 0 "" || exit 255
    [ -x "$state/$ctid.start" ] || { echo "pct stand-in: no start hook for CT $ctid" >&2; exit 255; }
    exec "$state/$ctid.start" ;;
reboot)
    running || { echo "CT $ctid not running" >&2; exit 255; }
    "$0" shutdown "$ctid" && exec "$0" start "$ctid" ;;
*) echo "pct stand-in: $cmd not supported" >&2; exit 255 ;;
esac
"""


CONFIG_HELPER = r"""# pct-config.py: the stand-in pct's config edits, as pve-container makes them
import os, re, signal, subprocess, sys, time

SECTION = re.compile(r"^\[([^\]]+)\]\s*$")
OWNED = re.compile(r"^(?:(?:base|basevol)-\d+-\S+/)?(?:base|basevol|vm|subvol)-(\d+)-\S+$")


def read(conf):
    # sections in order: [name, [(key, value)]], the first (None) the current config
    secs, cur = [], [None, []]
    for line in open(conf).read().splitlines():
        m = SECTION.match(line)
        if m:
            secs.append(cur)
            cur = [m.group(1), []]
        elif line.startswith("#"):
            cur[1].append((None, line))        # the description, kept as written
        elif line.strip() and ":" in line:
            k, v = line.split(":", 1)
            cur[1].append((k.strip(), v.strip()))
    secs.append(cur)
    return secs


def write(conf, secs):
    out = []
    for name, lines in secs:
        if name is not None:
            if name == "pve:pending" and not lines:
                continue
            out.append("")
            out.append("[%s]" % name)
        out.extend(v if k is None else "%s: %s" % (k, v) for k, v in lines)
    tmp = conf + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, conf)


def get(lines, key):
    return next((v for k, v in lines if k == key), None)


def drop(lines, key):
    lines[:] = [(k, v) for k, v in lines if k != key]


def volume_of(value):
    first = value.split(",")[0]
    return first[len("volume="):] if first.startswith("volume=") else first


def pending(secs):
    for sec in secs:
        if sec[0] == "pve:pending":
            return sec
    sec = ["pve:pending", []]
    secs.append(sec)
    return sec


def deletions(pend):
    v = get(pend[1], "delete")
    return [k for k in (v or "").split(",") if k]


def set_deletions(pend, keys):
    drop(pend[1], "delete")
    if keys:
        pend[1].insert(0, ("delete", ",".join(keys)))


def in_use(secs, volid):
    # is_volume_in_use(conf, volid, 1, 1): rootfs/mpN of the config, its snapshots, pending
    for name, lines in secs:
        for k, v in lines:
            if (k == "rootfs" or re.match(r"^mp\d+$", k)) and volume_of(v) == volid:
                return True
    return False


def storage(sid):
    text = open("/etc/pve/storage.cfg").read()
    cur = found = None
    for line in text.splitlines():
        if line.strip() and not line[:1].isspace():
            typ, _, name = line.partition(":")
            cur = (typ.strip(), name.strip(), {}) if name.strip() == sid else None
            if cur:
                found = cur
        elif cur and line.strip():
            k, _, v = line.strip().partition(" ")
            cur[2][k] = v.strip()
    if found is None:
        raise RuntimeError("storage '%s' does not exist" % sid)
    return found


def free(ctid, volid):
    # LXC.pm delete_mountpoint_volume -> Storage.pm vdisk_free -> ZFSPoolPlugin free_image
    if volid.startswith("/"):
        return
    sid, _, volname = volid.partition(":")
    m = OWNED.match(volname)
    owner = int(m.group(1)) if m else None
    if owner != int(ctid):
        sys.stderr.write("ignore deletion of '%s', CT %s isn't the owner!\n" % (volid, ctid))
        return
    typ, _, props = storage(sid)
    if typ != "zfspool":
        raise RuntimeError("pct stand-in frees zfspool volumes only, not %s" % typ)
    ds = props["pool"].strip("/") + "/" + volname.split("/")[-1]
    for _ in range(6):                      # zfs_delete_zvol
        r = subprocess.run(["zfs", "destroy", "-r", ds], capture_output=True, text=True)
        err = r.stderr + r.stdout
        if r.returncode == 0 or "does not exist" in err:
            return
        if "dataset is busy" not in err:
            raise RuntimeError("zfs error: " + err.strip())
        time.sleep(1)
    raise RuntimeError("zfs error: " + err.strip())


def add_unused(cur, volid):
    # AbstractConfig add_unused_volume: no duplicate; the first free unusedN
    free_key = None
    for i in range(255, -1, -1):
        v = get(cur, "unused%d" % i)
        if v is not None:
            if v == volid:
                return
        else:
            free_key = "unused%d" % i
    cur.append((free_key, volid))


def apply_pending(conf, ctid, secs, running, state):
    cur, pend = secs[0][1], pending(secs)
    errors = []
    for key in sorted(deletions(pend)):
        force = key.startswith("!")
        key = key.lstrip("!")
        value = get(cur, key)
        try:
            if re.match(r"^mp\d+$", key):
                if running:
                    continue                   # vmconfig_hotplug_pending: die "skip"
                vol = volume_of(value or "")
                if value is not None and not vol.startswith("/"):
                    add_unused(cur, vol)
            elif re.match(r"^unused\d+$", key):
                if value is not None and not in_use(secs, value):
                    if os.path.exists(os.path.join(state, "slow-free")):
                        time.sleep(1)          # a test's kill lands while pct runs
                    free(ctid, value)
                    if os.path.exists(os.path.join(state, "die-after-free")):
                        os.unlink(os.path.join(state, "die-after-free"))
                        os.kill(os.getpid(), signal.SIGKILL)
        except Exception as e:
            errors.append("unable to %s %s: %s" % (
                "hotplug" if running else "apply pending change", key, e))
            continue
        drop(cur, key)
        set_deletions(pend, [k for k in deletions(pend) if k.lstrip("!") != key])
    return errors


def main():
    what, conf, ctid, running, keys = sys.argv[1:6]
    state = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "state")
    secs = read(conf)
    cur = secs[0][1]
    if what == "set":
        for key in [k for k in keys.split(",") if k]:
            if get(cur, key) is None and get(pending(secs)[1], key) is None:
                sys.stderr.write("cannot delete '%s' - not set in current configuration!\n"
                                 % key)
                continue
            if re.match(r"^(mp|unused)\d+$", key) and get(cur, "protection") == "1":
                sys.stderr.write("can't remove CT %s drive '%s' - protection mode enabled\n"
                                 % (ctid, key))
                return 255
            pend = pending(secs)
            set_deletions(pend, [k for k in deletions(pend) if k.lstrip("!") != key] + [key])
    elif not deletions(pending(secs)):
        return 0                               # nothing pending: the file stays as it is
    errors = apply_pending(conf, ctid, secs, running == "1", state)
    if errors:
        sys.stderr.write("\n".join(errors) + "\n")
        return 255                             # raise_param_exc: the config is not written
    write(conf, secs)
    return 0


sys.exit(main())
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
    with open(os.path.join(bin_dir, "pct-config.py"), "w") as f:
        f.write(CONFIG_HELPER)
    return PveHost(etc, bin_dir, state, made_etc=True)
