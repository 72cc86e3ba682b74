"""First-contact batch few (thirty-sixth first-contact round, part W): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): an accelerate no-trainer loop whose "evaluate now" test reads a tqdm
bar disabled off the main process, a Lightning save-config-once callback whose flag is set on global zero only (so
the other ranks alone read trainer.log_dir's broadcast), an HF Trainer evaluating on per-node eval streams of
unequal length, an HF Trainer whose per-node stream filter never yields again on one node, and a DeepSpeed ZeRO-2 job
whose DataLoader worker packs documents and loops for ever on one longer than a pack."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# accelerate, tqdm disabled off the main process decides when to evaluate (huggingface/transformers#31532): process 0
# in gather_for_metrics (all_gather, world); processes 1-2 in the next step's backward (DDP all_reduce).
register(LiveCase("few_accel_tqdm_main_only_eval_gather", torchrun(3, "few_accel_tqdm_main_only_eval_gather.py"),
                  ranks=3, settle=3.0))

# Lightning save-config-once callback, flag set on global zero only (Lightning-AI/pytorch-lightning PR #14927): at
# trainer.validate's setup rank 0 returns early and waits in the setup hook's barrier; ranks 1-2 in trainer.log_dir's
# broadcast_object_list.
register(LiveCase("few_lightning_save_config_once_log_dir_bcast",
                  torchrun(3, "few_lightning_save_config_once_log_dir_bcast.py"), ranks=3, settle=3.0))

# HF Trainer, per-node eval streams of unequal length (huggingface/transformers#24589): rank 1 out of eval batches, in
# the next training step's backward (DDP all_reduce); ranks 0, 2 in evaluation_loop's gather_for_metrics.
register(LiveCase("few_hf_trainer_eval_uneven_stream_gather", torchrun(3, "few_hf_trainer_eval_uneven_stream_gather.py"),
                  ranks=3, settle=3.0))

# HF Trainer, per-node stream filtered after the split (huggingface/datasets#6719): rank 2 busy in its filter loop,
# inside the Trainer's batch fetch; ranks 0-1 in step 3's backward (DDP all_reduce).
register(LiveCase("few_hf_trainer_stream_filter_shard_spin", torchrun(3, "few_hf_trainer_stream_filter_shard_spin.py"),
                  ranks=3, settle=3.0))

# DeepSpeed ZeRO-2 under the `deepspeed` launcher, DataLoader worker packing documents loops for ever on one longer
# than a pack (soimy/maxrects-packer#43): rank 2's worker busy in the packer, rank 2 in the DataLoader's next();
# ranks 0-1 in step 2's backward (ZeRO-2 all_reduce, data-parallel group).
register(LiveCase("few_ds_zero2_loader_packer_oversized_doc",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/few_ds_zero2_loader_packer_oversized_doc.py"), ranks=3, env=DS_ENV, settle=3.0))
