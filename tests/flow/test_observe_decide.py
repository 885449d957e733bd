"""Observe, then decide: a saved observation decides exactly as a look at the machine does,
on real volumes with holders of every kind; a broken or foreign document is a clear error."""

from __future__ import annotations

import io
import json
import os
import subprocess

import pytest
from harness.holders import Holders
from harness.observed import check_both_ways
from harness.paths import STORY
from harness.volumes import can_loop_mount, make_volume

from vacate.cli.env import Env
from vacate.cli.main import main


def run_cli(*argv, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), Env(stdout=out, stderr=err, stdin=stdin))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(params=["ext4", "xfs", "btrfs"])
def held(request):
    """A real volume with a holder of every access kind and every kernel user."""
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume(request.param, size_mb=400 if request.param == "btrfs" else None)
    h = Holders(v.mountpoint)
    nested = os.path.join(v.mountpoint, "scratch")
    try:
        m = v.mountpoint
        for d in ("models/q", "data", "lib", "bin", "work", "scratch", "sub/deep"):
            os.makedirs(os.path.join(m, d), exist_ok=True)
        for name in ("models/q/w.bin", "data/a.jsonl", "sub/deep/x"):
            with open(os.path.join(m, name), "wb") as f:
                f.write(os.urandom(8192))
        h.fd(f"{m}/data/a.jsonl")
        h.writer(f"{m}/data/log.txt")
        h.mmap_only(f"{m}/models/q/w.bin")
        h.shared_lib(f"{m}/lib")
        h.cwd(f"{m}/work")
        h.exe(f"{m}/bin")
        h.deleted(f"{m}/data/gone.bin")
        h.private_ns_bind(f"{m}/sub", "deep/x")
        h.swapfile(f"{m}/swapfile", request.param)
        h.loop_device(f"{m}/disk.img")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", nested], check=True)
        yield v, h
    finally:
        subprocess.run(["umount", nested], check=False, capture_output=True)
        h.close()
        v.close()


@pytest.mark.slow
@pytest.mark.root
def test_check_from_a_saved_observation_is_check(held):
    v, _h = held
    rc, doc = check_both_ways(v.mountpoint)
    assert rc == 1 and doc["verdict"]["safe_to_unmount"] is False
    kinds = {k for c in doc["consumers"] if c["type"] == "process" for k in c["access"]}
    assert {"fd", "mmap", "cwd", "exe"} <= kinds
    types = {c["type"] for c in doc["consumers"]}
    assert {"process", "swap", "loop-device", "mount"} <= types
    steps = {a["kind"] for b in doc["verdict"]["blockers"] for a in b["actions"]}
    assert {"end-process", "swapoff", "detach-loop", "unmount"} <= steps
    # --no-scan and --no-config observe less, and decide the same way from what they saw
    rc2, doc2 = check_both_ways(v.mountpoint, "--no-scan", "--no-config")
    assert rc2 == 1 and doc2["scanned"] is False


@pytest.mark.root
def test_scan_from_a_saved_observation_is_scan(volume, tmp_path):
    m = volume.mountpoint
    os.makedirs(f"{m}/models/q")
    with open(f"{m}/models/q/config.json", "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, f)
    with open(os.fsencode(m) + b"/odd-\xff-name", "wb") as f:
        f.write(b"x" * 5000)
    rc, direct, _ = run_cli("scan", "--json", m)
    assert rc == 0
    obs = tmp_path / "obs.json"
    assert run_cli("observe", "--no-users", m, "-o", str(obs))[0] == 0
    rc2, saved, err = run_cli("scan", "--json", "--from", str(obs))
    assert rc2 == 0, err
    a, b = json.loads(direct), json.loads(saved)
    a.pop("elapsed_s")
    b.pop("elapsed_s")
    assert a == b
    assert any(i["path"].endswith("odd-\udcff-name") for i in a["items"])


def _story_observation(tmp_path) -> str:
    """An observation made on this machine of a plain directory (no root needed)."""
    d = tmp_path / "data"
    (d / "eagle3").mkdir(parents=True)
    (d / "eagle3" / "train.jsonl").write_text('{"x": 1}\n' * 50)
    (d / "ml-env-backup.txt").write_text("torch==2.9.0\nnumpy==2.1.0\n")
    rc, out, err = run_cli("observe", "--no-config", str(d))
    assert rc == 0, err
    return out


def test_a_newer_or_foreign_schema_is_refused_clearly(tmp_path):
    doc = json.loads(_story_observation(tmp_path))
    for schema, says in (("vacate.observation/2", "not readable by this version"),
                         ("vacate.check/1", "not a vacate observation"),
                         (None, "not a vacate observation")):
        f = tmp_path / "o.json"
        f.write_text(json.dumps({**doc, "schema": schema}))
        rc, out, err = run_cli("check", "--from", str(f), "--json")
        assert rc == 2 and out == "" and says in err and "Traceback" not in err


@pytest.mark.parametrize("breakage, named", [
    (lambda d: d["target"]["mount"].update(major="8"), "target.mount.major"),
    (lambda d: d["target"].pop("st_dev"), "target.st_dev: missing"),
    (lambda d: d.update(consumers={"a": 1}), "consumers: expected a list"),
    (lambda d: d["inventory"]["items"].append({"id": 5}), "inventory.items[2]"),
    (lambda d: d["inventory"]["items"][0].update(path=7), "inventory.items[0].path"),
    (lambda d: d["inventory"]["dirs"].update(columns=["path"]), "inventory.dirs"),
    (lambda d: d["inventory"]["dirs"]["rows"].append(["x", 1]), "inventory.dirs.rows["),
    (lambda d: d.update(problems=[{"code": "x"}]), "problems[0].message: missing"),
    (lambda d: d["inventory"]["totals"].update(files=True), "inventory.totals.files"),
])
def test_a_broken_observation_is_a_clear_error_naming_the_place(tmp_path, breakage, named):
    doc = json.loads(_story_observation(tmp_path))
    breakage(doc)
    f = tmp_path / "broken.json"
    f.write_text(json.dumps(doc))
    rc, out, err = run_cli("check", "--from", str(f), "--json")
    assert rc == 2 and out == ""
    assert named in err and "Traceback" not in err, err


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", "null", '"x"', "\x00\x01"])
def test_what_is_not_json_or_not_an_object_is_refused(tmp_path, text, capsys):
    f = tmp_path / "x.json"
    f.write_text(text)
    rc, out, err = run_cli("check", "--from", str(f))
    err += capsys.readouterr().err         # (an empty file is refused as the option is read)
    assert rc == 2 and out == "" and "Traceback" not in err
    assert "vacate: error:" in err or f"argument --from: {f}: is empty" in err, err


def test_from_stdin_and_argument_rules(tmp_path):
    text = _story_observation(tmp_path)
    rc, out, err = run_cli("check", "--from", "-", "--json", stdin=io.StringIO(text))
    assert rc in (0, 1), err
    assert json.loads(out)["schema"] == "vacate.check/1"
    assert run_cli("check")[0] == 2
    assert run_cli("check", str(tmp_path), "--from", "-", stdin=io.StringIO(text))[0] == 2
    # a scan-only observation has no users to decide on
    d = tmp_path / "data"
    rc, only_scan, _ = run_cli("observe", "--no-users", str(d))
    rc, out, err = run_cli("check", "--from", "-", stdin=io.StringIO(only_scan))
    assert rc == 2 and "--no-users" in err
    # --no-scan made no inventory for scan --from
    rc, listed, _ = run_cli("observe", "--no-scan", "--no-config", str(d))
    rc, out, err = run_cli("scan", "--from", "-", stdin=io.StringIO(listed))
    assert rc == 2 and "--no-scan" in err




def test_deciding_on_a_fixture_touches_nothing_on_the_machine(monkeypatch):
    """An observation read from a JSON file alone is all deciding needs: with every way to
    look at the machine refused, the story's verdict, statuses and actions come out."""
    import builtins

    from vacate.decide import verdict
    from vacate.observing.model.observation import Observation
    from vacate.output import jsonfmt

    with open(STORY) as f:
        obs = Observation.loads(f.read())

    def refuse(*a, **k):
        raise AssertionError(f"deciding looked at the machine: {a[:1]}")

    with monkeypatch.context() as mp:
        for mod, names in ((os, ("open", "stat", "lstat", "scandir", "listdir", "readlink",
                                 "statvfs", "walk", "access")), (builtins, ("open",)),
                           (subprocess, ("run", "Popen"))):
            for n in names:
                mp.setattr(mod, n, refuse)
        result = verdict.check(obs)
        doc = jsonfmt.check_doc(result)
    assert doc["verdict"]["safe_to_unmount"] is False
    status = {i["path"]: i["status"] for i in doc["items"] if i["parent"] is None}
    assert status["/data/models"] == "active"            # the mmapped shard
    assert status["/data/eagle3"] == "referenced"        # the disabled unit names its draft
    assert status["/data/lost+found"] == "artifact"
    assert status["/data/ml-env-backup-cuda128.txt"] == "cold"
    assert status["/data/cuda_13.0.1_580.82.07_linux.run"] == "disposable"
    (blocker,) = doc["verdict"]["blockers"]
    proc = next(c for c in obs.consumers if c.type == "process")
    assert blocker["consumer"] == proc.id
    assert blocker["actions"] == [{
        "kind": "end-process", "subject": f"pid {proc.attrs.pid}",
        "argv": ["kill", "-TERM", str(proc.attrs.pid)],
        "where": {"kind": "host", "name": None, "pid": None, "lxcpath": None, "user": None},
        "precondition": {"pid": proc.attrs.pid, "start_time": proc.attrs.start_time},
        "params": {}, "consumer": proc.id}]
    referenced = [w for w in doc["warnings"] if w["code"] == "referenced"]
    assert any("sglang-kimi.service" in w["message"] for w in referenced)
