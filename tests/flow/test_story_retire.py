"""The story, retired for real: a loop volume used by a booted systemd (tests/harness/
systemd_box.py), a docker container, the kernel and the configuration, planned with
``vacate plan`` and retired with ``vacate apply --yes``; then everything a person would check.

The fstab, the crontab and the disabled unit that names an archived path are in a copy of
``/etc`` (the in-process run's ``Host(etc=...)``): the machine's own fstab and crontabs are
never edited. The disabled unit is the host's; one in the box's own unit directory is seen
too (the test at the end)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest
from harness.holders import Holders
from harness.retire import fill, restore_with_stock_tools, tree_hashes
from harness.systemd_box import available as systemd_available
from harness.systemd_box import start_box
from harness.volumes import can_loop_mount, make_volume

from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.host import Host

pytestmark = [pytest.mark.root, pytest.mark.slow]

NODEFAULT = "[Unit]\nDefaultDependencies=no\n"
INSTALL = "[Install]\nWantedBy=vacate-box.target\n"

SERVE = r"""
import glob, mmap, sys, time
maps = []
for p in sorted(glob.glob(sys.argv[1] + "/*.safetensors")):
    with open(p, "rb") as f:
        maps.append(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ))
time.sleep(1e9)
"""


def safetensors(path: str, n: int) -> None:
    """A small real safetensors file: one F32 tensor of ``n`` values."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}})
    header += " " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header.encode() + os.urandom(4 * n))


def cli(host: Host, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), Env(stdout=out, stderr=err, stdin=None, host=host))
    return rc, out.getvalue(), err.getvalue()


def host_pid(box, box_pid: int) -> int | None:
    """The pid seen from here of the box's process ``box_pid``."""
    ns = os.readlink(f"/proc/{box.pid1}/ns/pid")
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{p}/ns/pid") != ns:
                continue
            with open(f"/proc/{p}/status") as f:
                nspid = next(ln for ln in f if ln.startswith("NSpid:")).split()[1:]
        except (OSError, StopIteration):
            continue
        if int(nspid[-1]) == box_pid:
            return int(p)
    return None


def main_pid(box, unit: str) -> int:
    return int(box.systemctl("show", "-p", "MainPID", "--value", unit).stdout.strip() or 0)


def wait_for(what, timeout: float = 20.0, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(step)
    return what()


def state(box, unit: str) -> tuple[str, str]:
    return (box.systemctl("is-enabled", unit).stdout.strip(),
            box.systemctl("is-active", unit).stdout.strip())


@pytest.fixture(params=["with-docker", "without-docker"])
def story(request, tmp_path, monkeypatch):
    """The story with its docker container where docker can run, else without it (one of
    the two runs, the other is skipped saying why)."""
    if not can_loop_mount() or not systemd_available():
        pytest.skip("needs root, losetup and systemd")
    from harness.docker_box import why_not
    why = why_not()
    docker = request.param == "with-docker"
    if docker and why:
        pytest.skip(f"the story's docker container cannot run here ({why}); "
                    "the story ran without it")
    if not docker and not why:
        pytest.skip("docker runs here: the story ran with its docker container")
    made = []
    try:
        s = _Story(str(tmp_path), made, docker)
        if s.docker is not None:
            # apply runs `docker` as a person would: the client beside the daemon, its socket
            monkeypatch.setenv("PATH", "/usr/bin:" + os.environ["PATH"])
            monkeypatch.setenv("DOCKER_HOST", f"unix://{s.docker.sock}")
        yield s
    finally:
        for thing in reversed(made):
            thing.close()


class _Story:
    def __init__(self, tmp: str, made: list, docker: bool):
        self.tmp = tmp
        self.vol = make_volume("ext4", size_mb=160)
        made.append(self.vol)
        self.m = m = self.vol.mountpoint
        # -- the volume --------------------------------------------------------------------
        os.makedirs(f"{m}/models/story-7b")
        for i in (1, 2):
            safetensors(f"{m}/models/story-7b/model-0000{i}-of-00002.safetensors", 1 << 18)
        fill(m, cache_files=200, weights_mb=4)
        os.makedirs(f"{m}/shared/in")
        with open(f"{m}/shared/in/prompts.txt", "w") as f:
            f.write("hello\n")
        self.holders = Holders(m)
        made.append(self.holders)
        self.swap = self.holders.swapfile(f"{m}/swapfile", "ext4", mb=16)
        self.loop = self.holders.loop_device(f"{m}/disk.img", mb=8)
        self.before = tree_hashes(m)
        # -- the configuration, in a copy of /etc ------------------------------------------
        self.etc = os.path.join(tmp, "etc")
        os.makedirs(self.etc)
        for name in ("passwd", "group"):
            shutil.copy2(f"/etc/{name}", self.etc)
        uuid = subprocess.run(["blkid", "-c", "/dev/null", "-s", "UUID", "-o", "value",
                               self.vol.device], capture_output=True, text=True,
                              check=True).stdout.strip()
        self.fstab_line = f"UUID={uuid} {m} ext4 defaults,nofail 0 2"
        with open(f"{self.etc}/fstab", "w") as f:
            f.write(f"# a test's fstab\n{self.fstab_line}\n")
        self.cron_line = f"*/5 * * * * root {m}/runs/sync.sh"
        with open(f"{self.etc}/crontab", "w") as f:
            f.write(f"SHELL=/bin/sh\n{self.cron_line}\n")
        os.makedirs(f"{self.etc}/systemd/system")
        with open(f"{self.etc}/systemd/system/story-eval.service", "w") as f:
            f.write(f"[Unit]\nDescription=evaluate the story's checkpoint\n[Service]\n"
                    f"Type=oneshot\nExecStart=/usr/bin/python3 -m eval --checkpoint "
                    f"{m}/runs/exp1/ckpt/w.bin\n[Install]\nWantedBy=multi-user.target\n")
        self.host = Host(etc=self.etc, run=os.path.join(tmp, "run"))
        # -- the booted systemd --------------------------------------------------------------
        serve = os.path.join(tmp, "serve.py")
        with open(serve, "w") as f:
            f.write(SERVE)
        units = {
            "story-server.service": f"{NODEFAULT}[Service]\nRestart=always\nRestartSec=0.2\n"
                                    f"ExecStart=/usr/bin/python3 {serve} "
                                    f"{m}/models/story-7b\n{INSTALL}",
            "story-server.timer": f"{NODEFAULT}[Timer]\nOnUnitInactiveSec=1s\n"
                                  f"Unit=story-server.service\n{INSTALL}",
            "story-unrelated.service": f"{NODEFAULT}[Service]\nExecStart=/bin/sleep "
                                       f"infinity\n{INSTALL}",
        }
        self.box = start_box(units, enable=("story-server.service", "story-server.timer",
                                            "story-unrelated.service"))
        made.append(self.box)
        self.docker = None
        if docker:
            from harness.docker_box import IMAGE, start_daemon

            self.docker = start_daemon(data_root=os.path.join(tmp, "docker-data"))
            made.append(self.docker)
            self.docker.import_image()
            self.docker.run("story-web", "--restart", "always", "--stop-timeout", "1",
                            "-v", f"{m}/shared:/srv/shared", IMAGE, "sleep", "infinity")
        self.backup = os.path.join(tmp, "backup")
        self.plan = os.path.join(tmp, "retire.plan")


MACHINE_CONFIG = ("/etc/fstab", "/etc/crontab", "/etc/cron.d", "/var/spool/cron")


def machine_config() -> dict[str, str]:
    """sha256 of each of the machine's own fstab and crontabs (and the names beside them)."""
    out = {}
    for top in MACHINE_CONFIG:
        paths = [top] if os.path.isfile(top) else \
            [os.path.join(d, n) for d, _ds, ns in os.walk(top) for n in ns]
        for p in paths:
            with open(p, "rb") as f:
                out[p] = hashlib.sha256(f.read()).hexdigest()
    out["/etc names"] = " ".join(sorted(n for n in os.listdir("/etc") if "vacate" in n))
    return out


def under(hashes: dict[str, str], top: str) -> dict[str, str]:
    return {k[len(top) + 1:]: v for k, v in hashes.items() if k.startswith(top + "/")}


def users_of_device(dev: int) -> list[str]:
    """What still uses the device ``dev`` seen from here, in any namespace: a mount, an
    open file, a mapping, a cwd or root."""
    mm = f"{os.major(dev)}:{os.minor(dev)}"
    maps_dev = f"{os.major(dev):02x}:{os.minor(dev):02x}"
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            with open(f"/proc/{p}/mountinfo") as f:
                out += [f"pid {p} mounts it at {ln.split()[4]}" for ln in f
                        if ln.split()[2] == mm]
            with open(f"/proc/{p}/maps") as f:
                out += [f"pid {p} maps {ln.split()[-1]}" for ln in f
                        if len(ln.split()) > 5 and ln.split()[3] == maps_dev]
            for ln in [f"/proc/{p}/{x}" for x in ("cwd", "root")] + \
                    [f"/proc/{p}/fd/{x}" for x in os.listdir(f"/proc/{p}/fd")]:
                try:
                    if os.stat(ln).st_dev == dev:
                        out.append(f"pid {p} holds {ln}")
                except OSError:
                    continue
        except OSError:
            continue
    return out


def maps(pid: int, dev: int) -> bool:
    return any(u.startswith(f"pid {pid} maps ") for u in users_of_device(dev))


def test_the_story_retired(story):
    s = story
    box, m = s.box, s.m
    config_before = machine_config()
    dev = os.stat(m).st_dev
    unrelated = wait_for(lambda: main_pid(box, "story-unrelated.service"))
    first = wait_for(lambda: main_pid(box, "story-server.service"))
    assert first and state(box, "story-server.service") == ("enabled", "active")
    assert state(box, "story-server.timer") == ("enabled", "active")
    hp = wait_for(lambda: host_pid(box, first))
    assert wait_for(lambda: maps(hp, dev)), "the server does not map its shards"

    # killing its process alone brings it back (Restart=always) ...
    os.kill(hp, signal.SIGKILL)
    again = wait_for(lambda: (p := main_pid(box, "story-server.service")) not in (0, first)
                     and p)
    assert again, "Restart=always did not bring the server back"
    # ... and stopping the unit alone does too: its timer starts it again
    box.systemctl("stop", "story-server.service", check=True)
    again = wait_for(lambda: main_pid(box, "story-server.service"), timeout=10)
    assert again, "the timer did not start the server again"
    server = wait_for(lambda: host_pid(box, again))
    assert wait_for(lambda: maps(server, dev))
    if s.docker is not None:
        assert s.docker.inspect("story-web", "{{.State.Running}}") == "true"

    rc, out, err = cli(s.host, "plan", m, "--archive-to", s.backup, "--delete", "cuda.run",
                       "--delete", "cache", "--delete", "swapfile", "--keep", "notes.txt",
                       "--keep", "disk.img", "--grace", "2", "-o", s.plan, "--json")
    assert rc == 0, err
    plan = json.loads(out)
    actions = {os.path.relpath(it["path"], m): it["action"] for it in plan["items"]}
    assert actions == {"models": "archive", "runs": "archive", "shared": "archive",
                       "cache": "delete", "cuda.run": "delete", "swapfile": "delete",
                       "notes.txt": "keep", "disk.img": "keep", "lost+found": "keep"}
    kinds = [st["kind"] for st in plan["steps"]]
    for kind in ("stop-unit", "disable-unit", "swapoff", "detach-loop", "edit-config",
                 "lock-dir"):
        assert kind in kinds, kind
    assert ("stop-container" in kinds) is (s.docker is not None)
    assert "end-process" not in kinds          # the server goes with its unit, not a signal
    assert kinds[-3:] == ["unmount", "lock-dir", "check"]
    assert config_before == machine_config()   # planning read the copy of /etc only

    rc, _out, err = cli(s.host, "apply", s.plan, "--dry-run")
    assert rc == 0, err                        # every step could be checked, nothing failed
    assert main_pid(box, "story-server.service") == again and os.path.ismount(m)
    rc, out, err = cli(s.host, "apply", s.plan, "--yes", "--json")
    doc = json.loads(out) if out.strip() else {}
    steps = {st["id"]: st for st in doc.get("done", {}).get("steps", [])}
    assert rc == 0, err + "\n".join(f"{k} {v['status']} {v['detail']}"
                                    for k, v in steps.items())
    assert doc["complete"] is True
    assert {st["status"] for st in steps.values()} <= {"ok", "skipped"}
    assert len(steps) == len(plan["steps"])
    assert doc["done"]["freed_bytes"] >= (16 + 1) << 20     # the swap file and cuda.run
    last = plan["steps"][-1]
    assert last["kind"] == "check" and steps[last["id"]]["status"] == "ok"

    # the units: stopped and disabled, the timer too; the unrelated one untouched
    assert state(box, "story-server.service") == ("disabled", "inactive")
    assert state(box, "story-server.timer") == ("disabled", "inactive")
    assert not os.path.exists(f"/proc/{server}")
    assert state(box, "story-unrelated.service") == ("enabled", "active")
    assert main_pid(box, "story-unrelated.service") == unrelated
    if s.docker is not None:
        assert s.docker.inspect("story-web", "{{.State.Running}} "
                                "{{.HostConfig.RestartPolicy.Name}}") == "false no"
    # the kernel: no swap, no loop device on it, no process and no mount of it anywhere
    with open("/proc/swaps") as f:
        assert s.swap not in f.read()
    assert not os.path.exists(f"/sys/block/{os.path.basename(s.loop)}/loop/backing_file")
    time.sleep(1.5)                  # a timer left running would have started the server
    assert state(box, "story-server.service")[1] == "inactive"
    assert users_of_device(dev) == []
    # unmounted, and the mount point locked
    assert not os.path.ismount(m)
    attrs = subprocess.run(["lsattr", "-d", m], capture_output=True, text=True, check=True)
    assert "i" in attrs.stdout.split()[0]
    with pytest.raises(PermissionError):
        open(f"{m}/written-to-the-root-filesystem", "w").close()
    # fstab and crontab: the line commented out with a dated marker, the file backed up
    today = time.strftime("%Y-%m-%d")
    for name, line, text in (("fstab", s.fstab_line, "# a test's fstab\n"),
                             ("crontab", s.cron_line, "SHELL=/bin/sh\n")):
        with open(f"{s.etc}/{name}") as f:
            assert f.read() == f"{text}# vacate {today}: {line}\n", name
        backup = [n for n in os.listdir(s.etc) if n.startswith(f"{name}.vacate-backup-")]
        assert len(backup) == 1, backup
        with open(f"{s.etc}/{backup[0]}") as f:
            assert f.read() == f"{text}{line}\n"
    assert config_before == machine_config()   # the machine's own are untouched

    # every archive restores with stock zstd, tar and sha256sum
    for top in ("models", "runs", "shared"):
        into = tempfile.mkdtemp(dir=s.tmp, prefix=f"restored-{top}-")
        restore_with_stock_tools(os.path.join(s.backup, top), into)
        assert tree_hashes(os.path.join(into, top)) == under(s.before, top), top
    # what is on the volume now, mounted read-only elsewhere
    look = tempfile.mkdtemp(dir=s.tmp, prefix="look-")
    subprocess.run(["mount", "-o", "ro", s.vol.device, look], check=True)
    try:
        left = tree_hashes(look)
        rc, out, err = cli(s.host, "check", look, "--json", "--no-scan")
        assert rc == 0, err                   # nothing uses the volume any more
        assert json.loads(out)["verdict"]["blockers"] == []
    finally:
        subprocess.run(["umount", look], check=True)
    gone = ("cache", "cuda.run", "swapfile")
    assert {k: v for k, v in s.before.items() if k.split("/")[0] not in gone} == left
    assert not any(k.split("/")[0] in gone for k in left)

    # the report: what still names an archived path, with file:line, the archive and the
    # command that restores that path (which works)
    rc, out, err = cli(s.host, "report", s.plan, "--json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["complete"] is True and report["remains"]["manual"] == []
    refs = {r["consumer"]: r for r in report["remains"]["references"]}
    ev = refs["systemd-unit:story-eval.service"]
    assert ev["at"] == "/etc/systemd/system/story-eval.service:5"
    assert ev["path"] == f"{m}/runs/exp1/ckpt/w.bin" and ev["action"] == "archive"
    assert ev["archive"] == os.path.join(s.backup, "runs")
    assert ev["restore"] == ["vacate", "restore", ev["archive"], "runs/exp1/ckpt/w.bin",
                             "--to", "DIR"]
    into = tempfile.mkdtemp(dir=s.tmp, prefix="restored-ref-")
    rc, _out, err = cli(s.host, *[into if a == "DIR" else a for a in ev["restore"][1:]])
    assert rc == 0, err
    assert tree_hashes(into) == {"runs": "dir", "runs/exp1": "dir", "runs/exp1/ckpt": "dir",
                                 "runs/exp1/ckpt/w.bin": s.before["runs/exp1/ckpt/w.bin"]}
    # the crontab line was commented out by apply's edit step: fixed by it, not left
    fixed = {r["consumer"]: r for r in report["done"]["fixed"]}
    assert "cron:/etc/crontab:2" not in refs
    assert fixed["cron:/etc/crontab:2"]["at"] == "/etc/crontab:2"
    # applying again is applying once: nothing done twice, what was measured stands
    rc, out, err = cli(s.host, "apply", s.plan, "--yes", "--json")
    assert rc == 0, err
    assert json.loads(out)["done"]["freed_bytes"] == doc["done"]["freed_bytes"]
    assert state(box, "story-unrelated.service") == ("enabled", "active")


def test_a_disabled_unit_inside_the_booted_systemd_is_seen(tmp_path):
    if not can_loop_mount() or not systemd_available():
        pytest.skip("needs root, losetup and systemd")
    from vacate.observing.observe import observe

    made = []
    try:
        vol = make_volume("ext4")
        made.append(vol)
        m = vol.mountpoint
        os.makedirs(f"{m}/work")
        units = {"box-holder.service": f"{NODEFAULT}[Service]\nWorkingDirectory={m}/work\n"
                                       f"ExecStart=/bin/sleep infinity\n{INSTALL}",
                 "box-eval.service": f"{NODEFAULT}[Service]\nType=oneshot\nExecStart=/bin/true "
                                     f"{m}/work/ckpt\n{INSTALL}"}
        box = start_box(units, enable=("box-holder.service",))
        made.append(box)
        assert wait_for(lambda: main_pid(box, "box-holder.service"))
        obs = observe(m, scan_tree=False)
        held = [c for c in obs.consumers if c.type == "process"
                and c.attrs.unit == "box-holder.service"]
        assert held, "the box's server is not seen at all"
        ct = {"type": "pidns", "name": str(box.pid1), "init_pid": box.pid1}
        assert held[0].attrs.container == ct
        by_id = {c.id: c for c in obs.consumers}
        ev = by_id.get(f"systemd-unit:pidns:{box.pid1}:box-eval.service")
        assert ev is not None, "the box's disabled unit is not seen"
        assert ev.attrs.enabled is False and ev.attrs.container == ct
        assert "systemd-unit:box-eval.service" not in by_id       # the host has no such unit
        # the running unit is stopped and disabled through the box's PID 1, its manager
        from vacate.decide.verdict import verdict

        steps = next(b.actions for b in verdict(obs.consumers, obs.problems).blockers
                     if b.consumer == held[0].id)
        assert [(a.kind, a.where.kind, a.where.pid) for a in steps] == [
            ("stop-unit", "pid-namespace", box.pid1), ("disable-unit", "pid-namespace", box.pid1)]
    finally:
        for thing in reversed(made):
            thing.close()
