"""The story's volume on a real loop-mounted filesystem, through ``vacate scan --json``: every
item gets the kind, label and recoverability the operator needs, at realistic (sparse) sizes."""

from __future__ import annotations

import io
import json
import os
import shutil
import time

import pytest
from harness.model_trees import HF, MISC, eagle3_run, nvfp4_model

from vacate.cli.env import Env
from vacate.cli.main import main

pytestmark = pytest.mark.root

GB = 1000 ** 3


def scan_json(path: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    rc = main(["scan", "--json", path], Env(stdout=out, stderr=err))
    assert rc == 0, err.getvalue()
    return json.loads(out.getvalue())


@pytest.fixture(params=["ext4", "xfs"])
def story(request):
    from harness.volumes import can_loop_mount, make_volume

    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume(request.param)
    try:
        root = v.mountpoint
        # 48 NVFP4 shards of ~4.65 GB each: 223 GB and ~397B parameters, all holes.
        params = nvfp4_model(os.path.join(root, "models", "Qwen3.5-397B-A17B-NVFP4"),
                             shards=48, rows=2_019_000)
        # 4.5 TB of hidden states in 20 sparse files.
        eagle3_run(root, hs_files=20, hs_size=225 * GB)
        with open(os.path.join(root, "cuda_13.0.1_580.82.07_linux.run"), "wb") as f:
            f.write(b"#!/bin/sh\n# This script was generated using Makeself 2.4.5\n")
            f.truncate(4_300_000_000)
        shutil.copy(os.path.join(MISC, "kaminarly-sglang-cu130-image-pip-freeze.txt"),
                    os.path.join(root, "ml-env-backup-cuda128.txt"))
        shutil.copytree(os.path.join(HF, "qwen3.5-18b-reap-lfs-pointers"),
                        os.path.join(root, "models", "reap-clone"))
        os.makedirs(os.path.join(root, "lost+found"), exist_ok=True)
        yield root, params
    finally:
        v.close()


def test_story_volume_through_scan(story):
    root, params = story
    t0 = time.monotonic()
    doc = scan_json(root)
    assert time.monotonic() - t0 < 30
    items = {os.path.relpath(i["path"], root): i for i in doc["items"]}

    m = items["models/Qwen3.5-397B-A17B-NVFP4"]
    assert m["parent"] == os.path.join(root, "models")
    assert m["kind"] == "model"
    assert m["details"]["parameters"] == params and 390e9 < params < 400e9
    assert m["label"].startswith("Qwen3.5-397B-A17B-NVFP4, qwen3_5_moe, NVFP4 (modelopt), 397B")
    assert "48 safetensors shards, complete, 223." in m["label"]
    assert m["apparent_bytes"] > 222 * GB

    e = items["eagle3"]
    assert (e["kind"], e["recoverable"], e["parent"]) == ("training-output", "unique", None)
    assert e["label"].startswith("EAGLE-3 draft-model training run for Kimi-K2.5: 4.5 TB cached"
                                 " hidden states (regenerable), 10 draft checkpoints")
    assert "ShareGPT shards, a SpecForge checkout" in e["label"]
    hs = items["eagle3/cache/hidden_states"]
    assert (hs["kind"], hs["recoverable"]) == ("cache", "regenerable")

    cuda = items["cuda_13.0.1_580.82.07_linux.run"]
    assert (cuda["kind"], cuda["recoverable"], cuda["guess"]) == ("installer", "re-downloadable",
                                                                  False)
    assert cuda["details"]["driver_version"] == "580.82.07"
    env = items["ml-env-backup-cuda128.txt"]
    assert env["kind"] == "env-backup" and "pip freeze" in env["label"]
    assert items["lost+found"]["kind"] == "filesystem-artifact"
    reap = items["models/reap-clone"]
    assert reap["kind"] == "model" and "Git LFS pointers" in reap["label"]
    models = items["models"]
    assert models["kind"] == "directory" and "2 models" in models["label"]
    # Top-level items still add up to the totals: sub-items are extra rows, not extra bytes.
    top = [i for i in doc["items"] if i["parent"] is None]
    assert sum(i["disk_bytes"] for i in top) <= doc["totals"]["disk_bytes"]
    assert any(w["code"] == "incomplete-model" for w in doc["warnings"])


def test_story_volume_through_check(story):
    """check turns recoverability into status: nothing uses the fresh volume, so what can be
    had again is disposable, unique data is cold, lost+found is an artifact."""
    root, _ = story
    out, err = io.StringIO(), io.StringIO()
    main(["check", "--json", root], Env(stdout=out, stderr=err))
    doc = json.loads(out.getvalue())
    st = {os.path.relpath(i["path"], root): i["status"] for i in doc["items"]}
    assert st["cuda_13.0.1_580.82.07_linux.run"] == "disposable"
    assert st["eagle3/cache/hidden_states"] == "disposable"
    assert st["eagle3"] == "cold"                       # checkpoints inside are unique
    assert st["ml-env-backup-cuda128.txt"] == "cold"
    assert st["lost+found"] == "artifact"
    assert st["models/Qwen3.5-397B-A17B-NVFP4"] == "cold"   # no source known: not disposable
