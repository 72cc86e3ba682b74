"""Tied weights kept once under one name, as the real libraries write them: a diff of a model against its own
export is the same, and a tied weight that changed is found under both names.

Made here with the libraries themselves, not by hand:
- transformers' `save_pretrained` of a tiny GPT-2 (random weights, config in code; its input and output
  embeddings are tied): it drops `lm_head.weight` and declares nothing, single file and sharded;
- `huggingface_hub.save_torch_state_dict` (what zero_to_fp32 and others shard with): it keeps the first name of
  a shared tensor in sorted order, drops the others and declares them in the metadata
  (`{"transformer.wte.weight": "lm_head.weight"}`), in the safetensors header or in the shard index; its sharded
  `.bin` keeps both names in one shard, one storage (torch.save);
- `torch.save` of the state dict (one storage, two names) and weightdiff's own dump (the shared parameter once).
"""

from __future__ import annotations

import io
import json

import huggingface_hub as hub
import pytest
import torch
import transformers
from rich.console import Console

from hangdoctor.topology import RankCoords
from weightdiff import dump
from weightdiff.cli import main


def _cli(*argv) -> tuple[int, str, dict]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*map(str, argv), "--json"], out=Console(file=out, width=160), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue()
    return code, err.getvalue(), json.loads(out.getvalue())


def _by_name(report: dict, key: str = "params") -> dict[str, dict]:
    return {p["name"]: p for p in report[key]}


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """A tiny GPT-2 and every form of it: its state dict, transformers' exports, huggingface_hub's, a dump."""
    root = tmp_path_factory.mktemp("gpt2")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    assert model.lm_head.weight is model.transformer.wte.weight  # tied, as GPT-2 is
    state = model.state_dict()
    torch.save(state, root / "state.pt")
    model.save_pretrained(root / "tf_single")
    model.save_pretrained(root / "tf_sharded", max_shard_size="20KB")
    for name, safe in (("hub_st", True), ("hub_bin", False)):
        (root / name).mkdir()
        hub.save_torch_state_dict(dict(state), root / name, max_shard_size="20KB", safe_serialization=safe)
    (root / "hub_single").mkdir()  # (each call gets its own dict: it removes the names it drops from the one given)
    hub.save_torch_state_dict(dict(state), root / "hub_single")
    dump(model, iteration=1, tag="after", out=root / "dump", coords=RankCoords(rank=0, dp=0, pp=0, tp=0))
    with torch.no_grad():
        model.lm_head.weight[7, 3] += 0.5  # the one tied tensor: both names change
    dump(model, iteration=1, tag="after", out=root / "dump_changed", coords=RankCoords(rank=0, dp=0, pp=0, tp=0))
    changed = {k: v.clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    changed["lm_head.weight"] = changed["transformer.wte.weight"]  # tied again, as the model holds it
    (root / "hub_changed").mkdir()
    hub.save_torch_state_dict(changed, root / "hub_changed", max_shard_size="20KB")
    return root


def test_the_exports_declare_the_tie_the_way_the_libraries_do(gpt2):
    """What this test relies on, checked on the files themselves."""
    index = json.loads((gpt2 / "tf_sharded" / "model.safetensors.index.json").read_text())
    assert "lm_head.weight" not in index["weight_map"] and "lm_head.weight" not in index.get("metadata", {})
    index = json.loads((gpt2 / "hub_st" / "model.safetensors.index.json").read_text())
    assert "transformer.wte.weight" not in index["weight_map"]  # sorted first: lm_head.weight is kept
    assert index["metadata"]["transformer.wte.weight"] == "lm_head.weight"
    shards = json.loads((gpt2 / "hub_bin" / "pytorch_model.bin.index.json").read_text())["weight_map"]
    assert shards["transformer.wte.weight"] == shards["lm_head.weight"]


@pytest.mark.parametrize("export", ["tf_single", "tf_sharded"])
def test_an_export_that_drops_a_tied_name_silently_is_the_same(gpt2, export, tmp_path):
    dropped, kept = "lm_head.weight", "transformer.wte.weight"
    for a, b in ((gpt2 / "state.pt", gpt2 / export), (gpt2 / export, gpt2 / "state.pt")):
        # with its config.json, the export declares the tie (tie_word_embeddings): compared as the kept tensor
        code, err, report = _cli(a, b)
        assert code == 0 and report["verdict"] == "same" and report["params"] == [], err
        assert report["informational"] == [] and report["equal_tensors"] == report["compared_tensors"], report
    bare = tmp_path / export
    bare.mkdir()
    for f in (gpt2 / export).iterdir():
        if f.name != "config.json":  # nothing declares the tie: the state dict's storage says it
            (bare / f.name).write_bytes(f.read_bytes())
    for a, b in ((gpt2 / "state.pt", bare), (bare, gpt2 / "state.pt")):
        code, err, report = _cli(a, b)
        assert code == 0 and report["verdict"] == "same" and report["params"] == [], err
        (info,) = report["informational"]
        assert (info["name"], info["status"]) == (dropped, "stored once") and kept in info["note"]


@pytest.mark.parametrize("export", ["hub_single", "hub_st", "hub_bin"])
def test_a_declared_alias_is_compared_as_the_tensor_it_names(gpt2, export):
    code, err, report = _cli(gpt2 / "state.pt", gpt2 / export)
    assert code == 0 and report["verdict"] == "same" and report["informational"] == [], err
    assert report["equal_tensors"] == report["compared_tensors"] == len(torch.load(gpt2 / "state.pt"))


def test_our_dump_against_the_state_dict_and_the_exports(gpt2):
    for other in ("state.pt", "tf_single", "hub_st"):
        code, err, report = _cli(gpt2 / "dump", gpt2 / other)
        assert code == 0 and report["verdict"] == "same", (other, err, report["params"])


def test_a_changed_tied_weight_is_found_under_both_names(gpt2):
    for a, b, dropped, note in (
            (gpt2 / "dump_changed", gpt2 / "state.pt", "lm_head.weight", "a keeps it once, as transformer.wte.weight"),
            (gpt2 / "state.pt", gpt2 / "hub_changed", "transformer.wte.weight", "b keeps it once, as lm_head.weight")):
        code, err, report = _cli(a, b)
        assert code == 1, err
        found = _by_name(report)
        assert set(found) == {"transformer.wte.weight", "lm_head.weight"}
        for name in found:
            assert found[name]["status"] == "differs" and found[name]["example"]["first_index"] == [7, 3]
        assert note in found[dropped]["note"]


def test_a_name_that_is_only_equal_in_value_is_still_missing(tmp_path):
    """Two zero biases are equal but not one tensor: dropping one is a real difference, never 'stored once'."""
    from safetensors.torch import save_file

    state = {"ln_1.bias": torch.zeros(8), "ln_2.bias": torch.zeros(8), "w": torch.ones(2, 2)}
    torch.save(state, tmp_path / "a.pt")
    save_file({k: v for k, v in state.items() if k != "ln_2.bias"}, str(tmp_path / "model.safetensors"))
    code, _, report = _cli(tmp_path / "a.pt", tmp_path)
    assert code == 1 and [(p["name"], p["status"]) for p in report["params"]] == [("ln_2.bias", "missing in b")]


def test_a_name_map_renames_the_tied_names_too(gpt2, tmp_path):
    names = tmp_path / "map.json"
    names.write_text(json.dumps({"transformer.": "gpt.", "lm_head.": "head."}))
    for a, b in ((gpt2 / "state.pt", gpt2 / "tf_single"), (gpt2 / "dump", gpt2 / "hub_st")):
        code, err, report = _cli(a, b, "--name-map", names)
        assert code == 0 and report["verdict"] == "same", (a, b, err, report["params"])
        assert all(p["name"].startswith(("gpt.", "head.")) for p in report["informational"])
