"""First-contact batch fdp (twenty-first first-contact round): live cases from public programs and reports (see
each case.json). Launchers new to the corpus: Lightning Fabric's and Trainer's own subprocess-script launcher
(the script's process is rank 0, no separate launcher) and accelerate.notebook_launcher (elastic agent in the
script's process, workers forked from inside it)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# Lightning Fabric (python script.py, Fabric's launcher; Lightning-AI/pytorch-lightning#19780, #20027), 3 ranks:
# `if fabric.global_rank == 0: fabric.save(...)`; rank 0 waits in the barrier inside Fabric.save, ranks 1-2 in the
# next backward (DDP gradient all_reduce).
register(LiveCase("fdp_fabric_save_rank0", (PYTHON, "{fixtures}/fdp_fabric_save_rank0.py"), ranks=3, settle=2.0))

# DDP trainer whose rank 0 saves through a one-thread ThreadPoolExecutor whose save task submits its shard writes to
# the same pool (langchain-ai/langchain PR #10638), 3 ranks: rank 0's main thread waits on the save future, the
# worker on the shard futures; ranks 1-2 wait in the next backward.
register(LiveCase("fdp_ckpt_pool_nested_submit", torchrun(3, "fdp_ckpt_pool_nested_submit.py"), ranks=3,
                  settle=2.0))

# DDP fine-tuning whose collate_fn pads to the global longest sequence with an all_reduce on a metadata group
# (h2oai/h2o-llmstudio PR #611, huggingface/accelerate#167), 7 shard files over 3 ranks: rank 0's third batch
# waits in the collate all_reduce; ranks 1-2 in the epoch-end loss all_reduce.
register(LiveCase("fdp_collate_global_pad_extra_batch", torchrun(3, "fdp_collate_global_pad_extra_batch.py"),
                  ranks=3, settle=2.0))

# Plain DDP under torch.multiprocessing.spawn with a rank-0-only test pass whose torchmetrics MetricCollection
# syncs on compute() (Lightning-AI/torchmetrics#938), 3 ranks: rank 0 waits in torchmetrics' gather (barrier
# first on gloo); ranks 1-2 in the next epoch's backward.
register(LiveCase("fdp_torchmetrics_test_rank0_spawn", (PYTHON, "{fixtures}/fdp_torchmetrics_test_rank0_spawn.py"),
                  ranks=3, settle=2.0))

# Accelerate training function under accelerate.notebook_launcher with hand-made, filtered per-process data slices
# (huggingface/accelerate#157), 3 processes: process 2 has 4 batches and waits in wait_for_everyone(); processes
# 0-1 wait in their 5th batch's backward.
register(LiveCase("fdp_accel_notebook_uneven_epoch", (PYTHON, "{fixtures}/fdp_accel_notebook_uneven_epoch.py"),
                  ranks=3, settle=2.0))

# Lightning Trainer (python script.py, subprocess launcher) saving a best checkpoint on a rank-local validation
# accuracy (pytorch/xla#2712), 3 ranks: rank 1 waits in Trainer.save_checkpoint's barrier; rank 0 in the next
# step's SIGTERM-flag broadcast, rank 2 in its backward.
register(LiveCase("fdp_lightning_local_best_save", (PYTHON, "{fixtures}/fdp_lightning_local_best_save.py"),
                  ranks=3, settle=3.0))

# DDP trainer logging through a rank filter with a meter whose __str__ all_reduces (NVIDIA-NeMo/Automodel PR #14's
# RankFilter, lazy %s formatting), 3 ranks: rank 0 waits in the all_reduce inside the log record's formatting;
# ranks 1-2 in the next backward.
register(LiveCase("fdp_log_rank_filter_lazy_sync", torchrun(3, "fdp_log_rank_filter_lazy_sync.py"), ranks=3,
                  settle=2.0))

# Lightning Trainer (python script.py) with a @rank_zero_only on_validation_end computing a torchmetrics metric
# (Lightning-AI/torchmetrics#2684), 3 ranks: rank 0 waits in torchmetrics' gather (barrier); ranks 1-2 in the
# next epoch's SIGTERM-flag broadcast from rank 0.
register(LiveCase("fdp_lightning_rank_zero_metric_hook", (PYTHON, "{fixtures}/fdp_lightning_rank_zero_metric_hook.py"),
                  ranks=3, settle=3.0))
