"""Migrate repoints what names the item besides units, for real, on a copy of ``/etc``
(``Host(etc=...)``) beside a real loop volume: an fstab line, a crontab line, an environment
file's lines and a symlink in ``/etc`` pointing in; and a real LXC container's
``lxc.mount.entry`` in ``/var/lib/lxc/NAME/config``, which LXC then starts the container
from. Each line is rewritten (the line as it was kept behind a dated marker, a backup beside
the file), the link pointed at the new place; a line edited since the plan is refused,
named; ``vacate undo`` puts every file and link back byte for byte."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest
from harness.volumes import can_loop_mount, make_volume

from vacate.cli.env import Env
from vacate.cli.main import main
from vacate.observing.host import Host

pytestmark = pytest.mark.root


class Story:
    """A model on a loop volume, an ``/etc`` naming it four ways, a destination."""

    def __init__(self):
        self.v = make_volume("ext4", size_mb=32)
        self.vol = vol = self.v.mountpoint
        self.tmp = tempfile.mkdtemp(prefix="vacate-migrate-cfg-")
        self.model = f"{vol}/models/qwen"
        os.makedirs(self.model)
        with open(f"{self.model}/weights.bin", "wb") as f:
            f.write(os.urandom(1 << 20))
        self.dest = os.path.join(self.tmp, "shared")
        os.makedirs(self.dest)
        self.etc = etc = os.path.join(self.tmp, "etc")
        for d in ("systemd/system", "cron.d", "default"):
            os.makedirs(f"{etc}/{d}")
        for name in ("passwd", "group"):
            shutil.copy2(f"/etc/{name}", etc)
        self.files = {
            "fstab": f"# static file system information\n{self.model} /srv/qwen none "
                     "bind,noauto,nofail 0 0\n",
            "cron.d/qwen": f"SHELL=/bin/sh\n0 3 * * * root /usr/bin/true --model {self.model}\n",
            "default/qwen": f"# qwen's settings\nMODEL_DIR={self.model}\nTHREADS=8\n"
                            f"WEIGHTS={self.model}/weights.bin\n",
        }
        for name, text in self.files.items():
            with open(f"{etc}/{name}", "w") as f:
                f.write(text)
        os.symlink(self.model, f"{etc}/qwen-model")
        self.run = os.path.join(self.tmp, "run")
        os.makedirs(self.run)
        self.host = Host(etc=etc, run=self.run)
        self.plan = os.path.join(self.tmp, "plan.json")

    def cli(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        rc = main(list(argv), Env(stdout=out, stderr=err, stdin=None, host=self.host))
        return rc, out.getvalue(), err.getvalue()

    def read(self, name: str) -> str:
        with open(f"{self.etc}/{name}") as f:
            return f.read()

    def close(self):
        self.v.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture
def story():
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    s = Story()
    yield s
    s.close()


def planned(s: Story) -> dict:
    rc, out, err = s.cli("plan", s.vol, "--migrate", f"models/qwen={s.dest}", "-o", s.plan,
                         "--json")
    assert rc == 0, err
    return json.loads(out)


def test_lines_and_links_are_repointed_and_undo_puts_them_back(story):
    s = story
    plan = planned(s)
    kinds = [st["kind"] for st in plan["steps"]]
    assert kinds.count("repoint-config") == 3 and kinds.count("repoint-link") == 1
    assert "edit-config" not in kinds            # repointed, not commented out
    # each after the last copy of the item and its read-back
    last_verify = len(kinds) - 1 - kinds[::-1].index("verify-copy")
    assert all(i > last_verify for i, k in enumerate(kinds) if k.startswith("repoint-"))

    rc, out, err = s.cli("apply", s.plan, "--yes")
    assert rc == 0, err + out
    new = f"{s.dest}/qwen"
    marker = r"# vacate \d{4}-\d{2}-\d{2}: "
    assert re.fullmatch(rf"# static file system information\n{marker}{s.model} /srv/qwen none "
                        rf"bind,noauto,nofail 0 0\n{new} /srv/qwen none bind,noauto,nofail 0 0\n",
                        s.read("fstab"))
    assert re.fullmatch(rf"SHELL=/bin/sh\n{marker}0 3 \* \* \* root /usr/bin/true --model "
                        rf"{s.model}\n0 3 \* \* \* root /usr/bin/true --model {new}\n",
                        s.read("cron.d/qwen"))
    assert re.fullmatch(rf"# qwen's settings\n{marker}MODEL_DIR={s.model}\nMODEL_DIR={new}\n"
                        rf"THREADS=8\n{marker}WEIGHTS={s.model}/weights.bin\n"
                        rf"WEIGHTS={new}/weights.bin\n", s.read("default/qwen"))
    assert os.readlink(f"{s.etc}/qwen-model") == new
    # a backup beside each file, as it was (hidden in /etc/cron.d: cron runs every file)
    for name, text in s.files.items():
        d, base = os.path.split(f"{s.etc}/{name}")
        (backup,) = [n for n in os.listdir(d) if ".vacate-backup-" in n and base in n]
        assert backup.startswith(".") == (name.startswith("cron.d/"))
        with open(os.path.join(d, backup)) as f:
            assert f.read() == text
    assert not os.path.ismount(s.vol)

    rc, text, err = s.cli("report", s.plan)
    said = " ".join(text.split())
    assert rc == 0, err
    assert f"repointed: /etc/cron.d/qwen:2: 0 3 * * * root /usr/bin/true --model {s.model} " \
           f"-> 0 3 * * * root /usr/bin/true --model {new}" in said, said
    assert f"repointed: /etc/qwen-model: {s.model} -> {new}" in said
    assert "undo: cp -p /etc/cron.d/.qwen.vacate-backup-" in said
    assert f"undo: ln -sfn {s.model} /etc/qwen-model (or vacate undo PLAN)" in said

    rc, out, err = s.cli("undo", s.plan)
    assert rc == 0, err + out
    assert [ln.split()[0] for ln in out.splitlines() if ln.strip()] == ["ok"] * 4, out
    for name, text in s.files.items():
        assert s.read(name) == text, name
    assert os.readlink(f"{s.etc}/qwen-model") == s.model


def test_a_line_edited_since_the_plan_is_not_repointed(story):
    s = story
    planned(s)
    with open(f"{s.etc}/cron.d/qwen", "a") as f:
        pass
    text = s.read("cron.d/qwen").replace("0 3 * * *", "0 4 * * *")
    with open(f"{s.etc}/cron.d/qwen", "w") as f:
        f.write(text)
    rc, out, err = s.cli("apply", s.plan, "--yes")
    assert rc == 1
    assert "line 2 of /etc/cron.d/qwen is not the line planned" in err + out
    assert s.read("cron.d/qwen") == text              # left as the admin wrote it


def test_a_line_that_spells_the_path_otherwise_is_refused_not_left_as_it_was(story):
    s = story
    odd = s.files["fstab"].replace("/models/qwen ", "/models/\\161wen ")   # \161: q
    with open(f"{s.etc}/fstab", "w") as f:
        f.write(odd)
    plan = planned(s)
    assert [st["params"]["file"] for st in plan["steps"]
            if st["kind"] == "repoint-config"].count("/etc/fstab") == 1
    rc, out, err = s.cli("apply", s.plan, "--yes")
    assert rc == 1
    assert f"line 2 of /etc/fstab does not spell {s.model} as the plan does" in err + out
    assert s.read("fstab") == odd
    assert os.path.ismount(s.vol)


PCT = """#!/usr/bin/python3
# stand-in for Proxmox's pct (it cannot be installed here): status, set --KEY VALUE, start,
# over the configs in $VACATE_TEST_PVE/lxc (a stopped container: set writes the current
# section, as Proxmox does); every call logged
import os, sys
pve = os.environ["VACATE_TEST_PVE"]
with open(os.path.join(pve, "calls"), "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
cmd, vmid, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
conf = os.path.join(pve, "lxc", vmid + ".conf")
if cmd == "status":
    print("status: stopped")
elif cmd == "set" and len(rest) == 2 and rest[0].startswith("--"):
    key = rest[0][2:]
    with open(conf) as f:
        lines = f.read().split("\\n")
    end = next((i for i, ln in enumerate(lines) if ln.startswith("[")), len(lines))
    at = next((i for i in range(end) if lines[i].startswith(key + ":")), None)
    if at is None:
        lines.insert(end, f"{key}: {rest[1]}")
    else:
        lines[at] = f"{key}: {rest[1]}"
    with open(conf + ".tmp", "w") as f:
        f.write("\\n".join(lines))
    os.replace(conf + ".tmp", conf)
else:
    sys.exit(f"pct stand-in: {' '.join(sys.argv[1:])} not supported")
"""


def test_a_proxmox_container_mount_point_is_repointed_by_pct_and_undone(story, monkeypatch):
    s = story
    pve = os.path.join(s.etc, "pve")
    os.makedirs(f"{pve}/lxc")
    conf = (f"arch: amd64\nhostname: qwen-ct\nmp0: {s.model},mp=/models,ro=1\n"
            "ostype: debian\n")
    with open(f"{pve}/lxc/101.conf", "w") as f:
        f.write(conf)
    bin_dir = os.path.join(s.tmp, "bin")
    os.makedirs(bin_dir)
    with open(f"{bin_dir}/pct", "w") as f:
        f.write(PCT)
    os.chmod(f"{bin_dir}/pct", 0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("VACATE_TEST_PVE", pve)

    plan = planned(s)
    (step,) = [st for st in plan["steps"] if st["kind"] == "repoint-mount-point"]
    new = f"{s.dest}/qwen"
    assert step["summary"] == f"pct set 101 --mp0 {new},mp=/models,ro=1"
    assert "pct set 101 --delete mp0" not in json.dumps(plan["steps"])   # not disarmed
    rc, out, err = s.cli("apply", s.plan, "--yes")
    assert rc == 0, err + out
    assert s.read("pve/lxc/101.conf") == conf.replace(s.model, new)
    with open(f"{pve}/calls") as f:
        assert f"set 101 --mp0 {new},mp=/models,ro=1" in f.read()
    rc, text, err = s.cli("report", s.plan)
    said = " ".join(text.split())
    assert f"repointed: CT 101 mp0: {s.model},mp=/models,ro=1 -> {new},mp=/models,ro=1" \
        in said, said
    assert f"undo: pct set 101 --mp0 {s.model},mp=/models,ro=1" in said

    rc, out, err = s.cli("undo", s.plan)
    assert rc == 0, err + out
    assert s.read("pve/lxc/101.conf") == conf


@pytest.mark.slow
def test_an_lxc_mount_entry_is_repointed_and_the_container_starts_from_dest(story, lxc_boxes):
    from harness.lxc_box import make_box

    s = story
    box = make_box(extra=[f"lxc.mount.entry = {s.model} srv/qwen none bind,ro,create=dir 0 0",
                          "lxc.signal.halt = SIGKILL"])
    lxc_boxes.append(box)
    with open(box.config, "rb") as f:
        before = f.read()
    plan = planned(s)
    assert [st["params"]["file"] for st in plan["steps"]
            if st["kind"] == "repoint-config"].count(box.config) == 1
    assert "edit-config" not in [st["kind"] for st in plan["steps"]]    # not commented out

    rc, out, err = s.cli("apply", s.plan, "--yes")
    assert rc == 0, err + out
    new = f"{s.dest}/qwen"
    old_line = f"lxc.mount.entry = {s.model} srv/qwen none bind,ro,create=dir 0 0"
    text = before.decode()
    assert text.count(old_line) == 1
    with open(box.config) as f:
        after = f.read()
    assert re.fullmatch(re.escape(text.split(old_line)[0]) + r"# vacate \d{4}-\d{2}-\d{2}: " +
                        re.escape(old_line + "\n" + old_line.replace(s.model, new)) +
                        re.escape(text.split(old_line)[1]), after), after
    (backup,) = [n for n in os.listdir(os.path.dirname(box.config)) if ".vacate-backup-" in n]
    assert backup.startswith("config.vacate-backup-")
    with open(os.path.join(os.path.dirname(box.config), backup), "rb") as f:
        assert f.read() == before
    assert not os.path.ismount(s.vol)

    # LXC reads the line: the container starts with the copy where the model was
    box.start()
    r = subprocess.run(["lxc-attach", "-n", box.name, "--", "sha256sum", "/srv/qwen/weights.bin"],
                       capture_output=True, text=True, timeout=30, check=False)
    with open(f"{new}/weights.bin", "rb") as f:
        assert r.stdout.split()[:1] == [hashlib.sha256(f.read()).hexdigest()], r.stderr
    box.stop()

    rc, out, err = s.cli("undo", s.plan)
    assert rc == 0, err + out
    with open(box.config, "rb") as f:
        assert f.read() == before


@pytest.mark.slow
def test_an_lxc_mount_entry_edited_since_the_plan_is_not_repointed(story, lxc_boxes):
    from harness.lxc_box import make_box

    s = story
    box = make_box(extra=[f"lxc.mount.entry = {s.model} srv/qwen none bind,ro,create=dir 0 0"])
    lxc_boxes.append(box)
    planned(s)
    with open(box.config) as f:
        text = f.read().replace("bind,ro,", "bind,")
    with open(box.config, "w") as f:
        f.write(text)
    rc, out, err = s.cli("apply", s.plan, "--yes")
    assert rc == 1
    assert f"of {box.config} is not the line planned" in err + out
    with open(box.config) as f:
        assert f.read() == text                      # left as the admin wrote it
    assert not [n for n in os.listdir(os.path.dirname(box.config)) if ".vacate-backup-" in n]


@pytest.mark.slow
def test_fstab_lines_name_the_new_place_with_its_escapes(story, lxc_boxes):
    """fstab and ``lxc.mount.entry`` spell a space in a path ``\\040``: the line names the
    new place the same way (a raw space would split the field), and a path in it so
    spelled is found and rewritten."""
    from harness.lxc_box import make_box

    s = story
    os.makedirs(f"{s.model}/sub dir")
    with open(f"{s.model}/sub dir/tokenizer.json", "w") as f:
        f.write('{"version": "1.0"}')
    sub = f"{s.model}/sub\\040dir"
    box = make_box(extra=[f"lxc.mount.entry = {sub} srv/tok none bind,ro,create=dir 0 0",
                          "lxc.signal.halt = SIGKILL"])
    lxc_boxes.append(box)
    with open(box.config, "rb") as f:
        before = f.read()
    dest = os.path.join(s.tmp, "new home")
    os.makedirs(dest)
    rc, out, err = s.cli("plan", s.vol, "--migrate", f"models/qwen={dest}", "-o", s.plan)
    assert rc == 0, err
    # the crontab's shell command would need the new path quoted: a person's step
    with open(s.plan) as f:
        (manual,) = [st for st in json.load(f)["steps"] if st["kind"] == "manual"]
    assert manual["summary"].startswith(f"/etc/cron.d/qwen: a cron job names {s.model}, ")
    assert "would need quoting: vacate does not rewrite the command" in manual["summary"]
    rc, out, err = s.cli("apply", s.plan, "--yes")
    assert rc == 4, err + out
    assert s.read("cron.d/qwen") == s.files["cron.d/qwen"]
    new = f"{s.tmp}/new\\040home/qwen"
    with open(box.config) as f:
        assert f"\nlxc.mount.entry = {new}/sub\\040dir srv/tok none bind,ro,create=dir 0 0\n" \
            in f.read()
    assert s.read("fstab").endswith(f"\n{new} /srv/qwen none bind,noauto,nofail 0 0\n")
    box.start()
    r = subprocess.run(["lxc-attach", "-n", box.name, "--", "cat", "/srv/tok/tokenizer.json"],
                       capture_output=True, text=True, timeout=30, check=False)
    assert r.stdout == '{"version": "1.0"}', r.stderr
    box.stop()
    rc, out, err = s.cli("undo", s.plan)
    assert rc == 0, err + out
    with open(box.config, "rb") as f:
        assert f.read() == before
    assert s.read("fstab") == s.files["fstab"]


def test_a_path_is_repointed_where_it_is_named_whole_never_inside_a_longer_one():
    from vacate.act.config_edit import repointed
    moves = (("/data/models/qwen", "/shared/models/qwen"),)
    line = (b"0 3 * * * root sync --from /data/models/qwen/ --to /backup/data/models/qwen "
            b"--also=/data/models/qwen2,/data/models/qwen:/mnt/data/models/qwen/x")
    assert repointed(line, moves) == (
        b"0 3 * * * root sync --from /shared/models/qwen/ --to /backup/data/models/qwen "
        b"--also=/data/models/qwen2,/shared/models/qwen:/mnt/data/models/qwen/x")
