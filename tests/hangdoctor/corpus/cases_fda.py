"""First-contact batch fda (fifteenth first-contact round, part A): live cases from public programs and reports on
a per-rank token budget closing DDP's no_sync() window early, a postfix collective behind a per-rank tqdm refresh,
a checkpoint payload broadcast skipped on a cache hit, a hand-written 2-stage pipeline whose last stage skips a
NaN step (see each case.json); and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# DDP gradient accumulation closed on each rank's own token count (NVIDIA-NeMo/Automodel PR #2468, modelscope/FunASR
# PR #3472), 3 ranks: rank 1 (longer sequences) syncs 3 times where ranks 0 and 2 sync twice; rank 1 waits in its
# third gradient all_reduce, ranks 0 and 2 in the end-of-epoch barrier.
register(LiveCase("fda_ddp_token_budget_no_sync", torchrun(3, "fda_ddp_token_budget_no_sync.py"), ranks=3,
                  settle=2.0))

# DDP trainer whose tqdm postfix (a global rate between barriers) is recomputed only when pbar.update() refreshed
# (cusp-ai-oss/kUPS PR #234), 3 ranks: rank 1's bar refreshes first and it waits in the barrier alone; ranks 0 and 2
# in step 7's DDP gradient all_reduce.
register(LiveCase("fda_tqdm_refresh_barrier_postfix", torchrun(3, "fda_tqdm_refresh_barrier_postfix.py"), ranks=3,
                  settle=2.0))

# Checkpoint read on rank 0, length via broadcast_object_list, payload via broadcast on a gloo CPU group (meta-pytorch/
# tnt PR #936), 3 ranks: rank 2 skips the payload broadcast on a cache hit; rank 0 waits in the payload broadcast,
# ranks 1 and 2 in DDP's constructor.
register(LiveCase("fda_ckpt_bcast_len_cache_skip", torchrun(3, "fda_ckpt_bcast_len_cache_skip.py"), ranks=3,
                  settle=2.5))

# Hand-written 2-stage pipeline over blocking send/recv (tdrussell/diffusion-pipe#409), 2 ranks: the last stage
# skips a NaN-loss step without sending the gradient back; rank 0 waits in recv for the gradient, rank 1 in recv for
# the next activations.
register(LiveCase("fda_pipe2_nan_skip_backward", torchrun(2, "fda_pipe2_nan_skip_backward.py"), ranks=2, settle=2.0))


# Shape (NCCL, PP=4 TP=1 on 4 GPUs; PP=4 TP=2 on 8 H100s in the thread): dylanyunlon/Neuron_SP#51, a Megatron-style
# finalize_model_grads whose word-embedding gradient all_reduce over the embedding group (first and last stage) is
# guarded by is_pipeline_first_stage(): rank 0 waits in that all_reduce after step 0, the last stage (rank 3) printed
# step 0's loss and, with ranks 1-2, waits in iteration 1's recv_forward.
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fda_megatron_embed_grad_first_stage_only",
    in_tree("fda_megatron_embed_grad_first_stage_only",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 4 "
            "pretrain_gpt.py --pipeline-model-parallel-size 4 --tensor-model-parallel-size 1 --micro-batch-size 2 "
            "--global-batch-size 32 --num-layers 32 --hidden-size 4096 --train-iters 100"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fda_megatron_embed_grad_first_stage_only", str(LAUNCHERS)),
))
