"""First-contact batch feu (thirty-fifth first-contact round, part U): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): a Lightning DataModule whose prepare_data broadcasts inside the
Trainer's _InfiniteBarrier, a DeepSpeed ZeRO-2 job whose early stop is decided on the main process only, an
accelerate tracker blocked writing into a pipe nobody drains, an accelerate.notebook_launcher inference function that
calls gather_object on the main process only, and a Lightning logger that retries rate-limited posts for ever."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# prepare_data (local rank 0 only, inside Lightning's _InfiniteBarrier) broadcasts the vocabulary it built
# (Lightning-AI/pytorch-lightning#2299): rank 0 in broadcast_object_list (world); ranks 1-2 in the monitored_barrier.
register(LiveCase("feu_lightning_prepare_data_bcast_vocab", torchrun(3, "feu_lightning_prepare_data_bcast_vocab.py"),
                  ranks=3, settle=3.0))

# DeepSpeed ZeRO-2 under the `deepspeed` launcher, early stop decided on the main process only (speechbrain PR #2051):
# rank 0 in the end-of-training barrier (world); ranks 1-2 in the next backward's ZeRO-2 all_reduce (DP group).
register(LiveCase("feu_ds_zero2_main_only_early_stop",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/feu_ds_zero2_main_only_early_stop.py"), ranks=3, env=DS_ENV, settle=3.0))

# accelerate tracker streaming into a pipe whose reader stopped reading (MakazhanAlpamys/Soup#688): rank 0 blocked in
# the write inside accelerator.log; ranks 1-2 in the next backward (DDP all-reduce).
register(LiveCase("feu_accel_tracker_pipe_undrained", torchrun(3, "feu_accel_tracker_pipe_undrained.py"), ranks=3,
                  settle=3.0))

# accelerate.notebook_launcher, gather_object under is_main_process (huggingface/accelerate#2733): process 0 in
# all_gather_object; processes 1-2 in wait_for_everyone (same world group).
register(LiveCase("feu_accel_notebook_gather_object_main_only",
                  (PYTHON, "{fixtures}/feu_accel_notebook_gather_object_main_only.py"), ranks=3, settle=3.0))

# Lightning logger retrying HTTP 429 without a deadline (wandb/wandb#2696): rank 0 sleeping in the retry loop;
# ranks 1-2 in the next step's SIGTERM-flag broadcast.
register(LiveCase("feu_lightning_logger_rate_limit_backoff", torchrun(3, "feu_lightning_logger_rate_limit_backoff.py"),
                  ranks=3, settle=3.0))
