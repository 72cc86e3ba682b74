"""First-contact batch fel (thirty-first first-contact round, part L): live hangs from public reports in
third-party frameworks' own code paths (see each case.json): accelerate's split_between_processes without padding
(a gather nobody else calls), HF Trainer with a dataset that spins on a malformed sample, a rich-style live bar in
a Lightning Callback deadlocking with its refresh thread, and HF Trainer's EarlyStoppingCallback on an unreduced
per-rank score (one rank stops, its end-of-training gather against the others' DDP all-reduce)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# accelerate's split_between_processes without padding (bghira/SimpleTuner PR #1391): 10 images over 3 processes
# give 4, 3, 3 steps; rank 0 in its fourth accelerator.gather (all_gather, world); ranks 1-2 in wait_for_everyone.
register(LiveCase("fel_accel_split_unpadded_cache_gather",
                  torchrun(3, "fel_accel_split_unpadded_cache_gather.py"), ranks=3, settle=2.0))

# HF Trainer, Qwen-VL-style placeholder expansion in Dataset.__getitem__ (2U1/Qwen-VL-Series-Finetune#31), sequential
# train sampler: rank 1 spins in replace_image_tokens on sample 9 (two images, one placeholder); ranks 0, 2 in step
# 1's backward (DDP gradient all-reduce): accelerate's loader fetches rank 1's step-2 batch ahead.
register(LiveCase("fel_hf_trainer_vl_placeholder_spin",
                  torchrun(3, "fel_hf_trainer_vl_placeholder_spin.py"), ranks=3, settle=3.0))

# a rich-style live progress bar as a Lightning Callback on global zero (Lightning-AI/pytorch-lightning#10362, #11034):
# lock-order inversion between the bar's refresh thread and on_train_batch_end at batch 3: rank 0's main thread waits
# for the console lock; ranks 1-2 in batch 4's SIGTERM-flag broadcast from rank 0.
register(LiveCase("fel_lightning_live_bar_lock_order",
                  torchrun(3, "fel_lightning_live_bar_lock_order.py"), ranks=3, settle=3.0))

# HF Trainer's EarlyStoppingCallback on a benchmark score each rank computes on its own shard, not reduced
# (axolotl-ai-cloud/axolotl PR #537): rank 2 alone stops at step 4 and waits in the end-of-train FLO gather (all_gather);
# ranks 0-1 in step 5's backward (DDP gradient all-reduce).
register(LiveCase("fel_hf_trainer_shard_bench_early_stop",
                  torchrun(3, "fel_hf_trainer_shard_bench_early_stop.py"), ranks=3, settle=3.0))
