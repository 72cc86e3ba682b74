"""First-contact batch fej (thirtieth first-contact round, part J): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): a DeepSpeed MoE evaluation run on the main rank only (the expert
all-to-all on DeepSpeed's expert-parallel group against the others' closing barrier), Lightning's all_gather inside
`if self.trainer.is_global_zero:` (against the training loop's per-step SIGTERM-flag broadcast), ignite metrics
computed on the chief only under idist.Parallel (Accuracy's sync_all_reduce against the end-of-epoch barrier),
accelerate's gather_object inside `if accelerator.is_main_process:` (against DDP's gradient all-reduce), and a
DeepSpeedDataLoader whose dataset retries a missing file for ever on one rank."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# eval forward through a DeepSpeed MoE layer on the main rank only (yiqiao-yin/deepspeed-course PR #28), expert
# parallelism ep_size=3 under the `deepspeed` runner: rank 0 in the MoE all-to-all on the expert-parallel group;
# ranks 1-2 in the world barrier before teardown.
register(LiveCase("fej_ds_moe_rank0_eval_expert_all_to_all",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/fej_ds_moe_rank0_eval_expert_all_to_all.py"), ranks=3, env=DS_ENV, settle=2.0))

# LightningModule.all_gather under `if self.trainer.is_global_zero:` in on_validation_epoch_end
# (Lightning-AI/pytorch-lightning#16541), Trainer DDP on CPU: rank 0 in all_gather (world); ranks 1-2 in epoch 1's
# first step, in the training loop's SIGTERM-flag broadcast (world).
register(LiveCase("fej_lightning_global_zero_val_all_gather",
                  torchrun(3, "fej_lightning_global_zero_val_all_gather.py"), ranks=3, settle=3.0))

# validation on the chief only with a distributed-aware ignite metric (pytorch/ignite PR #2895), idist.Parallel
# spawning 3 ranks: rank 0 in Accuracy.compute's sync_all_reduce; ranks 1-2 in the end-of-epoch idist.barrier().
register(LiveCase("fej_ignite_chief_only_eval_metric_sync",
                  (PYTHON, "{fixtures}/fej_ignite_chief_only_eval_metric_sync.py"), ranks=3, settle=2.0))

# accelerate.utils.gather_object under `if accelerator.is_main_process:` for a logged table (huggingface/trl#1103):
# rank 0 in all_gather_object (world); ranks 1-2 in the next step's backward (DDP all-reduce).
register(LiveCase("fej_accel_main_only_gather_object_log_table",
                  torchrun(3, "fej_accel_main_only_gather_object_log_table.py"), ranks=3, settle=2.0))

# a dataset whose __getitem__ retries a missing file in `while True` (GuHuangAI/ADM-Public#6), batches built by the
# DeepSpeed engine's own DeepSpeedDataLoader: rank 1 spinning in __getitem__; ranks 0, 2 in step 2's backward.
register(LiveCase("fej_ds_loader_getitem_retry_same_index",
                  torchrun(3, "fej_ds_loader_getitem_retry_same_index.py"), ranks=3, env=DS_ENV, settle=2.0))
