"""Megatron-LM checkpoint folders (iter_NNNNNNN/mp_rank_TT[_PPP]/model_optim_rng.pt, written by
megatron_layout.py in Megatron-LM's layout) and tensor-parallel shards against a whole-model file."""

from __future__ import annotations

import io
import json

import torch
from rich.console import Console
from safetensors.torch import save_file

from tests.weightdiff.megatron_layout import rank_file, whole_model, write_checkpoint
from weightdiff.cli import main


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=200), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), [line for line in err.getvalue().splitlines() if line.startswith("Error: ")]


def _edit(path, name, index, delta):
    state = torch.load(path, weights_only=False)
    state["model"][name][index] += delta
    torch.save(state, path)


def test_megatron_folders_pair_by_tp_and_pp_rank(tmp_path):
    a = write_checkpoint(tmp_path / "a", tp_size=2, pp_size=2)
    b = write_checkpoint(tmp_path / "b", tp_size=2, pp_size=2)
    code, out, errors = _cli([str(a), str(b)])
    assert code == 0 and not errors and "Megatron-LM checkpoint, iteration 2, 4 (pp, tp) slices" in out
    assert "58 tensors equal" in out
    _edit(rank_file(b, 2, tp=0, pp=1, pp_size=2), "decoder.layers.0.self_attention.linear_proj.weight", (2, 1), 0.5)
    code, out, errors = _cli([str(a), str(b), "--json"])
    report = json.loads(out)
    assert code == 1 and not errors
    (param,) = report["params"]
    assert param["name"] == "decoder.layers.0.self_attention.linear_proj.weight" and param["where"] == "pp=1 tp=0"
    assert param["example"]["first_index"] == [2, 1] and param["n_differ"] == 1
    code, out, _ = _cli(["check", str(a)])
    assert code == 0 and "TP=2 PP=2 DP=2" in out  # the dp size from Megatron's saved args


def test_the_tracker_file_chooses_the_iteration(tmp_path):
    root = write_checkpoint(tmp_path / "m", tp_size=1, pp_size=1, iteration=2)
    write_checkpoint(root, tp_size=1, pp_size=1, iteration=4, seed=1)  # the tracker now says 4
    code, out, _ = _cli([str(root), str(root / "iter_0000004")])
    assert code == 0 and "iteration 4" in out
    code, out, _ = _cli([str(root), str(root), "--a-iteration", "2", "--b-iteration", "4"])
    assert code == 1 and "iteration 2" in out and "iteration 4" in out
    code, _, errors = _cli([str(root), str(root), "--a-iteration", "3"])
    assert code == 2 and errors == [f"Error: {root}: no iteration 3 (iterations: 2, 4)"]
    (root / "latest_checkpointed_iteration.txt").write_text("release")
    code, _, errors = _cli([str(root), str(root)])
    assert code == 2 and errors == [f"Error: {root / 'latest_checkpointed_iteration.txt'}: names release, "
                                    "which does not exist"]


def test_a_damaged_rank_file_and_a_foreign_pickle_are_one_line_each(tmp_path):
    a = write_checkpoint(tmp_path / "a", tp_size=2, pp_size=2)
    b = write_checkpoint(tmp_path / "b", tp_size=2, pp_size=2)
    _edit(rank_file(b, 2, tp=1, pp=0, pp_size=2), "embedding.word_embeddings.weight", (3, 4), 1.0)
    damaged = rank_file(b, 2, tp=1, pp=1, pp_size=2)
    damaged.write_bytes(damaged.read_bytes()[:1000])
    code, out, errors = _cli([str(a), str(b)])
    assert code == 3 and len(errors) == 2, errors  # the file, and its (pp, tp) present in a only
    assert "mp_rank_01_001/model_optim_rng.pt: cannot load" in errors[0]
    assert "embedding.word_embeddings.weight  differs on pp=0 tp=1" in out and "first at index [3, 4]" in out
    state = torch.load(rank_file(a, 2, tp=0, pp=0, pp_size=2), weights_only=False)
    state["args"] = torch.nn.Linear(2, 2)  # a pickled module: a global outside the allowlist
    torch.save(state, rank_file(a, 2, tp=0, pp=0, pp_size=2))
    code, _, errors = _cli([str(a), str(a)])
    assert code == 2 and any("it refers to torch.nn.modules.linear.Linear, which a weights-only load" in e
                             for e in errors)


def test_tensor_parallel_shards_against_the_whole_model(tmp_path):
    root = write_checkpoint(tmp_path / "tp2", tp_size=2, pp_size=1)
    whole = whole_model()
    (tmp_path / "hf").mkdir()
    save_file(whole, str(tmp_path / "hf" / "model.safetensors"))
    code, out, errors = _cli([str(root), str(tmp_path / "hf")])
    assert code == 0 and not errors and "58 tensors equal" in out  # 29 per tp rank: split and replicated
    whole["decoder.layers.1.mlp.linear_fc1.weight"][20, 3] += 0.5  # rows 16..31 of 32: tp=1's (column-parallel)
    whole["decoder.layers.0.self_attention.linear_proj.weight"][6, 2] -= 0.5  # columns 0..3 of 8: tp=0's (row)
    whole["decoder.final_layernorm.weight"][1] += 0.5  # replicated: on both tp ranks
    save_file(whole, str(tmp_path / "hf" / "model.safetensors"))
    code, out, errors = _cli([str(root), str(tmp_path / "hf"), "--json"])
    report = {p["name"]: p for p in json.loads(out)["params"]}
    assert code == 1 and not errors and len(report) == 3
    fc1 = report["decoder.layers.1.mlp.linear_fc1.weight"]
    assert fc1["where"] == "tp=1" and fc1["example"]["first_index"] == [20, 3]  # the whole tensor's index
    assert "tp=1's shard of 2: indices 16..31 of dim 0" in fc1["note"]
    proj = report["decoder.layers.0.self_attention.linear_proj.weight"]
    assert proj["where"] == "tp=0" and proj["example"]["first_index"] == [6, 2] and "of dim 1" in proj["note"]
    assert report["decoder.final_layernorm.weight"]["where"] == "all ranks"
    torch.save({"decoder.layers.0.mlp.linear_fc1.weight": torch.zeros(31, 8, dtype=torch.bfloat16)},
               tmp_path / "odd.pt")  # 31 rows: no even split into 2
    code, out, errors = _cli([str(root), str(tmp_path / "odd.pt")])
    assert code == 3 and all("has shape" in e for e in errors) and "shape on" in out


def test_a_missing_or_extra_tensor_parallel_slice_is_never_same(tmp_path):
    """TP=2 with mp_rank_01 gone, against the whole model: half of every split tensor was never compared, so the
    answer is INCOMPLETE with the slice named, not SAME (sweep round 2); a slice beyond the args' TP is named too."""
    root = write_checkpoint(tmp_path / "tp2", tp_size=2, pp_size=1)
    (tmp_path / "hf").mkdir()
    save_file(whole_model(), str(tmp_path / "hf" / "model.safetensors"))
    gone = rank_file(root, 2, tp=1, pp=0, pp_size=1).parent
    gone.rename(tmp_path / "elsewhere")
    code, out, errors = _cli([str(root), str(tmp_path / "hf")])
    assert code == 2 and "SAME" not in out and "INCOMPLETE" in out, out
    assert errors == [f"Error: {root / 'iter_0000002'}: no mp_rank_01/model_optim_rng.pt (its args say TP=2 PP=1): "
                      "tp rank 1 of pp stage 0 not compared"]
    (tmp_path / "elsewhere").rename(gone)
    extra = rank_file(root, 2, tp=2, pp=0, pp_size=1)
    extra.parent.mkdir()
    extra.write_bytes(rank_file(root, 2, tp=1, pp=0, pp_size=1).read_bytes())
    code, out, errors = _cli([str(root), str(tmp_path / "hf")])
    assert code == 2 and "INCOMPLETE" in out and len(errors) == 1, (out, errors)
    assert "mp_rank_02/model_optim_rng.pt: beyond the checkpoint's sizes (its args say TP=2 PP=1)" in errors[0]


def test_two_folders_for_one_slice_are_neither_chosen(tmp_path):
    """mp_rank_00 beside mp_rank_00_000 (two layouts of one slice): one was silently chosen, SAME (third sweep)."""
    root = write_checkpoint(tmp_path / "tp2", tp_size=2, pp_size=1)
    other = write_checkpoint(tmp_path / "copy", tp_size=2, pp_size=1)
    first = rank_file(root, 2, tp=0, pp=0, pp_size=1).parent
    doubled = first.parent / "mp_rank_00_000"
    doubled.mkdir()
    (doubled / "model_optim_rng.pt").write_bytes((first / "model_optim_rng.pt").read_bytes())
    code, out, errors = _cli([str(other), str(root)])
    assert code == 2 and "SAME" not in out and "INCOMPLETE" in out, out
    assert "a second folder for tp rank 0 of pp stage 0" in errors[0], errors  # then its pair, present in a only
