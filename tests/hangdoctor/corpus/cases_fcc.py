"""First-contact batch C (second round): live cases from public examples of DeepSpeed ZeRO-3 (a VLM on mixed data),
torch.distributed.checkpoint (async_save and a barrier on one group), accelerate without a Trainer (evaluation
gated by a main-process-only progress bar) and DDP's Join (a loss with its own collective), and a shape case from
a public Megatron-LM thread (MoE aux-loss tracker with MTP under pipeline parallelism). Each fixture names its
public source and thread in its docstring; each case.json in `source`/`thread`."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

DS_ENV = {"DS_ACCELERATOR": "cpu"}

register(LiveCase("fcc_ds_zero3_vlm_text_only", torchrun(3, "fcc_ds_zero3_vlm_text_only.py"), ranks=3, env=DS_ENV,
                  settle=2.0))
register(LiveCase("fcc_dcp_async_save_barrier", torchrun(3, "fcc_dcp_async_save_barrier.py"), ranks=3, settle=2.0))
register(LiveCase("fcc_accel_eval_progress_bar", torchrun(3, "fcc_accel_eval_progress_bar.py"), ranks=3, settle=2.0))
register(LiveCase("fcc_ddp_join_loss_gather", torchrun(3, "fcc_ddp_join_loss_gather.py"), ranks=3, settle=2.0))


# Shape case (fixtures/corpus/shapes/fcc_megatron_moe_mtp_aux_loss; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# Megatron-LM (early 2026), GPT-MoE with MTP, PP=4 on 4 GPUs, the first stage dense only: the MoE aux-loss tracker's
# tensors differ in length across the pipeline stages and its all_reduce over the pipeline group hangs at the first
# training_log (NVIDIA/Megatron-LM#3400, #3401).
MEGATRON_MOE_ARGS = ("--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 --num-layers 16 "
                     "--hidden-size 2048 --num-attention-heads 16 --num-experts 8 "
                     f"--moe-layer-freq {shlex.quote('([0]*4+[1]*12)')} --moe-router-load-balancing-type aux_loss "
                     "--moe-aux-loss-coeff 1e-2 --mtp-num-layers 1 --seq-length 4096 --max-position-embeddings 4096 "
                     "--micro-batch-size 1 --global-batch-size 4 --bf16")
register(LiveCase(
    "fcc_megatron_moe_mtp_aux_loss",
    in_tree("fcc_megatron_moe_mtp_aux_loss",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 4 --nnodes 1 "
            f"--master_addr localhost --master_port 6000 pretrain_gpt.py {MEGATRON_MOE_ARGS}"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcc_megatron_moe_mtp_aux_loss", str(LAUNCHERS)),
))
