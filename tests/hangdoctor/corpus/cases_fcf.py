"""First-contact batch F (third first-contact round, part F): live cases from public reports on PyTorch Lightning
(a rank-0-only epoch-end metric logged with sync_dist), accelerate with DeepSpeed ZeRO-3 (a main-process-only
get_state_dict) and a torchtitan-style FSDP2 trainer (a NaN check that breaks the loop on one rank), and shape
cases from public threads on TRL's AsyncGRPO weight sync to vLLM and on torch.compile's compiler collectives, each
hung the way its public thread reports (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

DS_ENV = {"DS_ACCELERATOR": "cpu"}

# Lightning-AI/pytorch-lightning#19783, 3 ranks: on_validation_epoch_end logs with sync_dist=True on global rank 0 only.
register(LiveCase("fcf_lightning_rank0_sync_dist", torchrun(3, "fcf_lightning_rank0_sync_dist.py"), ranks=3,
                  settle=2.0))

# starVLA/starVLA PR #460, 3 ranks: accelerate + DeepSpeed ZeRO-3, get_state_dict under is_main_process.
register(LiveCase("fcf_accel_zero3_main_state_dict", torchrun(3, "fcf_accel_zero3_main_state_dict.py"), ranks=3,
                  env={**DS_ENV, "ACCELERATE_USE_DEEPSPEED": "true"}, settle=2.0))

# NVIDIA-NeMo/Speech PR #578 / ai2cm/ace#849 in a torchtitan-style FSDP2 loop, 3 ranks: rank 1 breaks on a NaN loss.
register(LiveCase("fcf_titan_nan_break_ckpt", torchrun(3, "fcf_titan_nan_break_ckpt.py"), ranks=3, settle=2.0))


# Shape cases (fixtures/corpus/shapes/fcf_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# TRL AsyncGRPOTrainer + FSDP2 on 4 trainer GPUs, weights synced into `vllm serve` every step (huggingface/trl#7103):
# rank 0 streams the weights to vLLM while consuming the full_tensor() all-gathers; it waits on the GPU inside vLLM's
# packed transfer, ranks 1-3 in the barrier after the transfer.
register(LiveCase(
    "fcf_trl_async_grpo_weight_sync",
    in_tree("fcf_trl_async_grpo_weight_sync",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'accelerate'))} launch "
            "--config_file fsdp2.yaml train.py"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcf_trl_async_grpo_weight_sync", str(LAUNCHERS)),
))

# nanoGPT-style DDP over torch.compile with compiler collectives on, 4 GPUs (pytorch/pytorch PR #155558): rank 1
# recompiles for a new sequence length and waits in Dynamo's compiler collective, the others on the GPU in loss.item().
register(LiveCase(
    "fcf_compile_recompile_collective",
    in_tree("fcf_compile_recompile_collective",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --standalone "
            "--nproc_per_node=4 train.py"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcf_compile_recompile_collective", str(LAUNCHERS)),
))
