"""First-contact batch ffk (forty-third first-contact round, part K): live hangs from PyTorch's own distributed stack
(see each case.json): a DataLoader worker forked after rank 0 started its dataset's prefetch thread, a loss dict
reduced in an insertion order that depends on the batch, MoE expert-count metrics whose all_reduce an empty rank
skips, a rank-0-only retrieval evaluation that keeps the others in the barrier, and a progress-reporter thread
joined while it sleeps out its interval."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# lazily started prefetch thread + fork (official-stockfish/nnue-pytorch PR #319): rank 0's DataLoader worker waits
# in queue.get() with no producer; rank 0 in the DataLoader; ranks 1-2 in DDP backward.
register(LiveCase("ffk_loader_prefetch_flag_forked", torchrun(3, "ffk_loader_prefetch_flag_forked.py"), ranks=3,
                  settle=2.0))

# loss dict reduced in insertion order (facebookresearch/maskrcnn-benchmark#309): rank 0 in all_gather (num_fg),
# ranks 1-2 in all_reduce (loss_box).
register(LiveCase("ffk_loss_dict_branch_order_reduce", torchrun(3, "ffk_loss_dict_branch_order_reduce.py"), ranks=3,
                  settle=2.0))

# `if self.counts:` around the expert-count all_reduce (areal-project/AReaL PR #1693): rank 2 in the export barrier,
# ranks 0-1 in the counts all_reduce.
register(LiveCase("ffk_moe_expert_counts_empty_rank_skip", torchrun(3, "ffk_moe_expert_counts_empty_rank_skip.py"),
                  ranks=3, settle=2.0))

# rank-0-only retrieval eval (EleutherAI/lm-evaluation-harness PR #1404): rank 0 busy in a per-query loop; ranks 1-2
# in the epoch-end barrier.
register(LiveCase("ffk_rank0_retrieval_eval_busy", torchrun(3, "ffk_rank0_retrieval_eval_busy.py"), ranks=3,
                  settle=2.0))

# progress reporter sleeping its interval (jasonrbriggs/stomp.py PR #234): rank 0 in Thread.join(); ranks 1-2 in the
# final barrier.
register(LiveCase("ffk_progress_reporter_sleep_join", torchrun(3, "ffk_progress_reporter_sleep_join.py"), ranks=3,
                  settle=2.0))
