"""First-contact batch L (seventh first-contact round, part L): live cases from public reports and programs on DDP
validation run on rank 0 only through the DDP wrapper (its buffer broadcast), an evaluation whose exception handler
waits in a barrier, an expert-parallel MoE layer that returns early on a rank with no tokens, and a rank 0 whose
metrics-logger process died behind a bounded multiprocessing queue; and a shape case from a public thread (see each
case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# pytorch/pytorch#54059, 3 ranks: rank 0 validates alone through the DDP module (BatchNorm buffers, broadcast_buffers
# on): it waits in DDP's pre-forward buffer broadcast; ranks 1-2 wait in the barrier after validation.
register(LiveCase("fcl_ddp_rank0_val_buffer_bcast", torchrun(3, "fcl_ddp_rank0_val_buffer_bcast.py"), ranks=3,
                  settle=2.0))

# lmms-eval PR #1304 / torchtitan#1790 (a per-rank failure in evaluation), 3 ranks: rank 1 raises inside its no_grad
# eval loop; its except block waits in dist.barrier(); ranks 0 and 2 wait in the eval step's all_reduce.
register(LiveCase("fcl_eval_except_barrier", torchrun(3, "fcl_eval_except_barrier.py"), ranks=3, settle=2.0))

# sgl-project/sgl-kernel-npu#69, PaddleFormers PR #3010 (zero-token ranks in expert parallelism), 3 ranks: rank 2's
# micro-batch is all padding, its MoE dispatch returns early and it waits in the loss all_reduce; ranks 0-1 wait in
# the token-count all_to_all_single.
register(LiveCase("fcl_moe_zero_token_skip", torchrun(3, "fcl_moe_zero_token_skip.py"), ranks=3, settle=2.0))

# python/cpython#87971, sentence-transformers PR #3920 (the process on the other side of a multiprocessing queue
# died), 3 ranks: rank 0's spawn-context metrics logger dies on an empty batch; rank 0 blocks in Queue.put
# (maxsize=2); ranks 1-2 wait in DDP's gradient all_reduce. Rank 0's multiprocessing resource tracker is dumped too.
register(LiveCase("fcl_mp_logger_queue_full", torchrun(3, "fcl_mp_logger_queue_full.py"), ranks=3, settle=2.0))
