"""Recognisers on artifacts made by the real tools: qemu-img disk images, dpkg-deb and
rpmbuild packages, a gcore core dump, HF Trainer / DeepSpeed / torch.distributed
checkpoints, webdataset tars, git worktrees, and the name-only cases marked as guesses."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tarfile

import numpy as np
import pytest
from harness.model_trees import git, hub_repo, scan_tree, small_model, specforge_checkout
from safetensors.numpy import save, save_file


def need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (scripts/test-deps.sh installs them)")


def run(*cmd: str, cwd: str | None = None) -> None:
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, timeout=60)


def kinds(items) -> dict[str, tuple[str, str | None]]:
    return {n: (i.classification.kind, i.classification.recoverable) for n, i in items.items()}


@pytest.mark.slow
def test_disk_images_made_by_qemu_img(tmp_path):
    need("qemu-img", "sfdisk")
    vol = tmp_path / "vol"
    vol.mkdir()
    for fmt in ("qcow2", "vmdk", "vdi", "vhdx"):
        run("qemu-img", "create", "-q", "-f", fmt, str(vol / f"disk.{fmt}"), "1G")
    run("qemu-img", "create", "-q", "-f", "raw", str(vol / "gpt.img"), "8M")
    subprocess.run(["sfdisk", "-q", str(vol / "gpt.img")], input=b"label: gpt\n,\n",
                   check=True, capture_output=True)
    (vol / "blank.img").write_bytes(b"\0" * 4096)
    items, _ = scan_tree(str(vol))
    for fmt in ("qcow2", "vmdk", "vdi", "vhdx"):
        c = items[f"disk.{fmt}"].classification
        assert (c.kind, c.details["format"], c.recoverable) == ("vm-image", fmt, "unique"), fmt
        assert c.confidence >= 0.9
    assert items["disk.qcow2"].classification.details["qcow2_version"] == 3
    gpt = items["gpt.img"].classification
    assert (gpt.kind, gpt.details["partition_table"]) == ("vm-image", "GPT")
    assert items["blank.img"].classification.kind == "file"      # no signature: not claimed


def test_packages_made_by_dpkg_deb_and_rpmbuild(tmp_path):
    need("dpkg-deb", "rpmbuild")
    vol = tmp_path / "vol"
    vol.mkdir()
    pkg = tmp_path / "pkg"
    os.makedirs(pkg / "DEBIAN")
    (pkg / "DEBIAN" / "control").write_text(
        "Package: vacate-probe\nVersion: 1.2-3\nArchitecture: amd64\nMaintainer: t <t@t>\n"
        "Description: probe\n")
    run("dpkg-deb", "--build", "--root-owner-group", str(pkg),
        str(vol / "vacate-probe_1.2-3_amd64.deb"))
    top = tmp_path / "rpm"
    os.makedirs(top / "SPECS")
    (top / "SPECS" / "p.spec").write_text(
        "Name: vacate-probe\nVersion: 1.2\nRelease: 3\nSummary: probe\nLicense: MIT\n"
        "BuildArch: noarch\n%description\nprobe\n%files\n")
    run("rpmbuild", "-bb", "--quiet", "--define", f"_topdir {top}", "--define",
        f"_dbpath {top / 'db'}", str(top / "SPECS" / "p.spec"))     # nothing in ~/.rpmdb
    shutil.copy(top / "RPMS" / "noarch" / "vacate-probe-1.2-3.noarch.rpm", vol)
    (vol / "fake_1.0_amd64.deb").write_bytes(b"not an ar archive")
    items, _ = scan_tree(str(vol))
    deb = items["vacate-probe_1.2-3_amd64.deb"].classification
    assert (deb.kind, deb.details["version"], deb.confidence) == ("installer", "1.2-3", 0.85)
    rpm = items["vacate-probe-1.2-3.noarch.rpm"].classification
    assert (rpm.kind, rpm.details["product"], rpm.confidence) == ("installer", "vacate-probe",
                                                                  0.85)
    assert items["fake_1.0_amd64.deb"].classification.confidence <= 0.5


def test_core_dump_made_by_gcore(tmp_path):
    need("gcore")
    vol = tmp_path / "vol"
    vol.mkdir()
    p = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        run("gcore", "-o", str(vol / "core"), str(p.pid))
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    (vol / "core.txt").write_text("not a core")
    items, _ = scan_tree(str(vol))
    c = items[f"core.{p.pid}"].classification
    assert (c.kind, c.recoverable) == ("core-dump", "unique")
    assert items["core.txt"].classification.kind != "core-dump"


def test_trainer_deepspeed_and_distcp_checkpoints(tmp_path):
    run_dir = tmp_path / "vol" / "llama-sft"
    for step in (500, 1000, 1500):
        d = run_dir / f"checkpoint-{step}"
        small_model(str(d))
        (d / "trainer_state.json").write_text(json.dumps({"global_step": step, "epoch": 1.0}))
        for n in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
            (d / n).write_bytes(b"PK\x03\x04")
    os.makedirs(run_dir / "runs" / "Dec01_00-00-00")
    with open(run_dir / "runs" / "Dec01_00-00-00" / "events.out.tfevents.1733011200.host.1.0",
              "wb") as f:
        f.truncate(4 << 20)                 # big enough to be named in the run
    ds = tmp_path / "vol" / "ds-run" / "global_step200"
    os.makedirs(ds)
    for n in ("zero_pp_rank_0_mp_rank_00_optim_states.pt", "mp_rank_00_model_states.pt"):
        (ds / n).write_bytes(b"\0" * 128)
    (ds.parent / "latest").write_text("global_step200")
    dcp = tmp_path / "vol" / "step_300"
    os.makedirs(dcp)
    for n in ("__0_0.distcp", "__1_0.distcp", ".metadata"):
        (dcp / n).write_bytes(b"\0" * 64)
    items, _ = scan_tree(str(tmp_path / "vol"))
    run_c = items["llama-sft"].classification
    assert (run_c.kind, run_c.recoverable) == ("training-output", "unique")
    assert run_c.details["checkpoints"] == 3
    ck = items["llama-sft/checkpoint-1500"].classification
    assert (ck.kind, ck.details["step"]) == ("checkpoint", 1500)
    assert "optimizer state" in ck.label and ck.details["parameters"] > 0
    tb = items["llama-sft/runs/Dec01_00-00-00"].classification
    assert tb.kind == "logs" and tb.details["tool"] == "tensorboard"
    assert items["ds-run"].classification.kind == "training-output"
    assert items["ds-run/global_step200"].classification.kind == "checkpoint"
    d = items["step_300"].classification
    assert d.kind == "checkpoint" and "torch.distributed shards" in d.label


def test_datasets(tmp_path):
    vol = tmp_path / "vol"
    wds = vol / "laion-wds"
    os.makedirs(wds)
    for i in range(3):
        with tarfile.open(wds / f"shard-{i:06d}.tar", "w") as t:
            src = tmp_path / f"{i}.txt"
            src.write_text("caption")
            t.add(src, arcname=f"{i:09d}.txt")
    chat = vol / "chat"
    os.makedirs(chat)
    for i in range(2):
        (chat / f"train-{i}.jsonl").write_text(json.dumps(
            {"messages": [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": "hello"}]}) + "\n")
    hfds = vol / "hf-datasets" / "squad" / "plain_text" / "0.0.0" / "abc123"
    os.makedirs(hfds)
    (hfds / "dataset_info.json").write_text(json.dumps({"dataset_name": "squad"}))
    (hfds / "squad-train.arrow").write_bytes(b"ARROW1\0\0" + b"\0" * 100)
    items, _ = scan_tree(str(vol))
    w = items["laion-wds"].classification
    assert (w.kind, w.details["format"], w.details["shards"]) == ("dataset", "tar", 3)
    assert "webdataset" in w.label
    c = items["chat"].classification
    assert (c.kind, c.details["format_name"]) == ("dataset", "chat messages")
    h = items["hf-datasets/squad/plain_text/0.0.0/abc123"].classification
    assert (h.kind, h.recoverable, h.guess) == ("dataset", "re-downloadable", True)


def test_name_only_installers_and_local_wheels(tmp_path):
    vol = tmp_path / "vol"
    vol.mkdir()
    for n in ("NVIDIA-Linux-x86_64-580.82.07.run",
              "cudnn-linux-x86_64-9.10.2.21_cuda12-archive.tar.xz",
              "nccl_2.27.3-1+cuda12.9_x86_64.txz", "Miniforge3-25.3.0-3-Linux-x86_64.sh"):
        (vol / n).write_bytes(b"\0" * 64)
    (vol / "torch-2.7.1+cu128-cp312-cp312-linux_x86_64.whl").write_bytes(b"PK\x03\x04" + b"\0" * 9)
    items, _ = scan_tree(str(vol))
    drv = items["NVIDIA-Linux-x86_64-580.82.07.run"].classification
    assert drv.kind == "installer" and drv.guess and drv.details["version"] == "580.82.07"
    assert drv.source.endswith("/580.82.07/NVIDIA-Linux-x86_64-580.82.07.run")
    cudnn = items["cudnn-linux-x86_64-9.10.2.21_cuda12-archive.tar.xz"].classification
    assert (cudnn.details["product"], cudnn.details["cuda"]) == ("cuDNN", "12")
    assert items["nccl_2.27.3-1+cuda12.9_x86_64.txz"].classification.details["product"] == "NCCL"
    mf = items["Miniforge3-25.3.0-3-Linux-x86_64.sh"].classification
    assert mf.kind == "installer" and "github.com/conda-forge/miniforge" in mf.source
    whl = items["torch-2.7.1+cu128-cp312-cp312-linux_x86_64.whl"].classification
    assert whl.kind == "installer" and whl.recoverable is None      # not on PyPI as such


def test_containers_caches_and_worktrees(tmp_path):
    vol = tmp_path / "vol"
    oci = vol / "oci"
    os.makedirs(oci / "blobs" / "sha256")
    (oci / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (oci / "index.json").write_text('{"schemaVersion": 2, "manifests": []}')
    dk = vol / "docker"
    for d in ("image", "overlay2", "containers", "volumes"):
        os.makedirs(dk / d)
        (dk / d / "x").write_bytes(b"x")
    with open(vol / "app.sif", "wb") as f:
        f.write(b"#!/usr/bin/env run-singularity\n\0SIF_MAGIC\0" + b"\0" * 100)
    for path in ("ccache/ccache.conf", ".triton/cache/ab/k.so", "torch/hub/checkpoints/r.pth"):
        os.makedirs(vol / os.path.dirname(path), exist_ok=True)
        (vol / path).write_bytes(b"x" * 10)
    main = tmp_path / "main"
    specforge_checkout(str(main))
    git(str(main), "worktree", "add", "-q", str(vol / "wt"))
    items, _ = scan_tree(str(vol))
    k = kinds(items)
    assert k["oci"][0] == k["docker"][0] == k["app.sif"][0] == "container-image"
    assert k["ccache"] == k[".triton"] == k["torch"] == ("cache", "regenerable")
    assert k["wt"][0] == "source-code"
    assert str(main / ".git" / "worktrees") in items["wt"].classification.details["gitdir"]


def test_gguf_directory_and_safetensors_file(tmp_path):
    import gguf

    vol = tmp_path / "vol"
    os.makedirs(vol / "ggufs")
    for q in ("a", "b"):
        w = gguf.GGUFWriter(str(vol / "ggufs" / f"m-{q}.gguf"), "llama")
        w.add_file_type(0)
        w.add_tensor("t", np.zeros(8, np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    save_file({"w": np.zeros((4, 4), np.float32)}, str(vol / "adapter.safetensors"))
    items, _ = scan_tree(str(vol))
    g = items["ggufs"].classification
    assert g.kind == "directory" and "2 GGUF files" in g.label
    assert items["ggufs/m-a.gguf"].classification.details["quantization"] == "F32"
    s = items["adapter.safetensors"].classification
    assert (s.kind, s.details["parameters"], s.details["dtype"]) == ("model", 16, "fp32")


def test_tensorrt_llm_engine_dir(tmp_path):
    d = tmp_path / "vol" / "qwen-trtllm"
    os.makedirs(d)
    (d / "config.json").write_text(json.dumps({
        "version": "0.20.0", "pretrained_config": {"architecture": "Qwen2ForCausalLM"},
        "build_config": {"max_batch_size": 8}}))
    for r in range(2):
        (d / f"rank{r}.engine").write_bytes(b"\0" * 256)
    items, _ = scan_tree(str(tmp_path / "vol"))
    c = items["qwen-trtllm"].classification
    assert (c.kind, c.details["ranks"], c.recoverable) == ("model", 2, "regenerable")
    assert "Qwen2ForCausalLM" in c.label


def test_torch_save_files(tmp_path):
    import pickle
    import zipfile

    vol = tmp_path / "vol"
    vol.mkdir()
    with zipfile.ZipFile(vol / "model_final.pth", "w") as z:       # torch.save's layout
        z.writestr("model_final/data.pkl", pickle.dumps({"w": 1}))
        z.writestr("model_final/version", "3\n")
    (vol / "legacy.pt").write_bytes(pickle.dumps({"step": 3}, protocol=2))
    (vol / "notes.pt").write_text("not torch")
    items, _ = scan_tree(str(vol))
    assert items["model_final.pth"].classification.kind == "checkpoint"
    assert items["legacy.pt"].classification.details["format"] == "pickle"
    assert items["notes.pt"].classification.kind == "file"


def test_directory_of_wheels(tmp_path):
    house = tmp_path / "vol" / "wheelhouse"
    os.makedirs(house)
    for n in ("numpy-2.2.6-cp312-cp312-manylinux_2_17_x86_64.whl", "rich-14.0.0-py3-none-any.whl",
              "zstandard-0.23.0-cp312-cp312-manylinux_2_17_x86_64.whl"):
        (house / n).write_bytes(b"PK\x03\x04" + b"\0" * 1000)
    (house / "index.html").write_text("<html></html>")
    items, _ = scan_tree(str(tmp_path / "vol"))
    c = items["wheelhouse"].classification
    assert (c.kind, c.details["packages"], c.recoverable) == ("installer", 3, "re-downloadable")
    (house / "torch-2.7.1+cu128-cp312-cp312-linux_x86_64.whl").write_bytes(b"PK\x03\x04")
    items, _ = scan_tree(str(tmp_path / "vol"))
    assert items["wheelhouse"].classification.recoverable is None     # a local build inside
    assert not [n for n in items if n.startswith("wheelhouse/")]       # one row, not one each


def test_lora_adapter(tmp_path):
    d = tmp_path / "vol" / "sft-lora"
    os.makedirs(d)
    (d / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": 16, "lora_alpha": 32,
        "base_model_name_or_path": "Qwen/Qwen2.5-7B-Instruct", "target_modules": ["q_proj"]}))
    save_file({"base_model.model.layers.0.self_attn.q_proj.lora_A.weight":
               np.zeros((16, 64), np.float32),
               "base_model.model.layers.0.self_attn.q_proj.lora_B.weight":
               np.zeros((64, 16), np.float32)}, str(d / "adapter_model.safetensors"))
    items, _ = scan_tree(str(tmp_path / "vol"))
    c = items["sft-lora"].classification
    assert (c.kind, c.details["parameters"], c.details["base_model"]) == (
        "model", 2048, "Qwen/Qwen2.5-7B-Instruct")
    assert c.label.startswith("LORA adapter (r=16) for Qwen/Qwen2.5-7B-Instruct")


def test_wandb_runs(tmp_path):
    w = tmp_path / "vol" / "wandb"
    for rid in ("abc123", "def456"):
        run_dir = w / f"run-20241201_000000-{rid}"
        os.makedirs(run_dir / "files")
        (run_dir / f"run-{rid}.wandb").write_bytes(b"\0" * 32)
    items, _ = scan_tree(str(tmp_path / "vol"))
    c = items["wandb"].classification
    assert (c.kind, c.details["runs"], c.recoverable) == ("logs", 2, "unique")


def test_reader_resolves_links_as_realpath_does(tmp_path):
    """The hub cache's links are resolved with the directories cached (speed); what they
    resolve to must be what os.path.realpath says, also for links through linked directories,
    '..' after a linked name, loops, dangling and absolute links."""
    from vacate.observing.recognise.base import list_dir
    from vacate.observing.recognise.read import Reader

    r = tmp_path / "r"
    (r / "blobs").mkdir(parents=True)
    (r / "snap" / "rev").mkdir(parents=True)
    (r / "blobs" / "h").write_bytes(b"x")
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    (tmp_path / "elsewhere" / "x").write_bytes(b"y")
    links = {
        "r/snap/rev/config.json": "../../blobs/h", "r/snap/main": "rev",
        "r/loop1": "loop2", "r/loop2": "loop1", "r/snap/rev/abs": "/etc/passwd",
        "r/snap/rel2": "../blobs/../blobs/h", "r/dangling": "nothere",
        "snaplink": str(r / "snap"), "r/b2": str(tmp_path / "elsewhere" / "deep"),
        "r/snap/tricky": "../b2/../x",
        "r/snap/rev/dots": "../.././blobs//h", "r/snap/rev/up": "../" * 40 + "tmp",
        "r/snap/rev/dot": "./config.json", "r/snap/rev/parent": "..",
    }
    for at, to in links.items():
        os.symlink(to, tmp_path / at)
    paths = ["r/snap/rev/config.json", "r/snap/main/config.json", "r/loop1", "r/snap/rev/abs",
             "r/snap/rel2", "r/dangling", "snaplink/main/config.json", "r",
             "r/snap/main/../main/config.json", "r/snap/tricky", "snaplink/rev/config.json",
             "r/snap/rev/dots", "r/snap/rev/up", "r/snap/rev/dot", "r/snap/rev/parent",
             "snaplink/rev/dots"]
    # with nothing listed, and with the directories listed first (a listing tells the reader
    # which entries are directories, links and regular files: it asks the disk less), also
    # a listing reached through a linked directory ("snaplink")
    for listed in ((), ("", "r", "r/snap", "r/snap/rev", "r/blobs", "snaplink",
                        "snaplink/rev", "elsewhere")):
        reader = Reader()
        for d in listed:
            list_dir(str(tmp_path / d) if d else str(tmp_path), reader)
        for p in paths:
            full = str(tmp_path / p)
            assert reader.realpath(full) == os.path.realpath(full), (listed, p)
        # a link leaving the repository is still refused
        assert reader.head(str(r / "snap" / "rev" / "abs"), 10, within=str(r)) is None
        assert reader.head(str(tmp_path / "snaplink" / "rev" / "abs"), 10,
                           within=str(tmp_path / "snaplink")) is None
        assert reader.head(str(r / "snap" / "rev" / "config.json"), 10, within=str(r)) == b"x"
        assert reader.size(str(r / "snap" / "rev" / "config.json"), within=str(r)) == 1
        assert reader.size(str(r / "snap" / "rev" / "config.json")) is None   # the link itself
        assert reader.size(str(r / "blobs" / "h")) == 1
        assert reader.head(str(r / "snap" / "rev" / "config.json"), 10) is None  # not followed
        reader.problems.clear()
        assert reader.head(str(r / "loop1"), 10, within=str(r)) is None      # a loop: said
        assert [p.code for p in reader.problems] == ["unreadable"]


def test_a_listed_hub_repo_is_read_without_asking_the_disk_again(tmp_path, monkeypatch):
    """The hub cache's snapshot links are resolved and their blobs' sizes taken from the
    repo's listings: one readlink per link, no stat of a blob, and nothing else read than
    before (the same label)."""
    from vacate.observing.model.inventory import Stats
    from vacate.observing.recognise import read
    from vacate.observing.recognise.explore import Explorer
    from vacate.observing.recognise.read import Reader

    rev = "a" * 40
    files = {"config.json": json.dumps({"model_type": "llama",
                                        "architectures": ["LlamaForCausalLM"]}).encode()}
    for i in range(1, 5):
        files[f"model-{i:05d}-of-00004.safetensors"] = save(
            {f"w{i}": np.zeros((64, 64), np.float16)}, metadata={"format": "pt"})
    repo = hub_repo(str(tmp_path / "vol"), "org/m", {rev: files}, main=rev)
    st = Stats(1, 1, 1, 1)
    label = Explorer(lambda p: st).node(repo, True, st, 0, repo, Reader()).classification.label
    calls: list[tuple[str, str]] = []
    for fn in ("stat", "lstat", "readlink"):
        real = getattr(os, fn)

        def counted(path, *a, _real=real, _fn=fn, **k):
            calls.append((_fn, os.fsdecode(path)))
            return _real(path, *a, **k)
        monkeypatch.setattr(read.os, fn, counted)
    again = Explorer(lambda p: st).node(repo, True, st, 0, repo, Reader()).classification.label
    assert again == label and "4 safetensors shards" in label and "complete" in label
    blobs = os.path.join(repo, "blobs")
    assert [c for c in calls if c[0] != "readlink" and c[1].startswith(blobs)] == []
    links = [p for f, p in calls if f == "readlink" and "/snapshots/" in p]
    assert len(links) == len(set(links)) == 5               # each link read once


def test_a_hub_named_directory_without_the_hub_layout_is_still_recognised(tmp_path):
    """The hub repo recogniser claims ``models--org--name`` directories (the others are not
    asked about them); where it does not answer (no snapshots/blobs: a model saved under such
    a name), the others still are."""
    small_model(str(tmp_path / "vol" / "models--org--saved"))
    items, _ = scan_tree(str(tmp_path / "vol"))
    c = items["models--org--saved"].classification
    assert c.kind == "model" and "config.json" in c.evidence
