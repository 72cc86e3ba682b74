"""Checkpoint save and --resume in fresh processes continue the run exactly (PP=2 x DP=2, ZeRO-1)."""

import pytest
import torch

from tests.trainer.dumps import tensors


@pytest.mark.slow
def test_resume_gives_exactly_the_next_losses_of_an_uninterrupted_run(trainer_runs):
    uninterrupted = trainer_runs.get("pp2dp2_save").losses()
    resumed = trainer_runs.get("pp2dp2_resume").losses()
    assert sorted(uninterrupted) == [1, 2, 3, 4, 5, 6]
    assert sorted(resumed) == [5, 6], "the resumed run starts after the checkpoint of iteration 4"
    assert resumed[5] == uninterrupted[5] and resumed[6] == uninterrupted[6]


@pytest.mark.slow
def test_resume_restores_every_parameter_of_every_rank(trainer_runs):
    saved, resumed = trainer_runs.get("pp2dp2_save").weights, trainer_runs.get("pp2dp2_resume").weights
    for rank in range(4):
        before_save = tensors(saved, iteration=4, tag="after", rank=rank)
        after_load = tensors(resumed, iteration=5, tag="before", rank=rank)
        assert before_save.keys() == after_load.keys()
        for name in before_save:
            assert torch.equal(before_save[name], after_load[name]), f"rank {rank}: {name} changed across save/load"
