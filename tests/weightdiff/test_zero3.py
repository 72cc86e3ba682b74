"""DeepSpeed ZeRO stage 3 checkpoints, made by DeepSpeed's own save path on 2 gloo ranks (zero3_save.py), read
by weightdiff: the weights rebuilt from the fp32 partitions must be exactly what DeepSpeed's own zero_to_fp32
makes of them; a model-states file alone, or a folder missing an optimizer partition, is never SAME (issue 31)."""

from __future__ import annotations

import shutil
import sys

import pytest
import torch

from tests.support import REPO, child_env, run_bounded
from tests.weightdiff.cli_run import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _cli(argv):
    code, out, _, errors = run_cli(argv)
    return code, out, errors


@pytest.fixture(scope="module")
def zero3(tmp_path_factory):
    out = tmp_path_factory.mktemp("zero3")
    done = run_bounded([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(REPO / "tests" / "weightdiff" / "zero3_save.py"), str(out / "ckpt")],
                       timeout=300, env=child_env(DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1"), cwd=REPO)
    assert done.returncode == 0, done.output[-4000:]
    from deepspeed.utils.zero_to_fp32 import convert_zero_checkpoint_to_state_dict

    convert_zero_checkpoint_to_state_dict(str(out / "ckpt"), str(out / "fp32"), tag="global_step3",
                                          max_shard_size=None, safe_serialization=True)
    return out


def test_the_rebuilt_weights_are_what_zero_to_fp32_makes_of_them(zero3):
    code, out, errors = _cli([str(zero3 / "ckpt" / "global_step3"), str(zero3 / "fp32")])
    assert code == 0 and not errors and "8 tensors equal" in out and "SAME" in out, out  # 6, the frozen one, the buffer


def test_two_steps_differ_in_every_parameter_and_the_buffer_not(zero3):
    code, out, errors = _cli([str(zero3 / "ckpt" / "global_step1"), str(zero3 / "ckpt" / "global_step3")])
    assert code == 1 and not errors, out
    for name in ("emb.weight", "fc1.weight", "fc1.bias", "norm.weight", "fc2.weight", "fc2.bias"):
        assert f"{name}  differs" in out, out
    assert "scale" not in out and "norm.bias" not in out  # the buffer and the frozen parameter did not move


def test_one_element_changed_in_the_second_ranks_partition_is_found_exactly(zero3, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(zero3 / "ckpt" / "global_step3", ckpt)
    path = ckpt / "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    state = torch.load(path, weights_only=False)  # our own file, made above
    with torch.no_grad():  # rank 1's first element: emb.weight's element 233 (465 elements, 233 on each rank)
        state["optimizer_state_dict"]["fp32_flat_groups"][0][0] += 1.0
    torch.save(state, path)
    code, out, errors = _cli([str(zero3 / "ckpt" / "global_step3"), str(ckpt)])
    assert code == 1 and not errors and "1. emb.weight" in out, out
    assert "  2. " not in out and "first at index [15, 8]" in out, out  # element 233 = 15 * 15 + 8


def test_a_model_states_file_alone_is_refused_not_same(zero3):
    step1 = zero3 / "ckpt" / "global_step1" / "zero_pp_rank_0_mp_rank_00_model_states.pt"
    step3 = zero3 / "ckpt" / "global_step3" / "zero_pp_rank_0_mp_rank_00_model_states.pt"
    code, out, errors = _cli([str(step1), str(step3)])
    assert code == 2 and len(errors) == 1 and "size-0 placeholders" in errors[0] and "SAME" not in out


def test_a_missing_optimizer_partition_is_incomplete_never_same(zero3, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(zero3 / "ckpt" / "global_step3", ckpt)
    (ckpt / "zero_pp_rank_1_mp_rank_00_optim_states.pt").unlink()
    code, out, errors = _cli([str(zero3 / "ckpt" / "global_step3"), str(ckpt)])
    assert code != 0 and "SAME" not in out and any("zero_pp_rank_1_mp_rank_00_optim_states.pt missing" in e
                                                    for e in errors), (out, errors)


def test_a_frozen_parameter_is_rebuilt_from_its_fragments(zero3, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(zero3 / "ckpt" / "global_step3", ckpt)
    path = ckpt / "zero_pp_rank_1_mp_rank_00_model_states.pt"
    state = torch.load(path, weights_only=False)  # our own file, made above
    fragment = state["frozen_param_fragments"]["norm.bias"]
    assert fragment.numel() == 12  # ceil(23 / 2): rank 1 holds elements 12-22 and one of padding
    with torch.no_grad():
        fragment[0] += 1.0  # norm.bias[12]
    torch.save(state, path)
    code, out, errors = _cli([str(zero3 / "ckpt" / "global_step3"), str(ckpt)])
    assert code == 1 and not errors and "1. norm.bias" in out and "first at index [12]" in out, out
