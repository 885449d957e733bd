"""The story's container, migrated: from the (stand-in) Proxmox host, ``vacate plan --ct 129
/data --migrate models/Qwen3.5-397B-A17B-NVFP4=/shared/models`` then ``vacate apply``. The
container sees ``/shared`` as its ``mp1``, a directory of another loop volume on the host (the
unit can only start from a place the container sees). The model is copied on the host, the
unit inside the container repointed by a drop-in of vacate's inside the container, naming the
container's path of the copy, and started there; ``vacate undo`` removes that drop-in. An
environment file and a crontab inside the container that name the model are rewritten
there (the host's own files at the same paths untouched), and put back by the undo."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from harness.ct129 import MODEL, _wait_serving, container_129
from harness.volumes import make_volume

VACATE = [sys.executable, "-m", "vacate"]
SHARD = "model-00001-of-00001.safetensors"
UNIT = "sglang-qwen.service"


def need_ct129() -> None:
    from harness.ct129 import why_not

    why = why_not()
    if why:
        pytest.skip(why)


@contextlib.contextmanager
def with_shared(tmp_path, **kw):
    """Container 129 as in the story (``kw``: as :func:`test_ct.container_129` takes), with a
    second volume's directory as its ``mp1`` at ``/shared``; yields (volume, host, box,
    config, the host's directory behind /shared)."""
    need_ct129()
    shared = make_volume("ext4")
    try:
        behind = os.path.join(shared.mountpoint, "pool")
        os.makedirs(behind)
        with container_129(tmp_path, shared=behind, **kw) as got:
            yield (*got, behind)
    finally:
        shared.close()


@pytest.fixture
def ct129_shared(tmp_path):
    """Container 129 with ``/shared`` (:func:`with_shared`) and an admin's drop-in of its own
    for the server's unit."""
    admin = {f"{UNIT}.d/override.conf": "[Service]\nEnvironment=ADMIN=1\n"}
    with with_shared(tmp_path, files=admin) as got:
        yield got


def maps_of_unit(box, under: str) -> list[str]:
    """The files the unit's processes map, as the container spells them, under ``under``."""
    r = box.systemctl("show", "-p", "MainPID", "--value", UNIT)
    pid = r.stdout.strip()
    if pid in ("", "0"):
        return []
    r = box.nsenter("cat", f"/proc/{pid}/maps")
    return sorted({ln.split(None, 5)[5] for ln in r.stdout.splitlines()
                   if len(ln.split(None, 5)) == 6 and
                   ln.split(None, 5)[5].startswith(under.rstrip("/") + "/")})


def mapped_on(dev: int) -> list[int]:
    """Host pids mapping a file of the filesystem ``dev`` (by device)."""
    want = f"{os.major(dev):02x}:{os.minor(dev):02x}"
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/maps") as f:
                if any(ln.split()[3] == want for ln in f if len(ln.split()) > 5):
                    out.append(int(p))
        except OSError:
            continue
    return out


def vacate(*args, env, timeout=300):
    return subprocess.run([*VACATE, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


def plan_migrate(tmp_path, env) -> tuple[str, dict]:
    """``vacate plan --ct 129 /data --migrate MODEL=/shared/models``: the plan's path and
    its document."""
    plan = str(tmp_path / "migrate.plan")
    r = vacate("plan", "--ct", "129", "/data", "--migrate", f"{MODEL}=/shared/models",
               "--keep", "eagle3", "-o", plan, "--grace", "2", "--json", env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return plan, json.loads(r.stdout)


def serving_from_shared(box) -> list[str]:
    """What the unit maps under /shared once it maps anything there (20 s at most)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not maps_of_unit(box, "/shared"):
        time.sleep(0.2)
    return maps_of_unit(box, "/shared")


@pytest.mark.root
@pytest.mark.slow
def test_the_story_migrated_inside_the_container_then_undo(ct129_shared, tmp_path):
    vol, host, box, conf, behind = ct129_shared
    _wait_serving(box)
    env = host.environ()
    units = box.units_dir
    dev = os.stat(vol.mountpoint).st_dev
    with open(os.path.join(units, UNIT), "rb") as f:
        unit_before = f.read()
    plan, _doc = plan_migrate(tmp_path, env)
    r = vacate("apply", plan, "--yes", env=env)
    said = r.stdout + r.stderr
    assert r.returncode in (0, 4), said[-6000:]

    # the copy lies on the host behind mp1; the container runs its unit from it
    name = os.path.basename(MODEL)
    assert os.path.isfile(os.path.join(behind, "models", name, SHARD))
    assert serving_from_shared(box) == [f"/shared/models/{name}/{SHARD}"]
    assert box.systemctl("is-active", UNIT).stdout.strip() == "active"
    assert not maps_of_unit(box, "/data") and not mapped_on(dev)

    # the unit file is as it was; vacate's drop-in is inside the container, sorts last, and
    # names the container's path of the copy (never the host's)
    with open(os.path.join(units, UNIT), "rb") as f:
        assert f.read() == unit_before
    d = os.path.join(units, f"{UNIT}.d")
    names = sorted(os.listdir(d))
    assert names[0] == "override.conf" and names[-1].endswith("vacate-migrate.conf"), names
    with open(os.path.join(d, names[-1])) as f:
        dropin = f.read()
    assert f"/shared/models/{name}/{SHARD}" in dropin and behind not in dropin, dropin
    assert not os.path.exists(f"/etc/systemd/system/{UNIT}.d")       # not the host's
    with open(conf) as f:            # mp0 (the volume) goes; mp1 (the copy's) stays
        text = f.read()
    assert f"mp1: {behind},mp=/shared" in text and "delete: mp0" in text, text
    calls = host.calls()
    assert any(c.startswith(f"exec 129 --keep-env 0 -- systemctl stop {UNIT}") for c in calls)
    assert any(c.startswith("exec 129 --keep-env 0 -- sh -c ") and
               f"d=/etc/systemd/system/{UNIT}.d;" in c and 'mkdir -p "$d" && cat > ' in c
               for c in calls), calls   # written there
    assert any(c.startswith(f"exec 129 --keep-env 0 -- systemctl start {UNIT}")
               for c in calls), calls

    # undo: vacate's drop-in removed, inside the container, through pct exec
    r = vacate("undo", plan, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert os.listdir(d) == ["override.conf"]
    show = box.systemctl("show", "-p", "ExecStart", "--value", UNIT).stdout
    assert f"/data/{MODEL}/{SHARD}" in show and "/shared" not in show, show


ENV_LINK = "/etc/systemd/system/qwen.env"


@pytest.fixture
def ct129_env(tmp_path):
    """Container 129 whose server takes the model from an environment file: the unit's
    ``EnvironmentFile=`` is an absolute symlink inside the container to a file under
    ``/etc/systemd/system/DECOY`` -- a path the host has too, with its own file there, which
    the host would reach if it followed the link through ``/proc/PID/root``. Yields (volume,
    host, box, the host's directory behind /shared, the host's decoy file)."""
    need_ct129()
    decoy_dir = f"/etc/systemd/system/vacate-decoy-{os.getpid()}"
    line = f"MODEL=/data/{MODEL}\n"
    qwen = ("[Unit]\nDescription=SGLang Qwen3.5 NVFP4\n[Service]\n"
            f"EnvironmentFile={ENV_LINK}\n"
            "ExecStart=/usr/bin/python3 /etc/systemd/system/serve.py "
            f"${{MODEL}}/{SHARD}\n")
    files = {"qwen.env": f"->{decoy_dir}/qwen.env",
             f"{os.path.basename(decoy_dir)}/qwen.env": f"# the model\n{line}"}
    os.makedirs(decoy_dir)
    decoy = f"{decoy_dir}/qwen.env"
    try:
        with open(decoy, "w") as f:
            f.write(f"# the host's own, not the container's\n{line}")
        with with_shared(tmp_path, files=files, qwen=qwen) as (vol, host, box, _conf, behind):
            yield vol, host, box, behind, decoy
    finally:
        shutil.rmtree(decoy_dir, ignore_errors=True)


@pytest.mark.root
@pytest.mark.slow
def test_an_environment_file_inside_the_container_is_repointed_there(ct129_env, tmp_path):
    vol, host, box, behind, decoy = ct129_env
    _wait_serving(box)
    env = host.environ()
    name = os.path.basename(MODEL)
    dev = os.stat(vol.mountpoint).st_dev
    with open(decoy) as f:
        decoy_before = f.read()
    real = os.path.join(box.units_dir, os.path.relpath(decoy, "/etc/systemd/system"))
    plan, doc = plan_migrate(tmp_path, env)
    kinds = [s["kind"] for s in doc["steps"]]
    assert "manual" not in kinds[:kinds.index("start-unit")], doc["steps"]
    assert "repoint-config" in kinds, kinds
    r = vacate("apply", plan, "--yes", env=env)
    assert r.returncode in (0, 4), (r.stdout + r.stderr)[-6000:]

    # the file the container's link names was rewritten, inside the container; the host's
    # file at the same path is untouched, and the link is still a link
    with open(real) as f:
        text = f.read()
    assert f"MODEL=/shared/models/{name}\n" in text and "# vacate " in text, text
    with open(decoy) as f:
        assert f.read() == decoy_before
    assert os.readlink(os.path.join(box.units_dir, "qwen.env")) == decoy
    backups = [n for n in os.listdir(os.path.dirname(real)) if ".vacate-backup-" in n]
    assert len(backups) == 1, backups
    # and the unit runs from the copy, as the container sees it
    assert serving_from_shared(box) == [f"/shared/models/{name}/{SHARD}"]
    assert not maps_of_unit(box, "/data") and not mapped_on(dev)
    assert os.path.isfile(os.path.join(behind, "models", name, SHARD))

    # undo puts the line back, inside the container
    r = vacate("undo", plan, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    with open(real) as f:
        assert f.read() == f"# the model\nMODEL=/data/{MODEL}\n"
    with open(decoy) as f:
        assert f.read() == decoy_before


SPOOL = "/var/spool/cron/crontabs"
CRON_LINE = f"17 3 * * * ls /data/{MODEL} > /dev/null\n"


@pytest.fixture
def ct129_cron(tmp_path):
    """Container 129 with a crontab of its own naming the model: the container's
    ``/var/spool/cron/crontabs`` is a directory of its own (bound over the host's inside it
    only), and the host's spool holds a ``root`` crontab with the very same line, which the
    host would reach if it wrote the host's path. Yields (host, box, the container's crontab
    as the host reaches it, the host's own crontab, the directory behind /shared)."""
    need_ct129()
    decoy = os.path.join(SPOOL, "root")
    if os.path.lexists(decoy):
        pytest.skip(f"{decoy} exists: the host's own crontab is not touched by tests")
    top = SPOOL
    while not os.path.exists(os.path.dirname(top)):
        top = os.path.dirname(top)
    made = None if os.path.exists(SPOOL) else top
    inside = tmp_path / "ct-spool"
    inside.mkdir()
    (inside / "root").write_text(f"# the container's\n{CRON_LINE}")
    os.chmod(inside / "root", 0o600)
    try:
        os.makedirs(SPOOL, exist_ok=True)
        with open(decoy, "w") as f:
            f.write(f"# the host's own, not the container's\n{CRON_LINE}")
        with with_shared(tmp_path, binds=((str(inside), SPOOL),)) as (_v, host, box, _c, behind):
            yield host, box, str(inside / "root"), decoy, behind
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        elif os.path.lexists(decoy):
            os.unlink(decoy)


@pytest.mark.root
@pytest.mark.slow
def test_a_crontab_inside_the_container_is_repointed_there(ct129_cron, tmp_path):
    host, box, mine, decoy, behind = ct129_cron
    _wait_serving(box)
    env = host.environ()
    name = os.path.basename(MODEL)
    with open(mine, "rb") as f:
        before = f.read()
    with open(decoy, "rb") as f:
        decoy_before = f.read()
    plan, doc = plan_migrate(tmp_path, env)
    (step,) = [s for s in doc["steps"] if s["kind"] == "repoint-config"]
    assert step["params"]["file"] == f"{SPOOL}/root" and step["params"]["ct"] == "129", step
    r = vacate("apply", plan, "--yes", env=env)
    assert r.returncode in (0, 4), (r.stdout + r.stderr)[-6000:]

    # the container's crontab names the copy as the container sees it, the line as it was
    # kept behind vacate's marker; its backup is hidden beside it (cron would read it)
    with open(mine) as f:
        text = f.read()
    assert re.fullmatch(r"# the container's\n# vacate \d{4}-\d{2}-\d{2}: " +
                        re.escape(CRON_LINE + CRON_LINE.replace(f"/data/{MODEL}",
                                                                f"/shared/models/{name}")),
                        text), text
    r = box.nsenter("cat", f"{SPOOL}/root")            # what cron inside the container reads
    assert r.stdout == text, r.stderr
    (backup,) = [n for n in os.listdir(os.path.dirname(mine)) if ".vacate-backup-" in n]
    assert backup.startswith(".root.vacate-backup-")
    with open(os.path.join(os.path.dirname(mine), backup), "rb") as f:
        assert f.read() == before
    # the host's spool at the same path is untouched, and holds no backup
    with open(decoy, "rb") as f:
        assert f.read() == decoy_before
    assert os.listdir(SPOOL) == ["root"]
    assert os.path.isfile(os.path.join(behind, "models", name, SHARD))
    r = vacate("report", plan, env=env)
    said = " ".join(r.stdout.split())
    assert f"repointed: {SPOOL}/root:2: {CRON_LINE.strip()} -> " \
           f"{CRON_LINE.strip().replace(f'/data/{MODEL}', f'/shared/models/{name}')}" \
        in said, said
    assert f"undo: pct exec 129 --keep-env 0 -- cp -p {SPOOL}/.root.vacate-backup-" in said

    # undo puts the line back, inside the container
    r = vacate("undo", plan, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    with open(mine, "rb") as f:
        assert f.read() == before
    with open(decoy, "rb") as f:
        assert f.read() == decoy_before
