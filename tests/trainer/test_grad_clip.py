"""The ZeRO-0 clipper: its counting rules and arithmetic, in one process (real runs: test_parallel_equivalence)."""

import copy

import torch
from torch import nn

from hangdoctor.topology import ParallelDims
from trainer.config import TrainConfig
from trainer.engine import ds_config
from trainer.grad_clip import GlobalGradClipper, counts_on_this_rank
from trainer.model import GPTShape
from trainer.reference import ReferenceGPT


def param_with_grad(values, **marks) -> nn.Parameter:
    param = nn.Parameter(torch.zeros(len(values)))
    param.grad = torch.tensor(values)
    for key, value in marks.items():
        setattr(param, key, value)
    return param


def test_counts_split_params_everywhere_replicated_ones_on_tp_rank_0_and_tied_copies_never():
    split = param_with_grad([3.0], tensor_model_parallel=True)
    replicated = param_with_grad([4.0], tensor_model_parallel=False)
    tied_copy = param_with_grad([12.0], tensor_model_parallel=True, ds_pipe_replicated=True)
    assert [counts_on_this_rank(p, tp_rank=0) for p in (split, replicated, tied_copy)] == [True, True, False]
    assert [counts_on_this_rank(p, tp_rank=1) for p in (split, replicated, tied_copy)] == [True, False, False]
    on_tp0 = GlobalGradClipper([split, replicated, tied_copy], max_norm=0.0, tp_rank=0, group=None)
    assert on_tp0.clip() == 5.0 and split.grad.item() == 3.0, "max_norm 0: the norm is recorded, nothing is clipped"
    on_tp1 = GlobalGradClipper([split, replicated, tied_copy], max_norm=1.0, tp_rank=1, group=None)
    assert on_tp1.clip() == 3.0 and on_tp1.last_norm == 3.0
    assert torch.allclose(torch.cat([split.grad, replicated.grad, tied_copy.grad]),
                          torch.tensor([3.0, 4.0, 12.0]) / (3.0 + 1e-6)), "every local gradient is scaled, copies too"


def test_one_process_norm_and_clipping_equal_torch_clip_grad_norm():
    shape = GPTShape(vocab=128, hidden=32, heads=4, seq=8, layers=2, embed_layernorm=True, seed=7)
    ours = ReferenceGPT(shape)
    tokens = torch.arange(16).view(2, 8) % 128
    ours(tokens).float().pow(2).mean().backward()
    theirs = copy.deepcopy(ours)  # deepcopy leaves .grad behind
    for a, b in zip(ours.parameters(), theirs.parameters()):
        b.grad = a.grad.clone()
    expected = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.05)
    got = GlobalGradClipper(ours.parameters(), max_norm=0.05, tp_rank=0, group=None).clip()
    assert expected > 0.05
    torch.testing.assert_close(torch.tensor(got), expected, rtol=1e-6, atol=0)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-6, atol=0)


def test_deepspeed_clips_only_with_zero_1():
    dims = ParallelDims(tp=1, pp=2, dp=1)
    assert ds_config(TrainConfig(zero_stage=1, clip_grad=0.5), dims)["gradient_clipping"] == 0.5
    assert ds_config(TrainConfig(zero_stage=0, clip_grad=0.5), dims)["gradient_clipping"] == 0.0
