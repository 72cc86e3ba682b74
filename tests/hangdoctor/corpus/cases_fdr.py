"""First-contact batch fdr (twenty-second first-contact round): live cases from public programs and reports (see
each case.json). New to the corpus: PyTorch-Ignite (idist.Parallel: the script's process spawns the ranks), a
cross-rank lock-order deadlock on lock files, a DeepSpeed FlopsProfiler forward under ZeRO-3, accelerate's
even_batches=False, a streaming loader spinning without yielding, and Composer-style rank-zero callbacks."""

import socket
from pathlib import Path

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

DS_ENV = {"DS_ACCELERATOR": "cpu"}


def _free_port() -> str:
    """`accelerate launch` and the `deepspeed` runner have no standalone rendezvous: a port nobody holds now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


# PyTorch-Ignite under idist.Parallel(backend="gloo", nproc_per_node=3) (pytorch/ignite PR #882, #659): an
# @idist.one_rank_only() handler all_reduces the running loss; rank 0 waits in it, ranks 1-2 in the next backward.
register(LiveCase("fdr_ignite_one_rank_only_allreduce", (PYTHON, "{fixtures}/fdr_ignite_one_rank_only_allreduce.py"),
                  ranks=3, settle=2.0))

# torchmetrics BinaryAUROC(dist_sync_on_step=True) skipped on a single-class batch (Lightning-AI/pytorch-lightning
# #5865, #5604): ranks 0-1 wait in the metric's step sync, rank 2 in the backward.
register(LiveCase("fdr_torchmetrics_sync_on_step_skip_update", torchrun(3, "fdr_torchmetrics_sync_on_step_skip_update.py"),
                  ranks=3, settle=2.0))

# A sectioned on-disk feature cache with a statistics lock and an eviction that locks every section
# (frerich/clcache PR #217): ranks 0 and 1 deadlock on each other's lock files, rank 2 waits in the barrier.
register(LiveCase("fdr_filelock_cache_section_stats_abba", torchrun(3, "fdr_filelock_cache_section_stats_abba.py"),
                  ranks=3, settle=2.5))

# DeepSpeed ZeRO-3 under the `deepspeed` launcher, a FlopsProfiler forward on rank 0 only
# (deepspeedai/DeepSpeedExamples#344): rank 0 in the parameter all-gather, ranks 1-2 in the step's barrier.
register(LiveCase("fdr_ds_zero3_rank0_profiled_forward",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/fdr_ds_zero3_rank0_profiled_forward.py"), ranks=3, env=DS_ENV, settle=2.0))

# accelerate launch, evaluation with even_batches=False and gather_for_metrics per batch (huggingface/accelerate
# #684, PR #820): 8 batches over 3 processes; process 2 waits in wait_for_everyone, 0-1 in the third gather.
register(LiveCase("fdr_accel_even_batches_false_eval_gather",
                  (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "3",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", _free_port(), "{fixtures}/fdr_accel_even_batches_false_eval_gather.py"),
                  ranks=3, settle=2.0))

# A 2020-Trainer-style store_flos (all_gather) under is_world_master in the checkpoint path (huggingface/transformers
# PR #7365): rank 0 in the all_gather, ranks 1-2 in the barrier after the checkpoint.
register(LiveCase("fdr_trainer_store_flos_world_master", torchrun(3, "fdr_trainer_store_flos_world_master.py"),
                  ranks=3, settle=2.0))

# nanochat-style streaming loader whose file index is never reset (karpathy/nanochat#360, #371): rank 2 spins in
# the loader's `while True` without yielding, ranks 0-1 wait in the backward.
register(LiveCase("fdr_nanochat_loader_pq_idx_spin", torchrun(3, "fdr_nanochat_loader_pq_idx_spin.py"), ranks=3,
                  settle=2.0))

# Composer-style engine: a grad-norm monitor derived from RankZeroCallback calls a dist helper (mosaicml/composer
# #239): rank 0 in its all_reduce, ranks 1-2 in the checkpoint callback's barrier.
register(LiveCase("fdr_composer_rank_zero_callback_dist", torchrun(3, "fdr_composer_rank_zero_callback_dist.py"),
                  ranks=3, settle=2.0))
