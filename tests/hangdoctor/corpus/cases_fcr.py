"""First-contact batch R (tenth first-contact round, part R): live cases from public programs and reports on a
DCP save whose Stateful raises on one rank, ... (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# torch.distributed.checkpoint.save with a Stateful loader entry raising on rank 1 (ByteDance-Seed/VeOmni#1181,
# pytorch/pytorch#122529), 3 ranks: rank 1 swallows the error and waits in the next step's all_reduce; ranks 0 and 2
# wait in dcp.save's plan gather.
register(LiveCase("fcr_dcp_stateful_raise_goes_on", torchrun(3, "fcr_dcp_stateful_raise_goes_on.py"), ranks=3,
                  settle=2.0))

# Lightning DataModule.setup downloading on global rank 0 only, then the strategy barrier
# (Lightning-AI/pytorch-lightning#17733, #20536), 3 ranks: rank 0 sleeps in a no-limit retry loop against a mirror
# that refuses connections; ranks 1-2 wait in trainer.strategy.barrier().
register(LiveCase("fcr_lightning_setup_download_retry", torchrun(3, "fcr_lightning_setup_download_retry.py"),
                  ranks=3, settle=3.0))

# GRPO-style rewards with asyncio and an HTTP code sandbox awaited with no timeout (modelscope/ms-swift#6962), 3 ranks:
# at step 3 rank 2 alone has a code task and its event loop waits for a sandbox that never answers; ranks 0-1 wait in
# the all_gather of rewards.
register(LiveCase("fcr_grpo_async_reward_no_timeout", torchrun(3, "fcr_grpo_async_reward_no_timeout.py"), ranks=3,
                  settle=2.0))

# A rank left suspended (SIGSTOP, state T) mid-step, as py-spy record sometimes leaves its target (benfred/py-spy#390,
# #416), 3 ranks: rank 1 is stopped in its forward pass, py-spy cannot dump it; ranks 0 and 2 wait in the gradient
# all_reduce.
register(LiveCase("fcr_rank_left_stopped", torchrun(3, "fcr_rank_left_stopped.py"), ranks=3, settle=2.0))


# Shape case (fixtures/corpus/shapes/fcr_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# sgl-project/sglang PR #17870 (comment of 2026-09-01: verl weight sync into SGLang with EAGLE v2, TP=8, the first
# update_weights_from_tensor hangs: 7 of 8 schedulers in the tp_cpu_group barrier, the diverged rank at the
# eagle_worker_v2.py line with no callee, natively in the CUDA-IPC deleter's cudaStreamSynchronize) and PR #35093
# (TP0 stays in the CUDA-IPC unwrap/update path, TP1-7 wait in the final gloo barrier), TP=4 here: TP0 (rank 0) in
# cudaStreamSynchronize -> cuStreamSynchronize, TP1-3 in the barrier. Launcher: `python -m sglang.launch_server`.
EAGLE_ARGS = ("--model-path Qwen/Qwen3.5-35B-A3B --tp 4 --speculative-algorithm EAGLE --speculative-num-steps 3 "
              "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --mem-fraction-static 0.7 "
              "--host 0.0.0.0 --port 30000")
register(LiveCase(
    "fcr_sglang_eagle_ipc_weight_sync",
    in_tree("fcr_sglang_eagle_ipc_weight_sync", f"{shlex.quote(PYTHON)} -m sglang.launch_server {EAGLE_ARGS}"),
    ranks=4, shape=True, settle=3.0, env=shape_env("fcr_sglang_eagle_ipc_weight_sync"),
))
