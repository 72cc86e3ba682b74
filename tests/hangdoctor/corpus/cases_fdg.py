"""First-contact batch fdg (eighteenth first-contact round, part A): live and shape cases from public programs and
reports (see each case.json)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# Context-parallel state passing (blocking send/recv autograd functions) inside a non-reentrant activation
# checkpoint (ByteDance-Seed/VeOmni PR #1076 review), 2 ranks: rank 1's backward recomputes its checkpointed block,
# whose StateRecv posts a second recv from rank 0; rank 0 waits in StateSend.backward's recv of the gradient from
# rank 1.
register(LiveCase("fdg_cp_ckpt_recompute_recv", torchrun(2, "fdg_cp_ckpt_recompute_recv.py"), ranks=2, settle=2.0))

# DDP gradient accumulation through no_sync() with an end-of-dataloader flush (FunASR PR #3472's trainer condition,
# accelerate's sync at the end of the dataloader) over rank-dependent dataloader lengths (mosaicml/composer#3415),
# 3 ranks: rank 1's loader has 13 batches, the others 12; its end-of-loader flush issues a fourth gradient
# all-reduce (DDP backward); ranks 0 and 2 wait in the barrier before rank 0's checkpoint save.
register(LiveCase("fdg_accum_end_of_loader_sync", torchrun(3, "fdg_accum_end_of_loader_sync.py"), ranks=3,
                  settle=2.0))

# submitit-style SIGUSR2 handler that checkpoints and, on global rank 0, runs `scontrol requeue` through
# subprocess.check_call without a timeout (facebookincubator/submitit PR #1713; Azure/cyclecloud-slurm PR #233),
# 3 ranks: rank 0 waits in Popen.wait for a scontrol that never exits (a stand-in on PATH); ranks 1 and 2 carried on
# and wait in step 3's DDP gradient all-reduce.
register(LiveCase("fdg_sigusr2_scontrol_requeue", torchrun(3, "fdg_sigusr2_scontrol_requeue.py"), ranks=3,
                  settle=2.0))

# DDP trainer that resumes from a torch.distributed.checkpoint folder with the torch.load habit, on rank 0 only, while
# ranks 1-2 wait in a barrier (deepspeedai/DeepSpeed PR #801: a collective checkpoint call made on rank 0 alone),
# 3 ranks: rank 0 waits in dcp.load's plan gather (gather_object's all_gather); ranks 1 and 2 in the barrier.
register(LiveCase("fdg_dcp_resume_rank0_load", torchrun(3, "fdg_dcp_resume_rank0_load.py"), ranks=3, settle=2.5))

# Shape (marin-community/marin#8534, JAX on GB200, 704 processes): after a restore, every process waits at the
# post-restore barrier (multihost_utils.sync_global_devices, a device all-gather with no timeout) except one whose
# TensorStore S3 read stalled. Four stand-in processes started by the cluster's shell (no Python launcher): process 2
# waits in its read's Future.result(); processes 0, 1, 3 in sync_global_devices.
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import shape_env, tree  # noqa: E402
from tests.support import PYTHON  # noqa: E402

_JAX = "fdg_jax_restore_barrier_stalled_read"
register(LiveCase(
    _JAX,
    ("sh", "-c", f"cd {shlex.quote(tree(_JAX))}\n"
     + "".join(f"HD_PROCESS_ID={i} HD_PROCESS_COUNT=4 {shlex.quote(PYTHON)} experiments/grug/train.py &\n"
               for i in range(4))
     + "wait"),
    ranks=4, shape=True, settle=2.0, env=shape_env(_JAX)))
