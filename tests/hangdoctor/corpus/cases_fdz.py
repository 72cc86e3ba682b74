"""First-contact batch fdz (twenty-sixth first-contact round, part Z): live communication mismatches from public
programs and reports (see each case.json): a collective nested in a callback only the leader runs while the others
wait in the broadcast of its result, a loss-side reduce_mean skipped by the rank with no positive sample, a
gradient-norm all_reduce on the model-parallel group on one rank and the world on the others, and a pipeline whose
first stage counts its micro-batches from a short last batch while the later stages loop a configured count."""

import socket
from pathlib import Path

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

DS_ENV = {"DS_ACCELERATOR": "cpu"}


def _free_port() -> str:
    """The `deepspeed` runner has no standalone rendezvous: a port nobody holds now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])

# torchrec-style invoke_on_rank_and_broadcast_result with a world all_reduce inside the leader's planner
# (meta-pytorch/torchrec#3278): rank 0 in all_reduce (world), ranks 1-2 in broadcast_object_list (sharding group).
register(LiveCase("fdz_torchrec_plan_bcast_nested_allreduce", torchrun(3, "fdz_torchrec_plan_bcast_nested_allreduce.py"),
                  ranks=3, settle=2.0))

# reduce_mean under `if len(pos) > 0` (open-mmlab/mmdetection#4724), 4 ranks: rank 3 has no positive sample and goes
# into backward; ranks 0-2 in the reduce_mean all_reduce on the statistics group.
register(LiveCase("fdz_mmdet_loss_reduce_mean_no_pos", torchrun(4, "fdz_mmdet_loss_reduce_mean_no_pos.py"), ranks=4,
                  settle=2.0))

# grad-norm group chosen by the optimizer kind (NVIDIA/Megatron-LM#2263), TP 2 x DP 2: rank 3 reduces over its
# model-parallel group {2,3}, ranks 0-2 over the world.
register(LiveCase("fdz_grad_norm_mp_group_vs_world", torchrun(4, "fdz_grad_norm_mp_group_vs_world.py"), ranks=4,
                  settle=2.0))

# micro-batch count from len(microbatches) on stage 0 only (pytorch/PiPPy PR #964): stage 0 sends 3 for the short last
# batch and waits in the epoch-end all_reduce; stages 1-2 wait in recv for a 4th.
register(LiveCase("fdz_pipe_stage0_len_microbatches", torchrun(3, "fdz_pipe_stage0_len_microbatches.py"), ranks=3,
                  settle=2.0))

# loss all_reduce deferred to log time (modelscope/ms-swift PR #9966), log time counted in local tokens: rank 1 (longer
# sequences) alone issues the async all_reduce and waits on it; ranks 0 and 2 wait in step 4's backward.
register(LiveCase("fdz_deferred_loss_log_local_tokens", torchrun(3, "fdz_deferred_loss_log_local_tokens.py"), ranks=3,
                  settle=2.0))

# `deepspeed` launcher, ZeRO-1, comms logger on; rank 0 alone calls deepspeed.comm.log_summary(show_straggler=True)
# (deepspeedai/DeepSpeed#7397): rank 0 in its world barrier, ranks 1-2 in step 4's ZeRO gradient all-reduce.
register(LiveCase("fdz_ds_comms_log_summary_rank0",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/fdz_ds_comms_log_summary_rank0.py"), ranks=3, env=DS_ENV, settle=2.0))
