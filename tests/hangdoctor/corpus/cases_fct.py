"""First-contact batch T (eleventh first-contact round, part T): live cases from public programs and reports on an
FSDP2 grad-norm log on rank 0 only, a ZeRO optimizer consolidated on rank 0 only, a CLIP
gather-with-grad loss skipped on one rank, a store key never set (see each case.json)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# ZeroRedundancyOptimizer.consolidate_state_dict(to=0) inside `if rank == 0:` (pytorch/ignite#2623), 3 ranks:
# rank 0 waits in the consolidation's broadcast; ranks 1-2 in step 6's DDP all_reduce.
register(LiveCase("fct_zero_consolidate_rank0", torchrun(3, "fct_zero_consolidate_rank0.py"), ranks=3, settle=2.0))

# open_clip-style gather_with_grad (torch.distributed.nn.functional.all_gather), 3 ranks: rank 1 swaps a non-finite
# loss for a fresh leaf and waits in the gradient all_reduce; ranks 0 and 2 in _AllGather.backward's all-to-all.
register(LiveCase("fct_clip_gather_grad_skip_loss", torchrun(3, "fct_clip_gather_grad_skip_loss.py"), ranks=3,
                  settle=2.0))

# A store handshake for a preprocessing cache (dmlc/dgl sparse_emb.py's set/wait), 3 ranks: rank 0 finds the cache
# and never sets the key, waits in DDP's constructor; ranks 1-2 wait in store.wait().
register(LiveCase("fct_store_cache_key_skip_set", torchrun(3, "fct_store_cache_key_skip_set.py"), ranks=3,
                  settle=2.0))

# FSDP2 (fully_shard) with clip_grad_norm_ called for the log line on rank 0 only (pytorch/torchtitan#766,
# TRI-ML/prismatic-vlms#35), 3 ranks: rank 0 waits on the norm's all-reduce; ranks 1-2 in step 6's FSDP all-gather.
register(LiveCase("fct_fsdp2_rank0_grad_norm_log", torchrun(3, "fct_fsdp2_rank0_grad_norm_log.py"), ranks=3,
                  settle=2.0))
