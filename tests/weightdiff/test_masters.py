"""`weightdiff check` on a checkpoint: each module weight against the optimizer's fp32 master copy rounded to the
weight's dtype, on real DeepSpeed checkpoints (ds_scenarios.py: ZeRO-1 fp32 pipelines, ZeRO-2 bf16 over DP=4,
the bf16 optimizer with a pipeline) and on Megatron-LM folders (megatron_layout.py).

Where an element is expected, it is worked out without weightdiff's reader: from DeepSpeed's own
zero_to_fp32 (which rebuilds the masters from the partitions in its own way) or from the partition sizes."""

from __future__ import annotations

import io
import json
import math
import shutil

import pytest
import torch
from rich.console import Console

from tests.weightdiff.megatron_layout import rank_file, write_checkpoint
from weightdiff.cli import main

MASTER = "master copy"


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=200), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), [line for line in err.getvalue().splitlines() if line.startswith("Error: ")]


def _report(path):
    code, out, errors = _cli(["check", str(path), "--json"])
    return code, json.loads(out), errors


def _masters(report):
    return {f["name"]: f for f in report["findings"] if f["kind"] == MASTER}


def _trainable(step) -> int:
    """Parameters with a master, counted from the mp_rank files' ZeRO param_shapes (frozen ones excluded)."""
    total = 0
    for path in sorted(step.glob("mp_rank_*_model_states.pt")):
        total += sum(len(group) for group in torch.load(path, weights_only=False)["param_shapes"])
    return total


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_healthy_checkpoints_every_weight_is_its_rounded_master(ds_runs):
    for scenario, kind in (("healthy", "ZeRO stage 1"), ("bn", "ZeRO stage 1"), ("zero2", "ZeRO stage 2"),
                           ("bf16pp", "bf16 optimizer")):
        code, report, errors = _report(ds_runs / scenario / "ckpt")
        assert not errors and not _masters(report), (scenario, report["findings"])
        assert report["not_checked"] == {} and report["unchecked"] == []
        assert any(kind in note for note in report["notes"]), report["notes"]
        step = next((ds_runs / scenario / "ckpt").glob("global_step*"))
        expected = _trainable(step) if scenario != "bf16pp" else sum(  # the bf16 optimizer saves no param_shapes
            1 for p in step.glob("layer_*") for v in torch.load(p, weights_only=True).values())
        assert report["checked"][MASTER] == expected > 0, scenario
    code, out, _ = _cli(["check", str(ds_runs / "zero2" / "ckpt")])
    assert code == 0 and "master copy   ok    6 checked, 0 findings" in out


def _zero2_with_edited_weight(ds_runs, tmp_path, name: str, index: tuple[int, ...], delta: float):
    """A copy of the ZeRO-2 bf16 checkpoint with one element of one module weight changed after the save."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(ds_runs / "zero2" / "ckpt", ckpt)
    path = ckpt / "global_step2" / "mp_rank_00_model_states.pt"
    states = torch.load(path, weights_only=False)
    states["module"][name][index] += delta
    torch.save(states, path)
    return ckpt


def _dp_holding(step, name: str, element: int) -> int:
    """The dp rank whose fp32 partition holds element `element` of `name`, from ZeRO's param_shapes order and
    the partition sizes alone (the group's parameters end to end, with their alignment paddings, split into
    equal dp partitions), not from the slice mappings weightdiff reads."""
    shapes = torch.load(step / "mp_rank_00_model_states.pt", weights_only=False)["param_shapes"][0]
    files = sorted(step.glob("*zero_pp_rank_*_optim_states.pt"))
    first = torch.load(files[0], weights_only=False)["optimizer_state_dict"]
    paddings = first["param_alignment_paddings"][0]
    offset = 0
    for (key, shape), padding in zip(shapes.items(), paddings):
        if key == name:
            break
        offset += math.prod(shape) + padding
    size = first["single_partition_of_fp32_groups"][0].numel() + first["group_paddings"][0]
    return (offset + element) // size


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_weight_edited_after_the_save_is_found_with_its_index_and_dp_rank(ds_runs, tmp_path):
    ckpt = _zero2_with_edited_weight(ds_runs, tmp_path, "3.weight", (4, 40), 0.25)  # (5, 48)
    step = ckpt / "global_step2"
    code, report, errors = _report(ckpt)
    assert code == 1 and not errors
    found = _masters(report)
    assert list(found) == ["3.weight"]
    (piece,) = found["3.weight"]["pairs"]
    assert piece["first_index"] == [4, 40] and piece["n_differ"] == 1
    assert piece["dp"] == _dp_holding(step, "3.weight", 4 * 48 + 40)
    assert found["3.weight"]["where"] == f"dp={piece['dp']}"
    code, out, _ = _cli(["check", str(ckpt)])
    assert "1 of 240 elements differ from the fp32 master rounded to bfloat16 (first at index [4, 40]" in out
    assert "an edit of the weight is undone" in out


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_corrupted_master_is_found_where_deepspeeds_zero_to_fp32_sees_it(ds_runs, tmp_path):
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    ckpt = tmp_path / "ckpt"
    shutil.copytree(ds_runs / "zero2" / "ckpt", ckpt)
    before = get_fp32_state_dict_from_zero_checkpoint(str(ckpt))
    path = ckpt / "global_step2" / "bf16_zero_pp_rank_2_mp_rank_00_optim_states.pt"
    state = torch.load(path, weights_only=False)
    with torch.no_grad():
        state["optimizer_state_dict"]["single_partition_of_fp32_groups"][0][7] += 1.0
    torch.save(state, path)
    after = get_fp32_state_dict_from_zero_checkpoint(str(ckpt))
    changed = [(name, (before[name] != after[name]).nonzero()[0].tolist()) for name in before
               if not torch.equal(before[name], after[name])]
    assert len(changed) == 1  # DeepSpeed's own reconstruction: which parameter and element the edit hit
    name, index = changed[0]
    code, report, errors = _report(ckpt)
    assert code == 1 and not errors
    (piece,) = _masters(report)[name]["pairs"]
    assert piece["dp"] == 2 and piece["first_index"] == index and piece["n_differ"] == 1


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_unreadable_optimizer_file_is_said_and_the_other_ranks_are_still_checked(ds_runs, tmp_path):
    ckpt = _zero2_with_edited_weight(ds_runs, tmp_path, "0.weight", (0, 1), 0.5)  # on dp=0
    step = ckpt / "global_step2"
    damaged = step / "bf16_zero_pp_rank_3_mp_rank_00_optim_states.pt"
    damaged.write_bytes(damaged.read_bytes()[:200])
    code, out, errors = _cli(["check", str(ckpt)])
    assert code == 3 and len(errors) == 1 and damaged.name in errors[0]
    assert "master copy   FAIL" in out and "could not be read" in out
    assert "0.weight on dp=0" in out and "first at index [0, 1]" in out  # the readable ranks: still compared
    assert "not checked (never counted as equal):" in out and "(whole optimizer file) on dp=3" in out
    code, report, _ = _report(ckpt)
    partial = [u for u in report["unchecked"] if "elements have no readable master" in u["reason"]]
    assert partial and all(damaged.name in u["reason"] for u in partial)
    assert report["checked"][MASTER] + len({u["name"] for u in partial}) == 6  # every parameter accounted for


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_last_stages_tied_master_against_the_stored_first_stage_copy(ds_runs):
    code, report, _ = _report(ds_runs / "desync" / "ckpt")  # tied gradients never reduced: the copies drifted
    found = _masters(report)["tied_modules.embed.word_embeddings.weight"]
    assert code == 1 and found["where"].startswith("pp=1")
    assert all(p["compared_with_pp"] == 0 and p["pp"] == 1 for p in found["pairs"])
    assert "this stage stores no weight of its own" in found["detail"]
    assert "the two stages' copies differ" in found["detail"]
    code, report, _ = _report(ds_runs / "healthy" / "ckpt")
    assert code == 0 and not _masters(report)  # reduced tied gradients: pp=1's master is pp=0's copy


def test_megatron_float16_optimizer_masters(tmp_path):
    root = write_checkpoint(tmp_path / "meg", tp_size=2, pp_size=2, dp_size=2)
    code, out, errors = _cli(["check", str(root)])
    assert code == 0 and not errors and "master copy   ok    58 checked, 0 findings" in out
    path = rank_file(root, 2, tp=1, pp=1, pp_size=2)
    state = torch.load(path, weights_only=False)
    names = [n for n in state["model"] if n.endswith(".weight") and state["model"][n].dim() == 2]
    state["model"]["decoder.layers.0.mlp.linear_fc1.weight"][3, 5] += 0.125  # a weight edited after the save
    decay_group = state["optimizer"]["fp32_from_fp16_params"][0]  # the default group: 2-D weights, in order
    decay_group[names.index("output_layer.weight")][2, 7] -= 1.0  # a corrupted master
    torch.save(state, path)
    code, report, errors = _report(root)
    found = _masters(report)
    assert code == 1 and not errors and set(found) == {"decoder.layers.0.mlp.linear_fc1.weight", "output_layer.weight"}
    assert [(p["pp"], p["tp"], p["first_index"], p["n_differ"]) for p in found["output_layer.weight"]["pairs"]] == \
        [(1, 1, [2, 7], 1)]
    assert found["decoder.layers.0.mlp.linear_fc1.weight"]["pairs"][0]["first_index"] == [3, 5]
    assert found["output_layer.weight"]["where"] == "pp=1 tp=1"


def test_megatron_masters_that_cannot_be_matched_to_names_are_said(tmp_path):
    root = write_checkpoint(tmp_path / "meg", tp_size=1, pp_size=1, dp_size=1)
    path = rank_file(root, 2, tp=0, pp=0, pp_size=1)
    state = torch.load(path, weights_only=False)
    groups = state["optimizer"]["fp32_from_fp16_params"]
    groups[0], groups[1] = groups[1], groups[0]  # not Megatron's default grouping
    torch.save(state, path)
    code, out, errors = _cli(["check", str(root)])
    assert code == 2 and len(errors) == 1 and "its master copies are not checked" in errors[0]
    assert "master copy   INCOMPLETE  0 checked" in out
    assert "cannot be matched to parameter names" in out and "not checked (never counted as equal)" in out


def test_a_float16_megatron_checkpoint_without_masters_is_not_checked_never_ok(tmp_path):
    """Third sweep WD20: a bf16 Megatron checkpoint whose rank files hold no fp32_from_fp16_params (saved with
    --no-save-optim, or lost) said the master check "does not apply" (exit 0). Its weights are 16-bit: masters
    existed, they are not here, so the check could not be done (exit 2)."""
    root = write_checkpoint(tmp_path / "meg", tp_size=1, pp_size=1, dp_size=1)
    path = rank_file(root, 2, tp=0, pp=0, pp_size=1)
    state = torch.load(path, weights_only=False)
    del state["optimizer"]
    torch.save(state, path)
    code, out, errors = _cli(["check", str(root)])
    assert code == 2 and len(errors) == 1 and "holds no fp32 master copies" in errors[0], (out, errors)
