"""First-contact batch ffa (thirty-eighth first-contact round, part A): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): a DeepSpeed ZeRO-3 GatheredParameters entered on the main process
only, a transformers Trainer callback whose main-process-only sample generation never ends, an accelerate loop that
ends an epoch early on one process and meets the next epoch's generator-state broadcast, and a Lightning
EarlyStopping whose monitored metric exists on rank 0 only."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# new-token embedding rows initialised "on the main process only" under ZeRO-3 (huggingface/transformers#11464,
# deepspeedai/DeepSpeed#846), the `deepspeed` runner: rank 0 in GatheredParameters' all-gather; ranks 1 and 2 in the
# barrier before training.
register(LiveCase("ffa_ds_zero3_rank0_new_token_rows_gather",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/ffa_ds_zero3_rank0_new_token_rows_gather.py"), ranks=3, env=DS_ENV, settle=3.0))

# a main-process-only sample callback (axolotl-ai-cloud/axolotl PR #3067), transformers Trainer + DDP: rank 0 busy in
# generate() with a 200000-token budget and no reachable eos; ranks 1 and 2 in the next step's token-count gather.
register(LiveCase("ffa_hf_trainer_rank0_sample_generate_no_eos",
                  torchrun(3, "ffa_hf_trainer_rank0_sample_generate_no_eos.py"), ranks=3, settle=3.0))

# an epoch ended early on one process (huggingface/accelerate#2258, #4204), `accelerate launch` on CPU: process 1 in
# the next epoch's DataLoaderShard generator-state broadcast; processes 0 and 2 in step 4's DDP backward.
register(LiveCase("ffa_accel_bad_batch_budget_epoch_break_rng_sync",
                  (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "3",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", _free_port(),
                   "{fixtures}/ffa_accel_bad_batch_budget_epoch_break_rng_sync.py"), ranks=3, settle=3.0))

# EarlyStopping(strict=False) on a metric logged with rank_zero_only (Lightning-AI/pytorch-lightning#15252, PR #15253),
# Lightning DDP: rank 0 in reduce_boolean_decision (barrier + reduce); ranks 1 and 2 in epoch 1's SIGTERM-flag
# broadcast.
register(LiveCase("ffa_lightning_early_stop_rank0_metric_no_strict",
                  torchrun(3, "ffa_lightning_early_stop_rank0_metric_no_strict.py"), ranks=3, settle=3.0))
