"""First-contact batch N (eighth first-contact round, part N): live cases from public reports and programs on
early stopping decided per rank from its local validation loss, a SIGTERM/preemption handler that checkpoints
with a collective on the one rank that got the signal, a checkpoint written to a path that never answers while
the others wait in a gloo monitored_barrier, and a graceful torch.distributed.rpc.shutdown() while one worker's
RPC handler is still blocked; and a shape case from a public thread (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# Lightning-AI/pytorch-lightning#379 and webdataset/webdataset#446, 3 ranks: rank 1's local validation loss stops
# improving, it breaks out of the epoch loop and waits in the final barrier; ranks 0 and 2 wait in DDP's gradient
# all_reduce of the next epoch's first step.
register(LiveCase("fcn_early_stop_local_val", torchrun(3, "fcn_early_stop_local_val.py"), ranks=3, settle=3.0))

# ai2cm/ace PR #1398, NVIDIA-NeMo/Automodel PR #3007, kyutai-labs/pocket-tts PR #277, 3 ranks: SIGTERM reaches rank 1
# only; its handler checkpoints at once and waits in gather_object's all_gather; ranks 0 and 2 wait in DDP's gradient
# all_reduce of the same step.
register(LiveCase("fcn_sigterm_ckpt_handler", torchrun(3, "fcn_sigterm_ckpt_handler.py"), ranks=3, settle=3.0))

# NVIDIA-NeMo/RL PR #3504 and instructlab/training PR #566, mp.spawn, 3 ranks: rank 0's torch.save blocks opening a
# checkpoint path that never answers (a FIFO nobody reads); ranks 1 and 2 wait in gloo's monitored_barrier.
register(LiveCase("fcn_save_hung_path_monitored_barrier",
                  (PYTHON, "{fixtures}/fcn_save_hung_path_monitored_barrier.py"), ranks=3, settle=2.0))

# pytorch/examples distributed/rpc (fire-and-forget rpc_async, then rpc.shutdown) and the graceful shutdown's join
# (pytorch/pytorch PR #30693, PR #61094), mp.spawn, driver + 3 workers: worker 2's RPC handler blocks in an HTTP read
# from a collector that never answers; every main thread waits in rpc.shutdown.
register(LiveCase("fcn_rpc_shutdown_blocked_handler", (PYTHON, "{fixtures}/fcn_rpc_shutdown_blocked_handler.py"),
                  ranks=4, settle=3.0))


# Shape case (fixtures/corpus/shapes/fcn_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env  # noqa: E402

# sgl-project/sglang PR #24694 ('Fix NCCL deadlock in Ulysses SP when sequence length has remainder'): SGLang
# diffusion (multimodal_gen), LTX-2 text-to-video with --ulysses-degree 4 on 4 GPUs, 97 frames (13 latent frames,
# padded to 16 for 4 SP ranks): _build_ltx2_sp_padding_mask gives a mask only to rank 3 (the padding holder);
# USPAttention.forward all-gathers the mask there only. Rank 3 spins in the mask all-gather's NCCL enqueue, ranks 0-2
# wait in the output all-to-all. Launcher: the `sglang generate` CLI process (idle in the result pipe's recv).
ULYSSES_ARGS = ("generate --model-path Lightricks/LTX-2 --num-gpus 4 --ulysses-degree 4 --num-frames 97 "
                "--height 512 --width 768 --prompt 'a red fox running through fresh snow'")
register(LiveCase(
    "fcn_sglang_ulysses_pad_mask_gather",
    in_tree("fcn_sglang_ulysses_pad_mask_gather",
            f"{shlex.quote(PYTHON)} -m sglang.multimodal_gen.runtime.entrypoints.cli.main {ULYSSES_ARGS}"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcn_sglang_ulysses_pad_mask_gather"),
))
