"""First-contact batch fee (twenty-eighth first-contact round, part E): live hangs from public reports (see each
case.json): wait_for_everyone() inside accelerate's main-process-only checkpoint branch, a main-process-only
evaluation through the DDP wrapper whose buffer broadcast nobody else joins (accelerate), a Lightning Fabric
make_dataset() whose barrier rank 0 returns before, a step barrier over an uneven file split (dlio-style), and uneven hand-made shards under Lightning's Trainer."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# wait_for_everyone() inside the main-process-only checkpoint branch (bytedance/UNO#71): rank 0 in the barrier;
# ranks 1-2 in step 3's backward (DDP all-reduce over the world).
register(LiveCase("fee_accel_ckpt_wait_inside_main_branch", torchrun(3, "fee_accel_ckpt_wait_inside_main_branch.py"),
                  ranks=3, settle=2.0))

# single-process evaluation through the DDP wrapper (huggingface/accelerate#2081): rank 0 in DDP's buffer broadcast
# (BatchNorm statistics) inside model(image); ranks 1-2 in wait_for_everyone().
register(LiveCase("fee_accel_main_only_eval_bn_buffers", torchrun(3, "fee_accel_main_only_eval_bn_buffers.py"),
                  ranks=3, settle=2.0))

# make_dataset() returns on rank 0 before the fabric.barrier() (Lightning-AI/pytorch-lightning#20536): rank 0 in
# fabric.setup (DDP construction collectives); ranks 1-2 in fabric.barrier().
register(LiveCase("fee_fabric_make_dataset_rank0_return", torchrun(3, "fee_fabric_make_dataset_rank0_return.py"),
                  ranks=3, settle=2.0))

# contiguous file split, full batches only, a step barrier (argonne-lcf/dlio_benchmark PR #339): rank 2 (one step
# short per epoch) in the final all_gather_object; ranks 0-1 in their fifth step barrier.
register(LiveCase("fee_step_barrier_uneven_file_split", torchrun(3, "fee_step_barrier_uneven_file_split.py"),
                  ranks=3, settle=2.0))

# hand-sharded training data of uneven length under Lightning's Trainer (Lightning-AI/pytorch-lightning#9851):
# rank 1 (3 batches) in ModelCheckpoint's reduce_boolean_decision barrier; rank 0 in the per-batch SIGTERM broadcast
# it roots; rank 2 in the fourth batch's backward (DDP all-reduce).
register(LiveCase("fee_lightning_uneven_batches_epoch_end", torchrun(3, "fee_lightning_uneven_batches_epoch_end.py"),
                  ranks=3, settle=3.0))
