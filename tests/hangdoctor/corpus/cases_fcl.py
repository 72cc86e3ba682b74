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


# Shape case (fixtures/corpus/shapes/fcl_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# sgl-project/sglang PR #31030 (fixes #30476; the same divergence class is tracked in #34572): a PD-disaggregated
# prefill server with --pp-size 2 (TP=1); an /abort_request lands between the two rounds of the bootstrap consensus:
# PP0 had already admitted the request, PP1's pop_bootstrapped drops it on its local Failed state. PP0 runs a batch
# PP1 never runs and waits for its outputs (recv_tensor_dict from the previous stage, round the ring); PP1 waits in
# recv_requests for the requests PP0 forwards only after that. Launcher: the HTTP server process (uvicorn).
PD_ARGS = ("--model-path deepseek-ai/DeepSeek-V3-0324 --trust-remote-code --disaggregation-mode prefill "
           "--pp-size 2 --disaggregation-transfer-backend mooncake --host 0.0.0.0 --port 30000")
register(LiveCase(
    "fcl_sglang_pd_prefill_pp_diverge",
    in_tree("fcl_sglang_pd_prefill_pp_diverge", f"{shlex.quote(PYTHON)} -m sglang.launch_server {PD_ARGS}"),
    ranks=2, shape=True, settle=2.0, env=shape_env("fcl_sglang_pd_prefill_pp_diverge"),
))
