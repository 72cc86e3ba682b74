"""First-contact batch fey (thirty-seventh first-contact round, part Y): live hangs from public reports in
third-party frameworks' own code paths (see each case.json): transformers Trainer's auto_find_batch_size retrying the
inner training loop on the one rank that ran out of memory, PyTorch-Ignite's EarlyStopping deciding on a rank-local
score, a Lightning validation whose torchmetrics CharErrorRate runs its pure-Python edit distance over one rank's
long references, a DeepSpeed job whose rank with the fewest shard batches enters validation's world all_reduce
while the others still train (ZeRO reduction on DeepSpeed's own data-parallel group), and a DeepSpeed
save_checkpoint whose rank-0 model-states write never completes."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# an OOM-driven retry decided per process (Lightning-AI/pytorch-lightning#19789, mosaicml/composer PR #2117),
# transformers Trainer auto_find_batch_size: rank 1 restarts _inner_training_loop and waits in the new DDP wrapper's
# parameter-shape all_gather; ranks 0 and 2 wait in step 3's backward (DDP gradient all-reduce).
register(LiveCase("fey_hf_trainer_auto_batch_oom_one_rank", torchrun(3, "fey_hf_trainer_auto_batch_oom_one_rank.py"),
                  ranks=3, settle=3.0))

# EarlyStopping on a score that is not all-reduced (pytorch/ignite#664), ignite Engine + idist: rank 2 terminates
# its trainer after epoch 3 and waits in the closing idist.barrier(); ranks 0 and 1 in epoch 4's first backward.
register(LiveCase("fey_ignite_local_score_early_stop", torchrun(3, "fey_ignite_local_score_early_stop.py"),
                  ranks=3, settle=3.0))

# torchmetrics' pure-Python edit distance (jitsi/jiwer#68), Lightning validation with CharErrorRate: rank 1 busy in
# _edit_distance over its long references; ranks 0 and 2 in the CER states' end-of-epoch sync (barrier, all_gather).
register(LiveCase("fey_lightning_torchmetrics_cer_long_refs",
                  torchrun(3, "fey_lightning_torchmetrics_cer_long_refs.py"), ranks=3, settle=3.0))

# one rank out of batches first enters validation's reduce (lifeiteng/vall-e PR #93), DeepSpeed ZeRO-1 under the
# `deepspeed` runner with whole shard files per rank: rank 1 waits in the validation loss's world all_reduce; ranks 0
# and 2 in step 2's backward (ZeRO gradient all-reduce on DeepSpeed's data-parallel group, a clone of the world).
register(LiveCase("fey_ds_short_shard_val_reduce",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/fey_ds_short_shard_val_reduce.py"), ranks=3, env=DS_ENV, settle=3.0))

# a checkpoint write on a hung network mount (deepspeedai/DeepSpeed PR #4536, NVIDIA-NeMo/RL PR #3504), DeepSpeed
# save_checkpoint under the `deepspeed` runner: rank 0 blocked in the model-states torch.save (open of a path that
# never completes, a named pipe with no reader standing for the stalled mount); ranks 1 and 2 in the closing barrier.
register(LiveCase("fey_ds_ckpt_model_states_stalled_write",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/fey_ds_ckpt_model_states_stalled_write.py"), ranks=3, env=DS_ENV, settle=3.0))
