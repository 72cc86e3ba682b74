"""First-contact batch V (twelfth first-contact round, part V): live cases from public programs and reports on a
DDP step skipped for an empty batch, a Lightning callback whose except skips a synced log, a metrics side group
entered at different steps, a file wait in a sleep loop before a monitored barrier (see each case.json); and one
shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# DDP (find_unused_parameters=False) with a collate that drops unreadable samples and `if batch is None: continue`
# (Lightning-AI/pytorch-lightning#6430), 3 ranks: rank 1 skips step 3, runs one step fewer and waits in the
# end-of-epoch barrier; ranks 0 and 2 wait in the last step's DDP gradient all_reduce.
register(LiveCase("fcv_ddp_empty_batch_continue", torchrun(3, "fcv_ddp_empty_batch_continue.py"), ranks=3,
                  settle=2.0))

# Lightning Callback.on_train_batch_end computing metrics in try/except ValueError: continue, each logged with
# sync_dist=True (Lightning-AI/pytorch-lightning#19106, PR #19917), 3 ranks: rank 1's batch 2 is single-class, its
# AUROC raises and its log is skipped; ranks 0 and 2 wait in the log's sync, rank 1 in batch 3's first collective.
register(LiveCase("fcv_lightning_cb_metric_except_log", torchrun(3, "fcv_lightning_cb_metric_except_log.py"), ranks=3,
                  settle=3.0))

# DDP on the default group + a gloo side group for metrics reduced every 48 samples counted per rank (allenai/OLMo
# PR #551, huggingface/trl#7310), 3 ranks: rank 2's larger batches cross the threshold a step early; it waits in
# the side group's all_reduce, ranks 0 and 1 in the next step's DDP gradient all_reduce.
register(LiveCase("fcv_side_group_metrics_sample_count", torchrun(3, "fcv_side_group_metrics_sample_count.py"),
                  ranks=3, settle=2.0))

# Node leaders poll in a sleep loop for a flag global rank 0 writes to node-local scratch, then every rank meets in
# dist.monitored_barrier (KratosMultiphysics/Kratos#8863, SeisSol/SeisSol PR #1532), 4 ranks as 2 simulated nodes:
# rank 2 (node 1's leader) sleeps for ever; ranks 0, 1 and 3 wait in the monitored barrier.
register(LiveCase("fcv_node_leader_file_wait_sleep", torchrun(4, "fcv_node_leader_file_wait_sleep.py"), ranks=4,
                  settle=2.0))


# Shape: EasyContext (jzhang38/EasyContext#22) with --parallel_mode dist_flash_attn (LightSeq) on 2 GPUs under
# `accelerate launch` (DeepSpeed ZeRO-3 offload config), a sequence length 2 * block size does not divide: rank 0
# waits in torch.cuda.synchronize() of _lightseq_forward at decoder layer 5, rank 1 at the same line of layer 6.
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fcv_easycontext_lightseq_layer_skew",
    in_tree("fcv_easycontext_lightseq_layer_skew",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'accelerate'))} launch "
            "--config_file accelerate_configs/single_node.yaml train.py --batch-size 1 --gradient-accumulate-every 4 "
            "--output-dir ./output/llama2_7b_30k_dist_flash_attn --seed 2024 --max-train-steps 1000 "
            "--learning-rate 2e-5 --model meta-llama/Llama-2-7b-hf --seq-length 30000 --rope-theta 1000000 "
            "--parallel_mode dist_flash_attn"),
    ranks=2, shape=True, settle=2.0, env=shape_env("fcv_easycontext_lightseq_layer_skew", str(LAUNCHERS)),
))
