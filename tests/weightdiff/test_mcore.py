"""Megatron-Core `torch_dist` checkpoints (issue 31), written by megatron-core's own `dist_checkpointing.save`
(TP=2, and TP=1 with DP=2, on 2 gloo ranks, CPU: mcore_save.py, run once for the module, about 10-35 s): the top folder (its tracker) and
the iteration folder are read as torch_dist, the global tensors compared exactly, common.pt's entries and the rng
ShardedObjects as values; a missing .distcp file or a damaged .metadata is one `Error:` line, never SAME."""

from __future__ import annotations

import importlib.util
import json
import pickle
import shutil

import pytest

from tests.weightdiff.cli_run import run_cli
from tests.weightdiff.savers import run_saver

pytestmark = pytest.mark.skipif(importlib.util.find_spec("megatron") is None,
                                reason="megatron-core is not installed (pip install -e '.[test]')")
QKV = "decoder.layers.0.self_attention.linear_qkv.weight"


@pytest.fixture(scope="module")
def mcore(tmp_path_factory):
    return run_saver("mcore_save.py", tmp_path_factory.mktemp("mcore"), timeout=240)


def test_the_saved_layout_is_megatron_lms(mcore):
    names = {p.name for p in (mcore / "a" / "iter_0000010").iterdir()}
    assert {".metadata", "common.pt", "metadata.json"} <= names and any(n.endswith(".distcp") for n in names)
    assert (mcore / "a" / "latest_checkpointed_iteration.txt").read_text().strip() == "10"


def test_identical_checkpoints_are_same_their_values_compared_too(mcore):
    code, out, err, errors = run_cli([str(mcore / "a"), str(mcore / "a2")])
    assert code == 0 and not errors and "SAME" in out, out + err
    assert "Megatron-Core torch_dist checkpoint" in out and "read iter_0000010, the iteration its tracker names" in err
    code, out, _, _ = run_cli([str(mcore / "a"), str(mcore / "a2"), "--json"])
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "same" and report["unreadable_tensors"] == 0
    # the 7 weights, and the values beside them: common.pt's args and iteration, each tp rank's rng state
    assert report["equal_tensors"] == report["compared_tensors"] == 7 + 10 + 2 * 10, report


def test_one_changed_element_is_named_with_its_global_index(mcore):
    code, out, err, errors = run_cli([str(mcore / "a"), str(mcore / "b"), "--json"])
    assert code == 1 and not errors, out + err
    (param,) = json.loads(out)["params"]
    assert param["name"] == QKV and param["n_differ"] == 1
    assert param["example"]["first_index"] == [13, 2]  # row 13: in tp rank 1's half (rows 12-23), globally


def test_the_iteration_folder_is_torch_dist_too_and_matches_the_gathered_tensors(mcore):
    code, out, _, errors = run_cli([str(mcore / "a" / "iter_0000010"), str(mcore / "a2")])
    assert code == 0 and not errors and "SAME" in out, out
    code, out, _, errors = run_cli([str(mcore / "a" / "iter_0000010"), str(mcore / "full.pt"), "--json"])
    report = json.loads(out)
    assert code == 1 and not errors  # full.pt holds the tensors only: the values are missing there, nothing else
    assert report["params"] and all(p["role"] == "value" and p["status"] == "missing in b" for p in report["params"])
    code, out, _, _ = run_cli([str(mcore / "a" / "iter_0000010"), str(mcore / "full.pt")])
    assert "7 tensors equal" in out, out  # each TP slice at its offset: the whole tensors, bitwise


def test_a_changed_argument_in_common_pt_is_different(mcore):
    code, out, err, errors = run_cli([str(mcore / "a"), str(mcore / "lr")])
    assert code == 1 and not errors, out + err
    assert "common.args.lr (value)  differs" in out and "all 1 differences" in out, out


def test_the_iteration_is_chosen_like_megatron_lms(mcore):
    code, out, _, errors = run_cli([str(mcore / "a"), str(mcore / "b"), "--b-iteration", "10"])
    assert code == 1 and not errors and QKV in out
    code, _, _, errors = run_cli([str(mcore / "a"), str(mcore / "b"), "--b-iteration", "3"])
    assert code == 2 and errors == [f"Error: {mcore / 'b'}: no iteration 3 (iterations: 10)"]


def test_a_missing_distcp_file_is_one_error_never_same(mcore, tmp_path):
    damaged = tmp_path / "b"
    shutil.copytree(mcore / "b", damaged)
    (damaged / "iter_0000010" / "__1_1.distcp").unlink()  # tp rank 1's embedding, proj and fc1 chunks
    code, out, err, errors = run_cli([str(mcore / "a"), str(damaged)])
    assert code == 3 and "SAME" not in out, out + err  # the change is still found, and the file named
    assert len(errors) == 1 and "__1_1.distcp: no such file" in errors[0], errors
    assert f"{QKV}  differs" in out and "first at index [13, 2]" in out and "3 could not be read" in out, out
    code, out, err, errors = run_cli([str(mcore / "a2"), str(damaged)])
    assert code != 0 and "SAME" not in out and len(errors) == 1, out + err


def test_a_damaged_metadata_is_one_error_never_same(mcore, tmp_path):
    damaged = tmp_path / "a"
    shutil.copytree(mcore / "a", damaged)
    meta = damaged / "iter_0000010" / ".metadata"
    meta.write_bytes(meta.read_bytes()[:200])
    code, out, err, errors = run_cli([str(mcore / "a"), str(damaged)])
    assert code == 2 and "SAME" not in out and len(errors) == 1 and "not DCP metadata" in errors[0], out + err


def test_only_the_named_planner_classes_are_allowed(mcore, tmp_path):
    from torch.distributed.checkpoint.planner import LoadPlan

    foreign = tmp_path / "a"
    shutil.copytree(mcore / "a", foreign)
    (foreign / "iter_0000010" / ".metadata").write_bytes(pickle.dumps(LoadPlan(items=[])))
    code, out, _, errors = run_cli([str(mcore / "a"), str(foreign)])
    assert code == 2 and len(errors) == 1 and "planner.LoadPlan is not one of DCP's metadata types" in errors[0]


def test_a_missing_common_pt_is_one_error_its_entries_not_compared(mcore, tmp_path):
    damaged = tmp_path / "lr"
    shutil.copytree(mcore / "lr", damaged)
    (damaged / "iter_0000010" / "common.pt").unlink()
    code, out, err, errors = run_cli([str(mcore / "a"), str(damaged)])
    assert code == 2 and "SAME" not in out and "missing in b" not in out, out + err
    assert len(errors) == 1 and "common.pt: no such file; its entries" in errors[0], errors
    assert "11 could not be read" in out, out  # "common", and a's 10 entries under it


def test_a_checkpoint_saved_with_other_parallel_sizes_compares_name_by_name(mcore):
    code, out, err, errors = run_cli([str(mcore / "a"), str(mcore / "tp1"), "--json"])  # TP=2 against TP=1, DP=2
    report = json.loads(out)
    assert code == 1 and not errors, out + err
    # the 7 weights equal; what differs is what says how it was saved: the sizes in args, one rng state per tp rank
    assert all(p["role"] == "value" for p in report["params"]), report["params"]
    assert {p["name"] for p in report["params"] if p["status"] == "differs"} == {
        "common.args.tensor_model_parallel_size", "common.args.data_parallel_size"}
    assert not any(p["reset_to"] for p in report["params"])  # a size of 1 is not "back at a default initialisation"
