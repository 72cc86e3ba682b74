"""Each injected fault shows its symptom in a real DeepSpeed run (see docs/faults.md for what a user sees)."""

import subprocess
import time

import psutil
import pytest
import torch

from tests.support import child_env, kill_tree
from tests.trainer.dumps import tensors, weight_decay_of
from tests.trainer_runs import MODEL, torchrun_command

TIED = "tied_modules.embed.word_embeddings.weight"
NORM_WEIGHT, NORM_BIAS = "tied_modules.embed.norm.weight", "tied_modules.embed.norm.bias"


@pytest.mark.slow
def test_healthy_tied_copies_stay_identical_on_first_and_last_stage(trainer_runs):
    weights = trainer_runs.get("pp2dp2_save").weights  # ranks 0-1 are pp=0, ranks 2-3 are pp=1
    for iteration in range(1, 7):
        for dp in range(2):
            first = tensors(weights, iteration=iteration, tag="after", rank=dp)
            last = tensors(weights, iteration=iteration, tag="after", rank=2 + dp)
            for name in (TIED, NORM_WEIGHT, NORM_BIAS):
                assert torch.equal(first[name], last[name]), f"{name} differs at iteration {iteration}, dp={dp}"


@pytest.mark.slow
def test_no_tied_grad_reduce_lets_the_tied_copies_drift_apart(trainer_runs):
    weights = trainer_runs.get("tied_alias_straggler").weights  # rank 0 is pp=0, rank 1 is pp=1
    drift = [
        (tensors(weights, iteration=i, tag="after", rank=0)[TIED]
         - tensors(weights, iteration=i, tag="after", rank=1)[TIED]).abs().max().item()
        for i in range(1, 5)
    ]
    assert drift[0] > 0, "one step without the tied all-reduce already separates the copies"
    assert drift[-1] > drift[0], f"the copies keep drifting: {drift}"


@pytest.mark.slow
def test_layernorm_alias_puts_the_embedding_norm_in_the_decay_group(trainer_runs):
    faulty = trainer_runs.get("tied_alias_straggler").weights
    healthy = trainer_runs.get("pp2dp2_save").weights
    assert weight_decay_of(faulty, iteration=1, tag="after", rank=0, name=NORM_WEIGHT) == pytest.approx(0.1)
    assert weight_decay_of(faulty, iteration=1, tag="after", rank=0, name=NORM_BIAS) == 0.0
    assert weight_decay_of(healthy, iteration=1, tag="after", rank=0, name=NORM_WEIGHT) == 0.0


@pytest.mark.slow
def test_straggler_is_slow_but_finishes(trainer_runs):
    run = trainer_runs.get("tied_alias_straggler")
    assert run.result.returncode == 0
    elapsed = run.elapsed_ms()
    assert sorted(elapsed) == [1, 2, 3, 4]
    assert elapsed[3] >= 2000, f"rank 1 slept 2 s inside iteration 3's forward pass: {elapsed}"


@pytest.mark.slow
def test_embed_norm_not_saved_brings_the_last_stage_norm_back_at_its_defaults(trainer_runs):
    saved = trainer_runs.get("pp2dp2_save").weights
    faulty = trainer_runs.get("pp2dp2_resume_embed_norm_not_saved").weights
    healthy = trainer_runs.get("pp2dp2_resume").weights
    for rank, last_stage in ((0, False), (1, False), (2, True), (3, True)):
        before_save = tensors(saved, iteration=4, tag="after", rank=rank)
        assert not torch.equal(before_save[NORM_WEIGHT], torch.ones_like(before_save[NORM_WEIGHT])), "it trained"
        after_faulty_load = tensors(faulty, iteration=5, tag="before", rank=rank)
        after_healthy_load = tensors(healthy, iteration=5, tag="before", rank=rank)
        assert torch.equal(after_healthy_load[NORM_WEIGHT], before_save[NORM_WEIGHT])
        if last_stage:
            assert torch.equal(after_faulty_load[NORM_WEIGHT], torch.ones_like(before_save[NORM_WEIGHT]))
            assert torch.equal(after_faulty_load[NORM_BIAS], torch.zeros_like(before_save[NORM_BIAS]))
        else:
            assert torch.equal(after_faulty_load[NORM_WEIGHT], before_save[NORM_WEIGHT])


@pytest.mark.slow
def test_skip_loss_broadcast_hangs_until_the_process_group_timeout(trainer_runs):
    run = trainer_runs.get("hang_pp2")
    assert run.result.returncode != 0
    err = run.result.stderr
    assert "Error: rank 0 (pp=0 dp=0 tp=0) at iteration 2:" in err, err[-3000:]
    assert "Timed out waiting 10000ms" in err
    assert sorted(run.losses()) == [1, 2], "the last stage logs iteration 2, then waits for iteration 3's input"


@pytest.mark.slow
def test_dead_rank_kills_itself_at_its_iteration(trainer_runs):
    run = trainer_runs.get("dead_rank")
    assert run.result.returncode != 0
    assert "exitcode  : -9" in run.result.stderr, run.result.stderr[-3000:]
    assert sorted(run.losses()) == [1]


@pytest.mark.slow
def test_sigstop_leaves_the_rank_stopped(tmp_path):
    args = ["--pp", "2", "--train-iters", "4", "--pg-timeout", "60", *MODEL, "--fault", "sigstop:rank=1,iteration=2"]
    proc = subprocess.Popen(torchrun_command(2, tmp_path / "run", args), env=child_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        stopped = None
        deadline = time.monotonic() + 120
        while stopped is None and time.monotonic() < deadline and proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                try:
                    if child.status() == psutil.STATUS_STOPPED:
                        stopped = child.environ().get("RANK")
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.5)
        assert stopped == "1", "rank 1 should be in state T (stopped) at iteration 2"
    finally:
        kill_tree(proc.pid)
        proc.wait(timeout=30)
