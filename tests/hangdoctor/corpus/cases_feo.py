"""First-contact batch feo (thirty-second first-contact round, part O): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): a DeepSpeed ZeRO-2 'best checkpoint' saved on a per-rank validation
loss, an HF Trainer whose token counter skips its gather on an image-only batch, a Lightning Trainer whose remote
stop command sets should_stop on rank 0 alone, an accelerate + transformers streamed-generation evaluation whose
generate thread dies so that its TextIteratorStreamer waits for ever, an HF Trainer whose loss-spike callback
sets should_log on one rank only, and Lightning Fabric started with a copied
two-node config on one machine."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# 'save best' on an unreduced per-rank validation loss (vllm-project/speculators PR #324 review; DeepSpeed PR #801),
# ZeRO-2 under the `deepspeed` runner: after epoch 2 rank 1 alone improves and waits in save_checkpoint's barrier
# (world group); ranks 0 and 2 wait in epoch 3's backward (ZeRO-2 all-reduce on DeepSpeed's data-parallel group).
register(LiveCase("feo_ds_best_local_val_save",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/feo_ds_best_local_val_save.py"), ranks=3, env=DS_ENV, settle=2.0))

# include_num_input_tokens_seen with an image-only batch that has no input_ids (huggingface/transformers#28791's
# token-count gather): rank 2 skips Trainer._track_num_input_tokens' gather and waits in step 4's backward (DDP);
# ranks 0 and 1 wait in the gather (all_gather, world group).
register(LiveCase("feo_hf_trainer_tokens_seen_image_only_batch",
                  torchrun(3, "feo_hf_trainer_tokens_seen_image_only_batch.py"), ranks=3, settle=3.0))

# a remote 'stop early' command received by rank 0 only, should_stop set there, then a barrier that does not share it
# (talmolab/sleap-nn PR #471): rank 0 leaves the epoch and waits in ModelCheckpoint's reduce_boolean_decision barrier;
# ranks 1 and 2 wait in batch 4's _broadcast_sigterm_tensor broadcast from rank 0.
register(LiveCase("feo_lightning_remote_stop_rank0_flag",
                  torchrun(3, "feo_lightning_remote_stop_rank0_flag.py"), ranks=3, settle=3.0))

# Fabric with num_nodes=2 from a cluster config, run as `python script.py` on one machine (Lightning-AI/
# pytorch-lightning#17228, #4389): Fabric's subprocess launcher starts global ranks 0-2 of a world of 6; all three wait
# in init_process_group for ranks 3-5, which nobody starts. No launcher process apart from rank 0 itself.
register(LiveCase("feo_fabric_num_nodes_copied_config",
                  (PYTHON, "{fixtures}/feo_fabric_num_nodes_copied_config.py"), ranks=3, settle=3.0))

# streamed generation with TextIteratorStreamer (huggingface/transformers PR #22576, modelscope/ms-swift PR #10133):
# rank 1's request has repetition_penalty=0, its generate thread raises, and its main thread waits for ever in the
# streamer's Queue.get; ranks 0 and 2 wait in accelerate's gather_object (all_gather_object, world group).
register(LiveCase("feo_accel_stream_generate_thread_error",
                  torchrun(3, "feo_accel_stream_generate_thread_error.py"), ranks=3, settle=3.0))

# a loss-spike callback that sets control.should_log from the rank's own loss (review of unslothai/unsloth-zoo PR #873;
# huggingface/transformers#42029): rank 1 alone enters the Trainer's logging gather (nested_gather -> all_gather);
# ranks 0 and 2 wait in step 4's backward (DDP all-reduce).
register(LiveCase("feo_hf_trainer_spike_log_control_one_rank",
                  torchrun(3, "feo_hf_trainer_spike_log_control_one_rank.py"), ranks=3, settle=3.0))
