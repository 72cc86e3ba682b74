"""weightdiff.dump on real (small) modules: exact values, fingerprints, metadata, file names, bad arguments."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
import torch
from safetensors.torch import load_file

import weightdiff
from tests.weightdiff.models import MixedFusedLayerNorm, TinyGPT, naive_groups
from hangdoctor.topology import ParallelDims, RankCoords
from weightdiff.naming import parse_name
from weightdiff.read.sidecar import read_sidecar

COORDS = ParallelDims(tp=2, pp=2, dp=2).coords(5)  # rank 5: tp=1, dp=0, pp=1


def _model(dtype=torch.float32) -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT().to(dtype)


def test_full_dump_round_trips_exact_values_and_fingerprints(tmp_path):
    model = _model(torch.bfloat16)
    path = weightdiff.dump(model, iteration=805, tag="after", out=tmp_path, coords=COORDS)
    assert path.name == f"debug-805-pp1-tp1-dp0-global5-after-iteration-{os.getpid()}.json"
    tensor_file = path.with_suffix(".safetensors")
    values = load_file(str(tensor_file))  # safetensors' own reader, no pickle
    # Module order (named_parameters: the tied head.weight once, under its first name), as a state_dict lists
    # them, is the order of the sidecar's records and of the tensors in the file: read from the file's own header
    # (8-byte length, then JSON), its tensors lie back to back in that order.
    names = [n for n, _ in model.named_parameters()]
    raw_file = tensor_file.read_bytes()
    header = json.loads(raw_file[8:8 + int.from_bytes(raw_file[:8], "little")])
    header.pop("__metadata__", None)
    assert list(header) == names and sorted(values) == sorted(names)
    offsets = [header[n]["data_offsets"] for n in names]
    assert offsets[0][0] == 0 and all(a[1] == b[0] for a, b in zip(offsets, offsets[1:]))
    sidecar = json.loads(path.read_text())
    assert [record["name"] for record in sidecar["params"]] == names
    for record in sidecar["params"]:
        p = dict(model.named_parameters())[record["name"]]
        v = values[record["name"]]
        assert v.dtype == torch.bfloat16 and torch.equal(v, p.detach())
        assert record["dtype"] == "bfloat16" and record["shape"] == list(p.shape)
        raw = v.reshape(-1).view(torch.uint8).numpy().tobytes()
        assert record["fingerprint"]["sha256"] == hashlib.sha256(raw).hexdigest()
        assert record["fingerprint"]["norm"] == pytest.approx(p.float().norm().item(), rel=1e-5)
        assert record["fingerprint"]["absmax"] == pytest.approx(p.float().abs().max().item())
    assert sidecar["coords"] == {"rank": 5, "dp": 0, "pp": 1, "tp": 1}
    assert sidecar["tensor_file"] == tensor_file.name and sidecar["mode"] == "full"


def test_metadata_names_module_classes_mro_ties_and_groups(tmp_path):
    model = _model()
    opt = torch.optim.AdamW(naive_groups(model), lr=1e-3)
    dump = read_sidecar(weightdiff.dump(model, iteration=1, tag="before", out=tmp_path, coords=COORDS,
                                        optimizer=opt))
    emb_norm = dump.tensors["embed.norm.weight"]
    assert emb_norm.module_class == "torch.nn.modules.normalization.LayerNorm"
    assert emb_norm.group == {**emb_norm.group, "weight_decay": 0.1} and emb_norm.group_index == 0
    block_norm = dump.tensors["blocks.0.input_layernorm.weight"]
    assert block_norm.module_class == f"{MixedFusedLayerNorm.__module__}.MixedFusedLayerNorm"
    assert "torch.nn.modules.normalization.LayerNorm" in block_norm.module_mro
    assert block_norm.group["weight_decay"] == 0.0 and block_norm.group_index == 1
    tied = dump.tensors["embed.word_embeddings.weight"]
    assert tied.tie is not None and tied.tie.aliases == ("head.weight",)
    assert "head.weight" not in dump.tensors  # one tensor, two names
    assert dump.coords == COORDS and dump.iteration == 1 and dump.tag == "before" and dump.kind == "dump"


def test_explicit_param_groups_win_and_param_groups_by_name_matches_by_identity():
    model = _model()
    opt = torch.optim.SGD(naive_groups(model, weight_decay=0.5), lr=0.1)
    groups = weightdiff.param_groups_by_name(model, opt)
    assert groups["embed.norm.weight"]["weight_decay"] == 0.5
    assert groups["head.weight"] == groups["embed.word_embeddings.weight"]  # the alias gets the same group
    assert groups["blocks.1.input_layernorm.bias"]["weight_decay"] == 0.0
    assert {g["group_index"] for g in groups.values()} == {0, 1}


def test_explicit_param_groups_take_precedence_over_the_optimizer(tmp_path):
    model = _model()
    opt = torch.optim.SGD(naive_groups(model, weight_decay=0.5), lr=0.1)
    explicit = {"embed.norm.weight": {"weight_decay": 0.0, "lr": 0.1, "group_index": 7}}
    dump = read_sidecar(weightdiff.dump(model, iteration=1, tag="before", out=tmp_path, coords=COORDS,
                                        param_groups=explicit, optimizer=opt))
    assert dump.tensors["embed.norm.weight"].group == {"weight_decay": 0.0, "lr": 0.1}
    assert dump.tensors["embed.norm.weight"].group_index == 7
    assert dump.tensors["embed.norm.bias"].group is None  # not in the explicit mapping


def test_an_optimizer_holding_none_of_the_parameters_leaves_a_note(tmp_path):
    model = _model()
    flat = torch.nn.Parameter(torch.zeros(10))  # what ZeRO leaves in the torch optimizer
    dump = read_sidecar(weightdiff.dump(model, iteration=1, tag="before", out=tmp_path, coords=COORDS,
                                        optimizer=torch.optim.SGD([flat], lr=0.1)))
    assert all(m.group is None for m in dump.tensors.values())
    assert "param_groups computed before deepspeed.initialize" in dump.notes[0]


def test_parameters_sharing_one_flat_buffer_are_written(tmp_path):
    """ZeRO points parameters into flat buffers; safetensors' save_file refuses shared storage, dump must not."""
    model = _model()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    offset = 0
    for p in model.parameters():
        p.data = flat[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    path = weightdiff.dump(model, iteration=0, tag="after", out=tmp_path, coords=COORDS)
    values = load_file(str(path.with_suffix(".safetensors")))
    for name, p in model.named_parameters():
        assert torch.equal(values[name], p.detach())


def test_fingerprint_mode_writes_only_the_sidecar_with_the_same_fingerprints(tmp_path):
    model = _model()
    full = read_sidecar(weightdiff.dump(model, iteration=2, tag="after", out=tmp_path / "full", coords=COORDS))
    light_path = weightdiff.dump(model, iteration=2, tag="after", out=tmp_path / "fp", coords=COORDS,
                                 mode="fingerprint")
    assert [p.name for p in (tmp_path / "fp").iterdir()] == [light_path.name]
    light = read_sidecar(light_path)
    assert light.mode == "fingerprint" and light.tensor_source is None
    for name, meta in full.tensors.items():
        assert light.tensors[name].fingerprint == meta.fingerprint


def test_names_parse_back_to_the_coordinates():
    parsed = parse_name("debug-805-pp11-tp1-dp4-global369-after-iteration-377074.safetensors")
    assert parsed.coords == RankCoords(rank=369, dp=4, pp=11, tp=1) and parsed.iteration == 805
    assert parsed.tag == "after" and parsed.pid == 377074 and parsed.stem().startswith("debug-805-pp11")
    assert parse_name("debug-805-pp11-tp1-dp4-global369-after-iteration-377074.txt") is None


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "repr"}, "dump mode"),
    ({"tag": "before-iteration"}, "dump tag"),
    ({"iteration": -1}, "iteration"),
    ({"coords": (0, 0, 0, 0)}, "coords"),
])
def test_bad_arguments_raise_value_error(tmp_path, kwargs, message):
    args = {"iteration": 1, "tag": "before", "out": tmp_path, "coords": COORDS, **kwargs}
    with pytest.raises(ValueError, match=message):
        weightdiff.dump(_model(), **args)
    assert not list(tmp_path.iterdir())


def test_nonfinite_values_are_counted_and_survive_json(tmp_path):
    model = _model()
    with torch.no_grad():
        model.blocks[0].dense.bias[3] = float("nan")
    dump = read_sidecar(weightdiff.dump(model, iteration=1, tag="after", out=tmp_path, coords=COORDS))
    fp = dump.tensors["blocks.0.dense.bias"].fingerprint
    assert fp.nonfinite == 1 and fp.norm != fp.norm  # NaN
