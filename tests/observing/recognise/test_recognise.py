"""Recognisers on real files: the captured Hugging Face configs, safetensors files written by
the ``safetensors`` package, GGUF files written by the ``gguf`` package, sparse shards with
real headers at realistic sizes, a hub cache laid out as huggingface_hub lays it out, and
hostile input. The tree is walked by the real walker; nothing here needs root."""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from harness import extras
from harness.model_trees import (
    HF,
    MISC,
    eagle3_run,
    git,
    hub_repo,
    nvfp4_layer,
    nvfp4_model,
    scan_tree,
    side_by_side_tree,
    small_model,
    sparse_shard,
    specforge_checkout,
    write_json,
)
from safetensors import safe_open
from safetensors.numpy import save_file

from vacate.observing.collectors import walk
from vacate.observing.model.inventory import Item
from vacate.observing.recognise import annotate
from vacate.observing.recognise.formats import FormatError, Truncated
from vacate.observing.recognise.formats import gguf as gguf_fmt
from vacate.observing.recognise.formats import safetensors as st_fmt
from vacate.observing.recognise.formats.text import requirements

# ---------------------------------------------------------------------------------------------
# Builders (also used by test_recognise_tree.py)





















def codes(problems, path_part: str = "") -> set[str]:
    return {p.code for p in problems if path_part in (p.path or "")}


# ---------------------------------------------------------------------------------------------
# Formats


def test_safetensors_header_matches_the_real_writer(tmp_path):
    p = tmp_path / "m.safetensors"
    tensors = {"a": np.zeros((3, 5), np.float16), "b": np.ones((7,), np.int32),
               "c": np.zeros((2, 2, 2), np.float32)}
    save_file(tensors, str(p), metadata={"format": "pt", "note": "x"})
    data = p.read_bytes()
    h = st_fmt.parse(data[:8 + struct.unpack("<Q", data[:8])[0]], file_size=len(data))
    got = {t.name: (t.dtype, t.shape) for t in h.tensors}
    assert got == {"a": ("F16", (3, 5)), "b": ("I32", (7,)), "c": ("F32", (2, 2, 2))}
    assert h.metadata == {"format": "pt", "note": "x"}
    assert h.file_len == len(data)
    assert sum(t.numel for t in h.tensors) == sum(t.size for t in tensors.values())


def test_sparse_shard_is_a_real_safetensors_file(tmp_path):
    """Our sparse builder writes headers the safetensors library itself accepts."""
    p = str(tmp_path / "s.safetensors")
    size = sparse_shard(p, nvfp4_layer("x", 4096, 8192))
    assert os.path.getsize(p) == size > 16 * 1024 * 1024
    assert os.stat(p).st_blocks * 512 < 1024 * 1024          # a hole, not data
    with safe_open(p, "np") as f:
        assert sorted(f.keys()) == ["x.input_scale", "x.weight", "x.weight_scale",
                                    "x.weight_scale_2"]
        assert f.get_slice("x.weight").get_shape() == [4096, 4096]


@pytest.mark.parametrize("bad, msg", [
    (struct.pack("<Q", 2 ** 63) + b"{}", "not plausible"),
    (struct.pack("<Q", 0), "not plausible"),
    (struct.pack("<Q", 9) + b"[1,2,3]  ", "not a JSON object"),
    (struct.pack("<Q", 8) + b"{not js}", "not valid JSON"),
    (struct.pack("<Q", 64) + b'{"t":{"dtype":"F16","shape":[4],"data_offsets":[0,2]}}'.ljust(64),
     "needs 8 bytes"),
    (struct.pack("<Q", 64) + b'{"t":{"dtype":"Q9","shape":[4],"data_offsets":[0,8]}}'.ljust(64),
     "unknown dtype"),
    (struct.pack("<Q", 64) + b'{"t":{"dtype":"F16","shape":[-4],"data_offsets":[0,8]}}'
     .ljust(64), "bad shape"),
])
def test_safetensors_parser_refuses_bad_headers(bad, msg):
    with pytest.raises(FormatError, match=msg):
        st_fmt.parse(bad, file_size=len(bad) + 100)


def _header(entries: dict) -> bytes:
    js = json.dumps(entries).encode()
    return struct.pack("<Q", len(js)) + js


@pytest.mark.parametrize("entry, msg", [
    ({"dtype": "F16", "shape": [2, 2.0], "data_offsets": [0, 8]}, "bad shape"),
    ({"dtype": "F16", "shape": [2] * 17, "data_offsets": [0, 8]}, "bad shape"),
    ({"dtype": "F16", "shape": [1 << 48], "data_offsets": [0, 1 << 49]}, "bad shape"),
    ({"dtype": "F16", "shape": [4], "data_offsets": [8, 0]}, "bad data_offsets"),
    ({"dtype": "F16", "shape": [4], "data_offsets": [0, 8, 9]}, "bad data_offsets"),
    ({"dtype": "F16", "shape": [4], "data_offsets": [-8, 0]}, "bad data_offsets"),
    ({"dtype": "F16", "shape": [4], "data_offsets": ["0", "8"]}, "bad data_offsets"),
    ({"dtype": ["F16"], "shape": [4], "data_offsets": [0, 8]}, "unknown dtype"),
    ({"shape": [4], "data_offsets": [0, 8]}, "unknown dtype"),
    ([1, 2], "not an object"),
    ({"dtype": "F16", "shape": "4", "data_offsets": [0, 8]}, "bad shape"),
])
@pytest.mark.parametrize("loop", ["c", "python"])
def test_safetensors_parser_names_the_bad_tensor_among_good_ones(entry, msg, loop, monkeypatch):
    """Tensors are checked a column at a time (speed; in C where it was built); one bad among
    many is still refused, with the tensor's name and what is wrong with it."""
    if loop == "python":
        monkeypatch.setattr(st_fmt, "_fastst", None)
    elif st_fmt._fastst is None:
        pytest.skip("the C loop is not built")
    good = {f"layer.{i}.w": {"dtype": "BF16", "shape": [3, 5], "data_offsets": [30 * i,
                                                                              30 * i + 30]}
            for i in range(50)}
    head = _header({**good, "the.bad.one": entry})
    with pytest.raises(FormatError, match=msg) as e:
        st_fmt.parse(head, file_size=1 << 40)
    assert "the.bad.one" in str(e.value)
    h = st_fmt.parse(_header(good), file_size=1 << 40)       # and without it, all is well
    assert (len(h.tensors), sum(h.numels), h.data_len) == (50, 50 * 15, 1500)
    assert [t.name for t in h.tensors] == list(good)


@pytest.mark.skipif(st_fmt._fastst is None, reason="the C loop is not built")
def test_safetensors_columns_are_the_same_in_c_and_python():
    """Real headers (the safetensors writer's, every dtype it has, scalars, empty and big
    tensors) give the same columns from the C loop as from the Python one."""
    from safetensors.numpy import save

    rng = np.random.default_rng(7)
    kinds = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32,
             np.int64, np.uint16, np.uint32, np.uint64, np.bool_]
    for k in range(40):
        tensors = {}
        for j in range(int(rng.integers(1, 60))):
            dims = rng.integers(0, 6, size=int(rng.integers(0, 4)))
            tensors[f"t{k}.{j}"] = np.zeros(tuple(int(d) for d in dims),
                                            kinds[int(rng.integers(len(kinds)))])
        data = save(tensors)
        n = struct.unpack("<Q", data[:8])[0]
        obj = json.loads(data[8:8 + n])
        obj.pop("__metadata__", None)
        c = st_fmt._fastst.columns(obj, st_fmt.DTYPE_BITS)
        saved, st_fmt._fastst = st_fmt._fastst, None
        try:
            py = st_fmt._columns(obj)
        finally:
            st_fmt._fastst = saved
        assert c == py and list(c[6].items()) == list(py[6].items())   # (dtypes in order)
        assert st_fmt.parse(data[:8 + n], file_size=len(data)).file_len == len(data)
    # sizes no real header has, at the limits: the same verdict either way
    for shape, offs in (([1 << 47, 2], [0, 1 << 49]), ([1 << 47] * 3, [0, 8]),
                        ([3, 0, 1 << 47], [5, 5]), ([True, 4], [0, 8])):
        obj = {"x": {"dtype": "F16", "shape": shape, "data_offsets": offs}}
        c = st_fmt._fastst.columns(obj, st_fmt.DTYPE_BITS)
        saved, st_fmt._fastst = st_fmt._fastst, None
        try:
            py = st_fmt._columns(obj)
        except FormatError:
            py = None
        finally:
            st_fmt._fastst = saved
        assert c == py, (shape, offs)


def test_dtypes_are_counted_in_the_order_met():
    """The per-dtype counts (a model's ``dtypes`` detail) come in the order the dtypes first
    appear, whatever the process's string hashing: the same document on every run."""
    got = st_fmt.numel_by_dtype(["F32", "BF16", "F32", "U8", "BF16"], [1, 10, 2, 100, 20])
    assert list(got.items()) == [("F32", 3), ("BF16", 30), ("U8", 100)]


def test_json_that_only_the_standard_library_takes_is_still_read(tmp_path):
    """JSON is decoded with orjson where it can (speed); what orjson refuses and json takes
    (a whole number beyond 64 bits, a lone surrogate escape) is read as before."""
    from vacate.observing.recognise.formats import loads

    doc = b'{"model_type": "x\\udc80", "n": 123456789012345678901234567890, "f": 1.5}'
    assert loads(doc) == json.loads(doc)
    with pytest.raises(ValueError):
        loads(b'{"a": ')
    d = tmp_path / "vol" / "m"
    small_model(str(d))
    cfg = json.loads((d / "config.json").read_text())
    cfg["vocab_size"] = 1 << 70
    (d / "config.json").write_text(json.dumps(cfg))
    items, problems = scan_tree(str(tmp_path / "vol"))
    assert not [p for p in problems if p.code == "malformed-file"]
    assert items["m"].classification.kind == "model" and "config.json" in \
        items["m"].classification.evidence


def test_safetensors_parser_says_when_it_needs_more():
    with pytest.raises(Truncated) as e:
        st_fmt.parse(struct.pack("<Q", 1000) + b"{", file_size=10_000)
    assert e.value.need == 1008


def test_gguf_header_matches_the_real_writer(tmp_path):
    import gguf

    p = str(tmp_path / "tiny.gguf")
    w = gguf.GGUFWriter(p, "llama")
    w.add_name("Tiny Llama")
    w.add_block_count(2)
    w.add_file_type(1)
    w.add_token_list([f"tok{i}" for i in range(300)])
    w.add_tensor("token_embd.weight", np.zeros((300, 16), np.float16))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((16, 16), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(p, "rb") as f:
        data = f.read()
    h = gguf_fmt.parse(data)
    assert h.architecture == "llama"
    assert h.metadata["general.name"] == "Tiny Llama"
    assert h.file_type == "F16"
    assert h.parameters == 300 * 16 + 16 * 16
    assert h.tensor_types == {"F16": 300 * 16, "F32": 256}
    assert h.metadata["tokenizer.ggml.tokens"] == {"array_len": 300}
    with pytest.raises(Truncated):
        gguf_fmt.parse(data[:200])
    with pytest.raises(FormatError):
        gguf_fmt.parse(b"GGUF" + struct.pack("<IQQ", 3, 2 ** 40, 1))


def test_parsers_only_raise_format_errors_on_corrupted_headers(tmp_path):
    """Real files with random bytes flipped and cut: a FormatError or a result, nothing else."""
    import random

    import gguf

    st = tmp_path / "a.safetensors"
    save_file({"x": np.zeros((3, 4), np.float16), "y": np.ones(5, np.int32)}, str(st))
    gp = str(tmp_path / "a.gguf")
    w = gguf.GGUFWriter(gp, "llama")
    w.add_name("n")
    w.add_array("a", [1, 2, 3])
    w.add_array("s", ["x", "yy"])
    w.add_tensor("t", np.zeros((2, 3), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    rng = random.Random(4)
    for data, parse in ((st.read_bytes(), lambda b: st_fmt.parse(b, file_size=len(b))),
                        (Path(gp).read_bytes(), gguf_fmt.parse)):
        for _ in range(400):
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(min(len(b), 256))] = rng.randrange(256)
            b = bytes(b[:rng.randrange(len(b) + 1)]) if rng.random() < 0.3 else bytes(b)
            try:
                parse(b)
            except FormatError:
                pass


def test_pip_freeze_cuda_flavour_from_real_freeze():
    with open(os.path.join(MISC, "kaminarly-sglang-cu130-image-pip-freeze.txt")) as f:
        r = requirements(f.read())
    assert r.torch == "2.13.0+cu130"
    assert r.cuda == ("13.0",)
    assert r.ratio > 0.95


# ---------------------------------------------------------------------------------------------
# Models


def test_nvfp4_model_label_params_and_completeness(tmp_path):
    d = tmp_path / "Qwen3.5-397B-A17B-NVFP4"
    params = nvfp4_model(str(d), shards=6, rows=100_000)
    items, problems = scan_tree(str(tmp_path))
    it = items["Qwen3.5-397B-A17B-NVFP4"]
    c = it.classification
    assert c.kind == "model"
    assert c.details["parameters"] == params                # unpacked, scales left out
    assert c.details["quantization_label"].startswith("NVFP4 (modelopt)")
    assert c.details["quantization"]["producer_version"] == "0.23.0"
    assert c.details["shards"] == 6 and c.details["complete"] is True
    assert "qwen3_5_moe" in c.label and "6 safetensors shards" in c.label
    assert "complete" in c.label and "NVFP4 (modelopt)" in c.label
    assert "incomplete-model" not in codes(problems)
    assert c.confidence >= 0.9


def test_missing_shard_makes_it_incomplete(tmp_path):
    nvfp4_model(str(tmp_path / "m"), shards=4, rows=1000, drop=(3,))
    items, problems = scan_tree(str(tmp_path))
    c = items["m"].classification
    assert c.details["complete"] is False
    assert c.details["missing_shards"] == ["model-00003-of-00004.safetensors"]
    assert "INCOMPLETE: 1 of 4 shards missing" in c.label
    assert "incomplete-model" in codes(problems)


def test_safetensors_download_of_a_repo_with_both_formats_is_complete(tmp_path):
    nvfp4_model(str(tmp_path / "m"), shards=2, rows=100)
    write_json(str(tmp_path / "m" / "pytorch_model.bin.index.json"), {"weight_map": {
        "a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin"}})
    items, problems = scan_tree(str(tmp_path))
    c = items["m"].classification
    assert c.details["complete"] is True and "missing_shards" not in c.details
    assert "incomplete-model" not in codes(problems)


def test_real_lfs_pointer_clone_is_not_a_downloaded_model(tmp_path):
    shutil.copytree(os.path.join(HF, "qwen3.5-18b-reap-lfs-pointers"), tmp_path / "reap")
    items, problems = scan_tree(str(tmp_path))
    c = items["reap"].classification
    assert c.kind == "model"
    assert c.details["lfs_pointers"] == ["model-00001-of-00007.safetensors"]
    assert c.details["complete"] is False
    assert "Git LFS pointers" in c.label
    # The model card's base_model is where it came from, not a copy of this model.
    assert c.details["base_model"] == "Qwen/Qwen3.5-35B-A3B"
    assert c.recoverable is None and c.source is None
    assert "incomplete-model" in codes(problems)


def test_real_index_only_model(tmp_path):
    shutil.copytree(os.path.join(HF, "sakura-14b-qwen2.5-index-only"), tmp_path / "sakura")
    items, _ = scan_tree(str(tmp_path))
    c = items["sakura"].classification
    with open(os.path.join(HF, "sakura-14b-qwen2.5-index-only",
                           "model.safetensors.index.json")) as f:
        expected = sorted(set(json.load(f)["weight_map"].values()))
    assert c.details["missing_shards"] == expected
    assert c.details["model_type"] == "qwen2"
    assert c.details["index_total_size"] == 29540067328
    assert "index only" in c.label
    # _name_or_path names the base it was fine-tuned from: not proof it can be re-downloaded.
    assert c.details["base_model"] == "Qwen/Qwen2.5-14B-Instruct"
    assert c.recoverable is None


def test_symlinked_shards_are_not_followed(tmp_path):
    small_model(str(tmp_path / "elsewhere"))
    d = tmp_path / "vol" / "m"
    os.makedirs(d)
    shutil.copy(tmp_path / "elsewhere" / "config.json", d)
    os.symlink(tmp_path / "elsewhere" / "model.safetensors", d / "model.safetensors")
    items, problems = scan_tree(str(tmp_path / "vol"))
    c = items["m"].classification
    assert c.details["linked_shards"] == ["model.safetensors"]
    assert c.details.get("complete") is None and "parameters" not in c.details
    assert "symlinks (not followed)" in c.label
    assert not problems


def test_name_or_path_naming_the_model_itself_is_a_marked_guess(tmp_path):
    small_model(str(tmp_path / "Qwen2.5-0.5B"), _name_or_path="Qwen/Qwen2.5-0.5B")
    items, _ = scan_tree(str(tmp_path))
    c = items["Qwen2.5-0.5B"].classification
    assert (c.recoverable, c.source, c.guess) == ("re-downloadable", "hf:Qwen/Qwen2.5-0.5B", True)


@pytest.mark.parametrize("fixture, variant", [
    ("draft/specforge-llama3-8B-eagle3.json", "EAGLE-3"),
    ("draft/specforge-deepseek-v3-671b-eagle3.json", "EAGLE-3"),
    ("draft/safeailab-eagle-traineagle3-config.json", "EAGLE-3"),
    ("draft/safeailab-eagle1-llama3-8b.json", "EAGLE-style"),
    ("draft/specforge-qwen3-8b-dflash.json", "DFlash"),
    ("draft/specforge-kimi-k3-dspark.json", "DSpark"),
])
def test_real_draft_configs_are_draft_models(tmp_path, fixture, variant):
    params = small_model(str(tmp_path / "draft"), fixture)
    items, _ = scan_tree(str(tmp_path))
    c = items["draft"].classification
    assert c.kind == "draft-model"
    assert c.details["draft"] == variant
    assert c.details["parameters"] == params
    assert f"{variant} draft model" in c.label


@pytest.mark.parametrize("cfg, variant", [
    ({"architectures": ["DeepseekV3ForCausalLMNextN"], "model_type": "deepseek_v3",
      "num_hidden_layers": 1, "num_nextn_predict_layers": 1}, "MTP"),
    ({"architectures": ["MedusaModel"], "medusa_num_heads": 4, "medusa_num_layers": 1}, "Medusa"),
])
def test_mtp_and_medusa_heads(tmp_path, cfg, variant):
    small_model(str(tmp_path / "d"), **cfg)
    items, _ = scan_tree(str(tmp_path))
    c = items["d"].classification
    assert (c.kind, c.details["draft"]) == ("draft-model", variant)


def test_plain_model_is_not_a_draft(tmp_path):
    small_model(str(tmp_path / "m"))
    items, _ = scan_tree(str(tmp_path))
    assert items["m"].classification.kind == "model"
    assert items["m"].classification.details["dtype"] == "fp16"


@pytest.mark.parametrize("qc, label", [
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"}, "AWQ 4-bit g128"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False},
     "GPTQ 4-bit g128"),
    ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
      "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float"}}}},
     "NVFP4 (compressed-tensors)"),
    ({"quant_method": "compressed-tensors", "format": "mixed-precision",
      "config_groups": {"g0": {"format": "float-quantized", "weights": {"num_bits": 8,
                                                                      "type": "float"}},
                        "g1": {"format": "nvfp4-pack-quantized",
                               "weights": {"num_bits": 4, "type": "float"}}}},
     "NVFP4 (compressed-tensors)"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
     "bitsandbytes NF4 4-bit"),
    ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
     "FP8 (block 128x128)"),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, "FP8 (modelopt)"),
])
def test_quantisation_from_config(tmp_path, qc, label):
    small_model(str(tmp_path / "q"), quantization_config=qc)
    items, _ = scan_tree(str(tmp_path))
    c = items["q"].classification
    assert c.details["quantization_label"] == label
    assert label in c.label


def test_gptq_packed_weights_count_as_parameters(tmp_path):
    d = tmp_path / "gptq"
    os.makedirs(d)
    write_json(str(d / "config.json"), {"architectures": ["LlamaForCausalLM"],
                                        "model_type": "llama", "quantization_config": {
                                            "quant_method": "gptq", "bits": 4,
                                            "group_size": 128}})
    save_file({"l.qweight": np.zeros((32, 256), np.int32),        # 8 values per int32
               "l.qzeros": np.zeros((2, 32), np.int32), "l.scales": np.zeros((2, 256), np.float16),
               "l.g_idx": np.zeros(256, np.int32), "norm.weight": np.zeros(256, np.float16)},
              str(d / "model.safetensors"))
    items, _ = scan_tree(str(tmp_path))
    assert items["gptq"].classification.details["parameters"] == 32 * 256 * 8 + 256


def test_gguf_file_item(tmp_path):
    import gguf

    p = str(tmp_path / "tiny-q.gguf")
    w = gguf.GGUFWriter(p, "qwen2")
    w.add_name("Tiny Qwen")
    w.add_file_type(1)
    w.add_tensor("token_embd.weight", np.zeros((64, 32), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    items, _ = scan_tree(str(tmp_path))
    c = items["tiny-q.gguf"].classification
    assert c.kind == "gguf"
    assert (c.details["architecture"], c.details["quantization"],
            c.details["parameters"]) == ("qwen2", "F16", 64 * 32)
    assert "Tiny Qwen" in c.label


# ---------------------------------------------------------------------------------------------
# Hub cache, laid out as huggingface_hub lays it out






def test_hub_cache_repo_ids_revisions_and_shared_blobs(tmp_path):
    src = tmp_path / "src"
    params = small_model(str(src))
    weights = (src / "model.safetensors").read_bytes()
    conf = (src / "config.json").read_bytes()
    hub = tmp_path / "vol" / "hub"
    old, new = "a" * 40, "b" * 40
    hub_repo(str(hub), "Qwen/Qwen3-0.6B", {
        old: {"config.json": conf + b" ", "model.safetensors": weights},
        new: {"config.json": conf, "model.safetensors": weights}}, main=new)
    hub_repo(str(hub), "meta-llama/Llama-3.2-1B", {new: {"config.json": conf}}, main=new)
    ds = hub_repo(str(hub), "x/y", {old: {"data.jsonl": b'{"text": "a"}\n'}}, main=old)
    os.rename(ds, hub / "datasets--HuggingFaceH4--ultrachat_200k")
    items, problems = scan_tree(str(tmp_path / "vol"))
    d = items["hub/datasets--HuggingFaceH4--ultrachat_200k"].classification
    assert (d.kind, d.recoverable, d.source) == ("dataset", "re-downloadable",
                                                 f"hf:HuggingFaceH4/ultrachat_200k@{old}")
    root = items["hub"].classification
    assert root.kind == "cache" and root.recoverable == "re-downloadable"
    assert "2 models, 1 dataset," in root.label
    qwen = items["hub/models--Qwen--Qwen3-0.6B"]
    c = qwen.classification
    assert qwen.parent == str(hub) and qwen.id == "item:hub/models--Qwen--Qwen3-0.6B"
    assert c.kind == "model"
    assert c.source == f"hf:Qwen/Qwen3-0.6B@{new}"
    assert c.recoverable == "re-downloadable" and not c.guess
    assert c.details["parameters"] == params
    assert sorted(c.details["revisions"]) == [old, new]
    assert c.details["refs"] == {"main": new}
    # The weights blob is shared by both revisions: stored (and counted) once.
    assert c.details["blobs"] == 3
    assert qwen.stats.apparent_bytes < 2 * len(weights)
    assert "2 revisions" in c.label
    llama = items["hub/models--meta-llama--Llama-3.2-1B"].classification
    assert "no weights" in llama.label
    assert not codes(problems, "models--Qwen")


def test_hub_cache_agrees_with_huggingface_hub(tmp_path):
    """The library that writes the cache reads our hand-built one as we do: same repos,
    revisions, refs and files (and it finds config.json where we looked)."""
    hf = extras.module("huggingface_hub")
    src = tmp_path / "src"
    small_model(str(src))
    files = {n: (src / n).read_bytes() for n in ("config.json", "model.safetensors")}
    hub = tmp_path / "vol" / "hub"
    revs = {"e" * 40: files, "f" * 40: dict(files, **{"README.md": b"# card"})}
    hub_repo(str(hub), "Org/Model-1B", revs, main="f" * 40)
    hub_repo(str(hub), "Org/Other", {"e" * 40: {"config.json": files["config.json"]}},
             main="e" * 40)
    info = hf.scan_cache_dir(str(hub))
    assert not info.warnings
    items, _ = scan_tree(str(tmp_path / "vol"))
    for repo in info.repos:
        it = items["hub/models--" + repo.repo_id.replace("/", "--")]
        c = it.classification
        assert c.details["repo_id"] == repo.repo_id
        assert sorted(c.details["revisions"]) == sorted(r.commit_hash for r in repo.revisions)
        assert c.details["refs"] == {ref: r.commit_hash for r in repo.revisions for ref in r.refs}
        assert c.details["blobs"] == len({f.blob_path for r in repo.revisions for f in r.files})
        assert it.stats.apparent_bytes >= repo.size_on_disk
    path = hf.try_to_load_from_cache("Org/Model-1B", "config.json", cache_dir=str(hub))
    assert path is not None and os.path.realpath(path).startswith(str(hub / "models--Org--Model-1B"))


def test_huggingface_cache_root_lists_its_repos(tmp_path):
    root = tmp_path / "vol" / "huggingface"
    hub_repo(str(root / "hub"), "org/a", {"a" * 40: {"config.json": b'{"model_type": "x"}'}},
             main="a" * 40)
    os.makedirs(root / "xet")
    items, _ = scan_tree(str(tmp_path / "vol"))
    assert items["huggingface"].classification.kind == "cache"
    assert items["huggingface/hub/models--org--a"].classification.source == f"hf:org/a@{'a' * 40}"


def test_hub_root_counts_every_repo_not_only_those_looked_at(tmp_path, monkeypatch):
    """A hub holding more repos than are looked into (the biggest are) still says how many it
    holds, and stays re-downloadable when it holds nothing else."""
    from vacate.observing.recognise import explore

    monkeypatch.setattr(explore, "SUBDIRS_PER_DIR", 3)
    monkeypatch.setattr(explore, "NAMED_SUBDIRS", 2)
    hub = tmp_path / "vol" / "hub"
    for i in range(9):
        hub_repo(str(hub), f"org/m{i}", {"a" * 40: {"config.json": b'{"model_type": "x"}'}},
                 main="a" * 40)
    hub_repo(str(hub), "org/d", {"b" * 40: {"x.json": b"{}"}}, main="b" * 40)
    os.rename(hub / "models--org--d", hub / "datasets--org--d")
    os.makedirs(hub / ".locks" / "models--org--m0")
    (hub / "version.txt").write_text("1")
    items, _ = scan_tree(str(tmp_path / "vol"))
    c = items["hub"].classification
    looked = [p for p in items if p.startswith("hub/")]
    assert len(looked) < 10                       # not all of them were looked into ...
    assert c.label.startswith("Hugging Face hub cache: 9 models, 1 dataset")   # ... all counted
    assert (c.details["repos"], c.recoverable) == (10, "re-downloadable")
    (hub / "notes.bin").write_bytes(b"x" * 10_000)          # something else in the hub
    items, _ = scan_tree(str(tmp_path / "vol"))
    c = items["hub"].classification
    assert c.recoverable is None and c.details["other_entries"] == ["notes.bin"]


def test_hub_snapshot_link_out_of_the_repo_is_not_followed(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"model_type": "leaked", "architectures": ["X"]}))
    repo = hub_repo(str(tmp_path / "vol"), "o/n", {"c" * 40: {}}, main="c" * 40)
    os.symlink(str(secret), os.path.join(repo, "snapshots", "c" * 40, "config.json"))
    items, problems = scan_tree(str(tmp_path / "vol"))
    c = items["models--o--n"].classification
    assert "leaked" not in c.label
    assert "link-outside" in codes(problems)


# ---------------------------------------------------------------------------------------------
# Everything else the story has


def test_story_files(tmp_path):
    with open(tmp_path / "cuda_13.0.1_580.82.07_linux.run", "wb") as f:
        f.write(b"#!/bin/sh\n# This script was generated using Makeself 2.4.5\n" + b"\0" * 1000)
    shutil.copy(os.path.join(MISC, "kaminarly-sglang-cu130-image-pip-freeze.txt"),
                tmp_path / "ml-env-backup-cuda128.txt")
    os.mkdir(tmp_path / "lost+found")
    items, _ = scan_tree(str(tmp_path))
    cuda = items["cuda_13.0.1_580.82.07_linux.run"].classification
    assert cuda.kind == "installer" and cuda.recoverable == "re-downloadable" and not cuda.guess
    assert (cuda.details["version"], cuda.details["driver_version"]) == ("13.0.1", "580.82.07")
    # The URL is the one NVIDIA publishes (as recorded in cupy's release tooling).
    with open(os.path.join(MISC, "cuda-runfile-urls-cupy-history.txt")) as f:
        urls = {"https://developer.download.nvidia.com/compute/" + ln.strip() for ln in f
                if ln.startswith("cuda/")}
    assert any(u.endswith("cuda_12.0.0_525.60.13_linux.run") for u in urls)
    assert cuda.source == ("https://developer.download.nvidia.com/compute/cuda/13.0.1/"
                           "local_installers/cuda_13.0.1_580.82.07_linux.run")
    env = items["ml-env-backup-cuda128.txt"].classification
    assert env.kind == "env-backup" and "CUDA 13.0" in env.label and "torch 2.13.0+cu130" in \
        env.label
    lf = items["lost+found"].classification
    assert lf.kind == "filesystem-artifact"


def test_a_symlink_is_a_symlink(tmp_path):
    (tmp_path / "real.run").write_bytes(b"#!/bin/sh\n# Makeself\n")
    os.symlink(tmp_path / "real.run", tmp_path / "cuda_12.8.0_570.86.10_linux.run")
    items, _ = scan_tree(str(tmp_path))
    c = items["cuda_12.8.0_570.86.10_linux.run"].classification
    assert (c.kind, c.recoverable) == ("file", None)
    assert c.label == f"symbolic link to {tmp_path / 'real.run'}"


def test_cuda_runfile_name_only_is_a_guess(tmp_path):
    (tmp_path / "cuda_12.8.0_570.86.10_linux.run").write_bytes(b"\0" * 100)
    items, _ = scan_tree(str(tmp_path))
    c = items["cuda_12.8.0_570.86.10_linux.run"].classification
    assert c.kind == "installer" and c.guess and c.confidence < 0.9


def test_eagle3_training_run(tmp_path):
    eagle3_run(str(tmp_path))
    items, _ = scan_tree(str(tmp_path))
    run = items["eagle3"].classification
    assert run.kind == "training-output" and run.recoverable == "unique"
    assert run.label.startswith("EAGLE-3 draft-model training run for Kimi-K2.5: ")
    for part in ("21.5 GB cached hidden states (regenerable)", "10 draft checkpoints",
                 "ShareGPT", "a SpecForge checkout"):
        assert part in run.label
    hs = items["eagle3/cache/hidden_states"]
    assert hs.parent == str(tmp_path / "eagle3") and hs.id == "item:eagle3/cache/hidden_states"
    assert hs.classification.recoverable == "regenerable"
    assert hs.classification.details["generator"].endswith(
        "SpecForge/scripts/prepare_hidden_states.py")
    ck = items["eagle3/outputs/kimi-k2.5-eagle3/epoch_9_step_10000"].classification
    assert (ck.kind, ck.recoverable, ck.details["step"]) == ("checkpoint", "unique", 10000)
    assert "step 10000" in ck.label
    assert ck.details["draft"] == "EAGLE-3"
    assert ck.details["parameters"] == 7168 * 14336 + 40960 * 7168 + 7168 * 21504 + 32000 * 7168
    assert items["eagle3/outputs/kimi-k2.5-eagle3"].classification.details["checkpoints"] == 10
    assert items["eagle3/data"].classification.details["format_name"] == "ShareGPT"
    assert items["eagle3/SpecForge"].classification.kind == "source-code"


def test_demo_volume_labels(tmp_path):
    """``vacate demo`` builds the story's volume; every item gets the label the story asks."""
    import math

    from vacate import demo

    demo.build_tree(str(tmp_path))
    items, _ = scan_tree(str(tmp_path))
    m = items[demo.MODEL_PATH].classification
    bf16 = sum(math.prod(s) for _, dt, s in demo.model_tensors() if dt == "BF16")
    experts = demo.LAYERS * demo.EXPERTS * 3 * demo.MOE_I * demo.HIDDEN   # gate_up + down
    assert m.details["parameters"] == bf16 + experts
    assert m.label.startswith(f"{demo.MODEL}, qwen3_5_moe, NVFP4 (modelopt), 395B params, ")
    assert ", complete, " in m.label
    assert (m.recoverable, m.source, m.guess) == ("regenerable", "hf:Qwen/Qwen3.5-397B-A17B",
                                                  True)
    e = items["eagle3"].classification
    assert e.label.startswith(f"EAGLE-3 draft-model training run for {demo.MODEL}: 4.8 TB cached"
                              " hidden states (regenerable), 6 draft checkpoints")
    assert "ShareGPT shards, a SpecForge checkout" in e.label
    ck = items["eagle3/outputs/qwen3.5-397b-a17b-eagle3/epoch_5"].classification
    assert (ck.kind, ck.details["epoch"], ck.details["draft"]) == ("checkpoint", 5, "EAGLE-3")
    cuda = items[demo.RUNFILE].classification
    assert cuda.kind == "installer" and not cuda.guess
    assert "CUDA 12.8 (torch 2.7.1+cu128)" in items[demo.FREEZE].classification.label
    assert items["lost+found"].classification.kind == "filesystem-artifact"


def test_quantised_copy_of_a_published_model_is_regenerable(tmp_path):
    d = tmp_path / "Llama-3.1-8B-AWQ"
    small_model(str(d), quantization_config={"quant_method": "awq", "bits": 4})
    (d / "README.md").write_text("---\nbase_model: meta-llama/Llama-3.1-8B\n"
                                 "base_model_relation: quantized\n---\n# x\n")
    items, _ = scan_tree(str(tmp_path))
    c = items["Llama-3.1-8B-AWQ"].classification
    assert (c.recoverable, c.source, c.guess) == ("regenerable", "hf:meta-llama/Llama-3.1-8B",
                                                  False)
    assert "quantised from meta-llama/Llama-3.1-8B" in c.label


def test_directory_of_caches_with_other_files_is_not_disposable(tmp_path):
    for n in ("a", "b"):
        os.makedirs(tmp_path / "d" / n / "__pycache__")
        with open(tmp_path / "d" / n / "__pycache__" / "m.pyc", "wb") as f:
            f.truncate(2 << 20)             # big enough to be named
    items, _ = scan_tree(str(tmp_path))
    assert items["d"].classification.recoverable == "regenerable"
    (tmp_path / "d" / "notes.md").write_text("only copy of my notes")
    items, _ = scan_tree(str(tmp_path))
    assert items["d"].classification.recoverable is None


def test_wide_directory_keeps_every_named_artifact(tmp_path):
    """Only the largest subdirectories of a wide directory are looked into, but hub repos and
    checkpoints are recognised by name wherever they sort."""
    hub = tmp_path / "vol" / "hub"
    for i in range(50):
        os.makedirs(hub / f"big-{i}")
        (hub / f"big-{i}" / "x.bin").write_bytes(b"x" * 100_000)
    for i in range(40):
        hub_repo(str(hub), f"org/m{i}", {"d" * 40: {}}, main="d" * 40)
    items, _ = scan_tree(str(tmp_path / "vol"))
    repos = [n for n in items if "/models--org--" in n]
    assert len(repos) == 40
    assert all(items[n].classification.source.startswith("hf:org/m") for n in repos)


def test_hidden_states_without_their_script_are_not_called_regenerable(tmp_path):
    os.makedirs(tmp_path / "hidden_states" / "rows_0-5000")
    (tmp_path / "hidden_states" / "rows_0-5000" / "data_0.ckpt").write_bytes(b"x" * 100)
    items, _ = scan_tree(str(tmp_path))
    c = items["hidden_states"].classification
    assert c.kind == "cache" and c.recoverable is None


def test_envs_and_source_and_images(tmp_path):
    v = tmp_path / "venv"
    os.makedirs(v / "lib" / "python3.12" / "site-packages" / "torch-2.7.0+cu128.dist-info")
    os.makedirs(v / "lib" / "python3.12" / "site-packages" / "numpy-2.1.0.dist-info")
    shutil.copy(os.path.join(MISC, "venv", "scgpt-linux-pyvenv.cfg"), v / "pyvenv.cfg")
    shutil.copy(os.path.join(MISC, "venv", "meta_learning-conda-env-export.yaml"),
                tmp_path / "environment.yml")
    ce = tmp_path / "miniforge3"
    os.makedirs(ce / "conda-meta")
    for n in ("python-3.11.9-hab00c5b_0_cpython.json", "zlib-1.3.1-h4ab18f5_1.json"):
        (ce / "conda-meta" / n).write_text("{}")
    os.makedirs(ce / "condabin")
    specforge_checkout(str(tmp_path / "SpecForge"))
    specforge_checkout(str(tmp_path / "mine"), pushed=False)
    with open(tmp_path / "disk.qcow2", "wb") as f:
        f.write(b"QFI\xfb\x00\x00\x00\x03" + b"\0" * 100)
    (tmp_path / "wheel-0.45.1-py3-none-any.whl").write_bytes(b"PK\x03\x04" + b"\0" * 30)
    os.makedirs(tmp_path / "pip" / "http-v2")
    (tmp_path / "pip" / "http-v2" / "x").write_bytes(b"x" * 10)
    items, _ = scan_tree(str(tmp_path))
    k = {n: (i.classification.kind, i.classification.recoverable) for n, i in items.items()
         if i.parent is None}
    assert k["venv"] == ("venv", "regenerable")
    assert "Python 3.12.3" in items["venv"].classification.label
    assert items["venv"].classification.details["torch"] == "2.7.0+cu128"
    assert k["environment.yml"] == ("env-backup", "unique")
    assert k["miniforge3"] == ("conda-env", "regenerable")
    assert "python 3.11.9" in items["miniforge3"].classification.label
    assert k["SpecForge"] == ("source-code", "re-downloadable")
    sf = items["SpecForge"].classification
    assert sf.source == "https://github.com/sgl-project/SpecForge.git"
    assert sf.details["project"] == "SpecForge" and sf.details["branch"] == "main"
    assert k["mine"] == ("source-code", "unique")    # commits the remote lacks
    assert k["disk.qcow2"] == ("vm-image", "unique")
    assert k["wheel-0.45.1-py3-none-any.whl"] == ("installer", "re-downloadable")
    assert items["wheel-0.45.1-py3-none-any.whl"].classification.source == "pypi:wheel==0.45.1"
    assert k["pip"] == ("cache", "regenerable")


def test_git_remote_credentials_are_redacted(tmp_path):
    specforge_checkout(str(tmp_path / "r"))
    git(str(tmp_path / "r"), "remote", "set-url", "origin",
        "https://user:hunter2secret@example.com/r.git")
    items, _ = scan_tree(str(tmp_path))
    c = items["r"].classification
    assert "hunter2secret" not in json.dumps(c.as_json())


# ---------------------------------------------------------------------------------------------
# Hostile input: a lower-confidence kind and a warning, never a crash or a long read


def _timed(root):
    t0 = time.monotonic()
    items, problems = scan_tree(root)
    return items, problems, time.monotonic() - t0


def test_hostile_safetensors(tmp_path):
    good = tmp_path / "src"
    small_model(str(good))
    data = (good / "model.safetensors").read_bytes()
    cases = {
        "truncated": data[: len(data) // 2],
        "huge-len": struct.pack("<Q", 2 ** 63) + data[8:],
        "lying": data[:8] + data[8:].replace(b'"data_offsets":[0,', b'"data_offsets":[9,', 1),
        "garbage": os.urandom(4096),
    }
    for name, blob_ in cases.items():
        d = tmp_path / "vol" / name
        os.makedirs(d)
        shutil.copy(good / "config.json", d)
        (d / "model.safetensors").write_bytes(blob_)
    # A header that claims tensors far past the end of the file (a lying big shard).
    d = tmp_path / "vol" / "claims-more"
    os.makedirs(d)
    shutil.copy(good / "config.json", d)
    sparse_shard(str(d / "model.safetensors"), [("w", "BF16", [1 << 20, 4096])])
    os.truncate(d / "model.safetensors", 1 << 20)
    items, problems, dt = _timed(str(tmp_path / "vol"))
    assert dt < 1.0
    for name in list(cases) + ["claims-more"]:
        c = items[name].classification
        assert c.kind == "model", name
        assert c.confidence <= 0.5, name
        assert c.details["unreadable_shards"] == ["model.safetensors"], name
        assert "malformed-file" in codes(problems, f"/{name}/"), name


def test_hostile_configs(tmp_path):
    vol = tmp_path / "vol"
    d = vol / "big-config"
    os.makedirs(d)
    with open(d / "config.json", "wb") as f:
        f.truncate(2 * 1024 ** 3)                          # a 2 GB sparse "config.json"
    save_file({"w": np.zeros(4, np.float16)}, str(d / "model.safetensors"))
    d = vol / "invalid-json"
    os.makedirs(d)
    (d / "config.json").write_text('{"model_type": "llama", ')
    save_file({"w": np.zeros(4, np.float16)}, str(d / "model.safetensors"))
    d = vol / "deep-json"
    os.makedirs(d)
    (d / "config.json").write_text("[" * 200_000 + "]" * 200_000)
    save_file({"w": np.zeros(4, np.float16)}, str(d / "model.safetensors"))
    d = vol / "deep-dirs"
    p = str(d)
    for i in range(60):
        p = os.path.join(p, f"d{i}")
    os.makedirs(p)
    shutil.copy(os.path.join(HF, "draft", "specforge-llama3-8B-eagle3.json"),
                os.path.join(p, "config.json"))
    (vol / "bogus.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 2 ** 60))
    (vol / "fake.gguf").write_bytes(b"not a gguf at all")
    items, problems, dt = _timed(str(vol))
    assert dt < 1.0
    for name in ("big-config", "invalid-json", "deep-json"):
        c = items[name].classification
        assert c.kind == "model" and c.confidence <= 0.5, name
    assert "oversized-file" in codes(problems, "big-config")
    assert "malformed-file" in codes(problems, "invalid-json")
    assert "malformed-file" in codes(problems, "deep-json")
    assert items["deep-dirs"].classification is not None
    assert items["bogus.gguf"].classification.confidence <= 0.5
    assert items["fake.gguf"].classification.kind == "file"
    assert "malformed-file" in codes(problems, "gguf")


def test_total_budget_spent_leaves_the_rest_unlooked_at(tmp_path):
    for i in range(5):
        small_model(str(tmp_path / "vol" / f"m{i}"))
    w = walk.walk(str(tmp_path / "vol"))
    items = tuple(Item("item:" + os.path.relpath(p, tmp_path / "vol"), p, None, d, s)
                  for p, d, s in w.top)
    out, problems = annotate(items, w.dirs, total_budget_s=0.0)
    assert [i.classification.label for i in out] == ["directory (not looked at)"] * 5
    assert [p.code for p in problems] == ["recognise-timeout"]
    assert "5 items" in problems[0].message


def test_entry_budget_spent_still_names_each_item(tmp_path, monkeypatch):
    """Past the listing budget nothing more is descended into, but each top-level item still
    gets its own directory looked at: a model after a huge tree is still a model."""
    from vacate.observing.recognise import explore

    monkeypatch.setattr(explore, "TOTAL_ENTRIES", 300)
    monkeypatch.setattr(explore, "ITEM_ENTRIES", 300)
    for i in range(40):
        os.makedirs(tmp_path / "vol" / "a-huge" / f"d{i}")
        for j in range(20):
            (tmp_path / "vol" / "a-huge" / f"d{i}" / f"f{j}").write_bytes(b"x")
    small_model(str(tmp_path / "vol" / "z-model"))
    items, problems = scan_tree(str(tmp_path / "vol"))
    assert items["a-huge"].classification.details.get("partial") is True
    assert items["z-model"].classification.kind == "model"
    assert items["z-model"].classification.details["parameters"] > 0
    assert "recognise-timeout" not in codes(problems)


def test_looking_does_not_touch_access_times(tmp_path):
    """atimes are evidence of use: reading headers and configs must not refresh them."""
    def aged(p):
        st = os.stat(p)
        os.utime(p, (st.st_mtime - 86400 * 30, st.st_mtime))   # read a month before its mtime
        return os.stat(p).st_atime

    control = tmp_path / "control.json"
    control.write_text("{}")
    before = aged(control)
    control.read_bytes()
    if os.stat(control).st_atime == before:
        pytest.skip("this filesystem does not update atimes (noatime)")
    nvfp4_model(str(tmp_path / "vol" / "m"), shards=2, rows=100)
    watched = [str(tmp_path / "vol" / "m" / n) for n in (
        "config.json", "hf_quant_config.json", "model.safetensors.index.json",
        "model-00001-of-00002.safetensors")] + [str(tmp_path / "vol" / "m")]
    times = {p: aged(p) for p in watched}
    w = walk.walk(str(tmp_path / "vol"))
    times[str(tmp_path / "vol" / "m")] = aged(str(tmp_path / "vol" / "m"))  # the walk's own
    items = tuple(Item("item:m", p, None, d, s) for p, d, s in w.top)
    out, _ = annotate(items, w.dirs)
    assert out[0].classification.details["parameters"] > 0          # it did read them
    assert {p: os.stat(p).st_atime for p in watched} == times


def test_special_files_are_never_opened(tmp_path):
    d = tmp_path / "vol" / "m"
    os.makedirs(d)
    os.mkfifo(d / "config.json")            # opening a FIFO for reading would block
    os.mkfifo(d / "model.safetensors")
    os.mkfifo(tmp_path / "vol" / "requirements.txt")
    os.mkfifo(tmp_path / "vol" / "x.gguf")
    items, problems, dt = _timed(str(tmp_path / "vol"))
    assert dt < 1.0
    assert items["m"].classification.confidence <= 0.5
    assert "not-regular-file" in codes(problems, "config.json")


def test_item_budget_is_kept(tmp_path):
    """A huge tree is not read to the end: the recognisers stop at their time budget."""
    d = tmp_path / "vol" / "many"
    for i in range(300):
        os.makedirs(d / f"x{i}" / "y")
        (d / f"x{i}" / "y" / "f.txt").write_text("requests==1\nnumpy==2\nrich==3\n")
    w = walk.walk(str(tmp_path / "vol"))
    items = tuple(Item("item:" + os.path.relpath(p, tmp_path / "vol"), p, None, dd, s)
                  for p, dd, s in w.top)
    t0 = time.monotonic()
    out, problems = annotate(items, w.dirs, budget_s=0.0)
    assert time.monotonic() - t0 < 1.0
    assert "recognise-timeout" in {p.code for p in problems}
    assert out[0].classification is not None




@pytest.mark.parametrize("cpu_bound", [False, True])
def test_side_by_side_gives_what_one_process_gives(tmp_path, monkeypatch, cpu_bound):
    """Several processes looking at the items (the default on a big tree: two per CPU,
    4 to 8, where the walk waited on the disk, one per CPU where it computed) say exactly what
    one says, item for item, in the same order, with the same problems."""
    from vacate.observing.collectors.forking import cpus
    from vacate.observing.recognise import sidebyside

    monkeypatch.setattr(sidebyside, "MIN_ENTRIES", 0)      # side by side even on a small tree
    items, dirs = side_by_side_tree(str(tmp_path / "vol"))
    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    one = annotate(items, dirs, parallel=False)
    assert not forks
    two = annotate(items, dirs, parallel=True, cpu_bound=cpu_bound)
    # it did run side by side, as many as said
    assert len(forks) + 1 == (max(2, min(8, cpus())) if cpu_bound
                              else max(4, min(8, 2 * cpus())))
    assert two == one
    kinds = {os.path.basename(i.path): i.classification.kind for i in one[0] if i.parent is None}
    assert kinds["big-model"] == kinds["model-0"] == "model"


def test_side_by_side_child_failing_costs_only_time(tmp_path, monkeypatch):
    """If the forked child cannot report (here: it cannot pickle its findings), whatever it
    had taken is looked at again in this process: the result is still complete."""
    import pickle as real_pickle
    import types

    from vacate.observing.recognise import sidebyside

    monkeypatch.setattr(sidebyside, "MIN_ENTRIES", 0)
    items, dirs = side_by_side_tree(str(tmp_path / "vol"))
    one = annotate(items, dirs, parallel=False)

    def broken(*a, **k):
        raise RuntimeError("cannot report")

    monkeypatch.setattr(sidebyside, "pickle", types.SimpleNamespace(
        dumps=broken, loads=real_pickle.loads, HIGHEST_PROTOCOL=real_pickle.HIGHEST_PROTOCOL))
    assert annotate(items, dirs, parallel=True) == one


def test_entry_budgets_share_fairly():
    """Each item may list what it holds (at most ITEM_ENTRIES); past TOTAL_ENTRIES in all,
    the small items keep theirs and the big ones share the rest equally."""
    from vacate.observing.model.inventory import Stats
    from vacate.observing.recognise.explore import (
        ITEM_ENTRIES,
        MIN_ITEM_ENTRIES,
        TOTAL_ENTRIES,
        entry_budgets,
    )

    def items(*sizes):
        return [Item("item:x", "/x", None, True, Stats(0, 0, n, 0)) for n in sizes]

    assert entry_budgets(items(5, 3000, 10**6)) == [MIN_ITEM_ENTRIES, 3000, ITEM_ENTRIES]
    many = entry_budgets(items(*[10**6] * 40, 1000))
    assert many[-1] == 1000 and len(set(many[:-1])) == 1
    assert sum(many) <= TOTAL_ENTRIES and many[0] == (TOTAL_ENTRIES - 1000) // 40
