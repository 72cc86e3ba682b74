"""First-contact batch ffi (forty-second first-contact round, part I): live hangs from PyTorch's own distributed
stack (see each case.json): FSDP2 blocks with a LayerDrop coin drawn from a rank-seeded generator (one rank skips a
block's all-gather and meets the others' forward in its backward reduce-scatter), a DTensor orthogonal init whose
distribute_tensor runs on the rank that built the matrix only (DTensor's scatter against the first forward's
all_reduce), a blended IterableDataset whose DataLoader worker spins on an empty sub-source of one rank's shard, a
torch.distributed.checkpoint save retried by the one rank whose shard write failed (DCP's planning collective against
the others' next backward), and a task stream kept in a c10d TCPStore whose exhausted ranks sleep-poll for 'maybe more
later' while the last task's step waits for them in all_reduce."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# LayerDrop under FSDP2 (facebookresearch/fairscale#796): rank 1 drops block 2 at step 1 and waits in its backward
# reduce-scatter; ranks 0 and 2 in block 3's forward all-gather.
register(LiveCase("ffi_fsdp2_layerdrop_rank_seeded", torchrun(3, "ffi_fsdp2_layerdrop_rank_seeded.py"), ranks=3,
                  settle=2.0))

# orthogonal_ for a DTensor built on one rank (pytorch/pytorch#131991): rank 0 alone in distribute_tensor's scatter;
# ranks 1-2 wait on the forward's row-parallel all_reduce (functional collective wait).
register(LiveCase("ffi_dtensor_orthogonal_init_rank0_distribute",
                  torchrun(3, "ffi_dtensor_orthogonal_init_rank0_distribute.py"), ranks=3, settle=2.0))

# blended IterableDataset with an empty sub-source on one rank (NVIDIA/Megatron-Energon PR #6): rank 2's DataLoader
# worker spins restarting the empty shard; rank 2 waits for its third batch; ranks 0-1 in DDP backward.
register(LiveCase("ffi_blend_loader_worker_empty_source_spin",
                  torchrun(3, "ffi_blend_loader_worker_empty_source_spin.py"), ranks=3, settle=2.0))

# rank-local retry of a failed dcp.save (InternLM/xtuner PR #1852): rank 1 in the retried save's gather of plans;
# ranks 0 and 2 skipped the checkpoint and wait in the next step's DDP backward.
register(LiveCase("ffi_dcp_save_rank_local_retry", torchrun(3, "ffi_dcp_save_rank_local_retry.py"), ranks=3,
                  settle=2.0))

# task stream in a TCPStore that waits for 'maybe more later' (sql-machine-learning/elasticdl#1895): ranks 1-2 sleep
# between polls of the store; rank 0's last task waits in DDP backward.
register(LiveCase("ffi_store_task_queue_maybe_more_later", torchrun(3, "ffi_store_task_queue_maybe_more_later.py"),
                  ranks=3, settle=2.0))
