"""First-contact batch Y (fourteenth first-contact round, part Y): live cases from public programs and reports on
an FSDP summon_full_params probe entered by rank 0 only, a sharded-optimizer step skipped by one rank's
try/except + continue, a cleanup barrier reached from an atexit handler by the rank whose shard ran out, ...
(see each case.json); and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# FSDP1 job whose end-of-epoch probe (model.eval() + no_grad forward under FSDP.summon_full_params) runs on rank 0
# only (pytorch/pytorch#101294, Lightning-AI/pytorch-lightning#17600), 3 ranks: rank 0 waits in summon_full_params'
# all-gather, ranks 1 and 2 in the epoch-end barrier.
register(LiveCase("fcy_fsdp_summon_rank0_eval", torchrun(3, "fcy_fsdp_summon_rank0_eval.py"), ranks=3, settle=2.0))

# DDP + ZeroRedundancyOptimizer, the optimizer step inside try/except that logs and continues
# (facebookresearch/mmf#1073), 3 ranks: rank 1 raises before step 2's optimizer.step(), continues, and waits in
# step 3's backward (DDP all-reduce); ranks 0 and 2 wait in step 2's ZeroRedundancyOptimizer parameter broadcast.
register(LiveCase("fcy_zero_opt_step_except_continue", torchrun(3, "fcy_zero_opt_step_except_continue.py"), ranks=3,
                  settle=2.0))

# DDP with uneven shards read by a next()/StopIteration loop, cleanup (barrier + destroy_process_group) in an atexit
# handler (pytorch/pytorch#75097), 3 ranks: rank 2's shard runs out after 3 batches, its atexit handler waits in
# dist.barrier(); ranks 0 and 1 wait in batch 3's backward (DDP all-reduce).
register(LiveCase("fcy_atexit_barrier_short_shard", torchrun(3, "fcy_atexit_barrier_short_shard.py"), ranks=3,
                  settle=2.0))

# Expert-parallel MoE with a hand-written all-to-all dispatcher, token counts exchanged on a CPU (gloo) group
# (pytorch/pytorch#117486; fairscale MOELayer / Megatron alltoall dispatcher shape), 3 ranks: rank 1's tokens
# overflow one expert's capacity, it drops the overflow and redoes the count all_to_all alone; ranks 0 and 2 wait in
# the token all_to_all_single.
register(LiveCase("fcy_moe_a2a_overflow_recount", torchrun(3, "fcy_moe_a2a_overflow_recount.py"), ranks=3,
                  settle=2.0))


# Shape (NCCL, 4 GPUs, Lightning's subprocess launcher): Lightning-AI/pytorch-lightning#20187, OnExceptionCheckpoint
# under DDP: rank 2's training_step raises at step 3; Trainer.fit's interrupt handling runs on_exception, whose
# save_checkpoint waits in the strategy barrier; ranks 0, 1, 3 queued step 3's gradient all-reduce and block in the
# logger connector's Tensor.item (convert_tensors_to_scalars).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fcy_lightning_on_exception_ckpt",
    in_tree("fcy_lightning_on_exception_ckpt", f"{shlex.quote(PYTHON)} train.py"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcy_lightning_on_exception_ckpt"),
))
