"""First-contact batch W (thirteenth first-contact round, part W): live cases from public programs and reports on a
retry decorator that re-runs a world all_reduce on one rank of a TP x DP layout, a Lightning logger posting to a
tracking server with no timeout, a future's done-callback re-taking a non-reentrant lock, an in-process restart
that re-enters rendezvous alone (see each case.json); and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# TP=2 x DP=2 on 4 ranks, the loss reduced over the world inside a function under a retry decorator
# (sql-machine-learning/elasticdl PR #2446, PrimeIntellect-ai/prime-diloco PR #53): rank 2's metrics write fails
# once at step 3 and the decorator re-runs the world all_reduce; ranks 0, 1 (step 4) and 2 (step 3, retry) wait in
# the world all_reduce, rank 3 in its tensor-parallel all_reduce.
register(LiveCase("fcw_tp_retry_allreduce_ahead", torchrun(4, "fcw_tp_retry_allreduce_ahead.py"), ranks=4,
                  settle=2.0))

# Lightning DDP with a custom Logger posting metrics to an MLflow-style REST endpoint with no timeout (mlflow/mlflow#2776,
# #1760; huggingface/transformers PR #28779), the server a listening socket that never answers, 3 ranks: rank 0 waits
# in http.client reading the response at step 3's log; ranks 1 and 2 in batch 3's SIGTERM-flag broadcast.
register(LiveCase("fcw_lightning_http_logger_no_timeout", torchrun(3, "fcw_lightning_http_logger_no_timeout.py"),
                  ranks=3, settle=3.0))

# DDP with rank-0-only checkpoint bookkeeping: a non-reentrant Lock held across Future.set_result whose done-callback
# takes the same lock (google/ml-compiler-opt PR #108, amoffat/sh#564), 3 ranks: rank 0's main thread blocks on its
# own lock in the callback; ranks 1 and 2 wait in the barrier after the save.
register(LiveCase("fcw_future_callback_lock_reentry", torchrun(3, "fcw_future_callback_lock_reentry.py"), ranks=3,
                  settle=2.0))

# Data-parallel trainer with a home-made in-process restart (NVIDIA/nvidia-resiliency-ext#143, pytorch/pytorch#55967),
# 4 ranks: rank 2's step 3 raises, it re-enters rendezvous on the job's store and waits for the others to join the
# restart round; ranks 0, 1 and 3 wait in step 3's gradient all_reduce of the old group.
register(LiveCase("fcw_inprocess_restart_rejoin", torchrun(4, "fcw_inprocess_restart_rejoin.py"), ranks=4,
                  settle=2.0))


# Shape: DeepSpeed ZeRO-3 with the optimizer offloaded to the CPU, a Qwen3-MoE 30B-A3B on 8 GPUs with no ZeRO-3 leaf
# module on the sparse MoE block (deepspeedai/DeepSpeed#7461's py-spy dumps): 3 ranks wait in step()'s gradient-norm
# all_reduce (complete_grad_norm_calculation_for_cpu_offload), 5 in backward's reduce_scatter_coalesced.
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fcw_ds_zero3_qwen3_moe_norm_split",
    in_tree("fcw_ds_zero3_qwen3_moe_norm_split",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 8 train.py"),
    ranks=8, shape=True, settle=2.0, env=shape_env("fcw_ds_zero3_qwen3_moe_norm_split", str(LAUNCHERS)),
))
