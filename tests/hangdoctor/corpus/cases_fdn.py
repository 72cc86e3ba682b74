"""First-contact batch fdn (twentieth first-contact round, part B): live cases from public programs and reports
(see each case.json), and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# Megatron-style model-parallel fine-tuning with a hand-written gradient clipping that returns early when a rank
# has no gradients (NVIDIA/Megatron-LM#5530, deepspeedai/DeepSpeed#8478), 3 ranks: rank 2 owns only frozen
# shards, skips the norm all_reduce and waits in step 2's forward all_reduce (tensor-parallel group); ranks 0 and
# 1 wait in the norm all_reduce (model-parallel group).
register(LiveCase("fdn_clip_norm_frozen_shard_early_return",
                  torchrun(3, "fdn_clip_norm_frozen_shard_early_return.py"), ranks=3, settle=2.0))

# DDP trainer with a custom sampler whose __len__ counts the shard files of the rank's own node cache
# (Lightning-AI/pytorch-lightning#19272, msr-fiddle/pipedream#80), 3 ranks: rank 1's cache lacks two shards, its
# epoch ends after 2 steps and it waits in the validation all_reduce (metrics group); ranks 0 and 2 wait in step
# 3's backward (DDP gradient all_reduce).
register(LiveCase("fdn_sampler_len_local_shards", torchrun(3, "fdn_sampler_len_local_shards.py"), ranks=3,
                  settle=2.0))

# Hand-written data-parallel loop with anomaly detection on rank 0 only and a try/except that skips a failing
# batch (ai2cm/ace#849, pytorch/audio#3749), 3 ranks: rank 0's NaN backward raises, it skips one gradient
# all_reduce and at the end waits in the validation all_reduce (metrics group); ranks 1 and 2 wait in their last
# gradient all_reduce (default group).
register(LiveCase("fdn_anomaly_mode_rank0_skip_step", torchrun(3, "fdn_anomaly_mode_rank0_skip_step.py"), ranks=3,
                  settle=2.0))

# Accelerate loop logging sample predictions with gather_for_metrics inside `if accelerator.is_main_process:`
# (huggingface/accelerate#2785, huggingface/trl#1103), 3 ranks: rank 0 waits in the all_gather; ranks 1 and 2
# wait in step 3's backward (DDP gradient all_reduce).
register(LiveCase("fdn_accel_gather_main_only_samples", torchrun(3, "fdn_accel_gather_main_only_samples.py"),
                  ranks=3, settle=3.0))


# Shape (LLaMA-Factory LoRA SFT of Qwen2.5-Omni-7B with DeepSpeed ZeRO-3 on 8 GPUs over NCCL, 4 ranks here):
# hiyouga/LlamaFactory#7767 (with PR #7694's multimodal data in system messages): rank 2's batch carries audio,
# its thinker runs the audio encoder and waits in fetch_sub_module's event synchronize for an all-gather of the
# encoder's LoRA base layer that no other rank issues; ranks 0, 1, 3 (no audio) are in backward, their autograd
# device thread in the pre-backward fetch's all_gather_into_tensor.
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fdn_llamafactory_omni_sys_audio_zero3",
    in_tree("fdn_llamafactory_omni_sys_audio_zero3",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nnodes 1 --node_rank 0 "
            "--nproc_per_node 4 --master_addr 127.0.0.1 --master_port 40435 src/llamafactory/launcher.py "
            "examples/train_lora/qwen2_5omni_lora_sft.yaml"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fdn_llamafactory_omni_sys_audio_zero3", str(LAUNCHERS)),
))
