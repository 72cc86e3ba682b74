"""First-contact batch fff (forty-first first-contact round, part F): live hangs from PyTorch's own distributed stack
(see each case.json): a rank-0-only validation through the DDP wrapper (its buffer broadcast against the others'
barrier), spawned workers that each pick their own MASTER_PORT (TCPStore rendezvous), a torch.futures callback run
inline under the lock that attached it, a ceil-partitioned utterance list that leaves the last rank short, and a
class-stratified subsample whose refill loop spins on a rank whose shard lacks a class."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# DDP validation on rank 0 through the wrapper (discuss.pytorch.org t/114522): rank 0 in the forward's buffer
# broadcast, ranks 1-2 in the barrier after validation.
register(LiveCase("fff_ddp_rank0_val_forward_buffer_bcast", torchrun(3, "fff_ddp_rank0_val_forward_buffer_bcast.py"),
                  ranks=3, settle=2.0))

# mp.spawn workers each picking a free MASTER_PORT (pytorch/pytorch#53395): rank 0's TCPStore server waits for
# workers, ranks 1-2 retry connecting to ports nobody serves; the parent waits in ProcessContext.join.
register(LiveCase("fff_spawn_find_free_port_per_rank", (PYTHON, "{fixtures}/fff_spawn_find_free_port_per_rank.py"),
                  ranks=3, settle=4.0))

# torch.futures then() run inline on a completed future (pytorch/pytorch PR #50978, #48478): rank 0 deadlocks on its
# own stats lock; ranks 1-2 in the next step's DDP backward.
register(LiveCase("fff_future_then_inline_stats_lock", torchrun(3, "fff_future_then_inline_stats_lock.py"), ranks=3,
                  settle=2.0))

# ceil partition of utterances (k2-fsa/snowfall#152): rank 2 has 2 of 10, waits in the pre-checkpoint barrier; ranks
# 0-1 in their third step's DDP backward.
register(LiveCase("fff_lhotse_partition_ceil_short_last_rank",
                  torchrun(3, "fff_lhotse_partition_ceil_short_last_rank.py"), ranks=3, settle=2.0))

# stratified subsample refill loop (PriorLabs/TabPFN PR #1034): rank 1's shard lacks class 2 and it spins in
# draw_class; ranks 0 and 2 in DDP backward.
register(LiveCase("fff_stratified_quota_spin", torchrun(3, "fff_stratified_quota_spin.py"), ranks=3, settle=2.0))
