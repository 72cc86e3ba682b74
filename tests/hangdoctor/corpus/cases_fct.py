"""First-contact batch T (eleventh first-contact round, part T): live cases from public programs and reports on a
pipelining schedule with a disagreeing micro-batch count, a ZeRO optimizer consolidated on rank 0 only, a CLIP
gather-with-grad loss skipped on one rank, a store key never set; and one shape case (see each case.json)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# torch.distributed.pipelining ScheduleGPipe, 3 stages (pytorch/torchtitan#775, pytorch/PiPPy#1064): stage 1 built
# with 2 micro-batches, stages 0 and 2 with 4; all three wait in batch p2p work.wait().
register(LiveCase("fct_pipe_stage_microbatch_count", torchrun(3, "fct_pipe_stage_microbatch_count.py"), ranks=3,
                  settle=2.0))

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
