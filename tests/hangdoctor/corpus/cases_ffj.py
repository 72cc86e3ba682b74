"""First-contact batch ffj (forty-second first-contact round, part J): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): a DeepSpeed pipeline whose middle stage runs the default number of
eval micro-batches, Lightning callbacks built from a set of names (ordered by each process's hash seed), a
transformers Trainer run log whose rotating handler re-enters its own lock, an accelerate main-process-only wait for
free disk space before save_state, and an Ignite DataLoader worker waiting for a cache lock its own rank holds."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# eval_batch(num_micro_batches=len(eval_loader)) where a stage has an eval loader (deepspeedai/DeepSpeed PR #4859,
# PR #6484), DeepSpeed PipelineModule PP=3: rank 1 (middle stage, default 4 micro-batches) in the pipeline transfer
# of its third micro-batch (recv from 0), rank 2 in the recv of its second (from 1), rank 0 in the loss broadcast.
register(LiveCase("ffj_ds_pipe_eval_micro_batches_middle_default",
                  torchrun(3, "ffj_ds_pipe_eval_micro_batches_middle_default.py"), ranks=3, env=DS_ENV, settle=4.0))

# callbacks built from a set of names (RLinf/RLinf PR #1355, meta-pytorch/torchrec PR #4648), Lightning DDP, hash
# seeds fixed per rank: rank 0 in stop_file's reduce_boolean_decision (barrier); ranks 1-2 in reseed_augment's
# broadcast from rank 0.
register(LiveCase("ffj_lightning_callbacks_from_set_order", torchrun(3, "ffj_lightning_callbacks_from_set_order.py"),
                  ranks=3, settle=3.0))

# a size-rotating run-log handler that logs its own rotation (box/ClusterRunner PR #48, Delgan/loguru#712),
# transformers Trainer + DDP: rank 0 in the handler's own threading.Lock, re-entered from _rotate; ranks 1-2 in
# step 4's collectives.
register(LiveCase("ffj_hf_trainer_log_rotate_relog_lock", torchrun(3, "ffj_hf_trainer_log_rotate_relog_lock.py"),
                  ranks=3, settle=3.0))

# a main-process-only disk-space wait before save_state (bghira/SimpleTuner PR #2460, #2353), `accelerate launch`:
# process 0 sleeping in wait_for_disk_space's poll loop; processes 1-2 in step 5's DDP backward.
register(LiveCase("ffj_accel_ckpt_disk_low_wait_main_only",
                  (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "3",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", _free_port(),
                   "{fixtures}/ffj_accel_ckpt_disk_low_wait_main_only.py"), ranks=3, settle=3.0))

# a DataLoader worker filling in a missing cache record under the cache FileLock its own main process holds for the
# whole run (pytorch/pytorch#1355), PyTorch-Ignite idist + DDP: rank 1 waiting in the DataLoader for batch 3 (its
# worker in FileLock's poll loop); ranks 0 and 2 in batch 3's DDP backward.
register(LiveCase("ffj_ignite_worker_cache_miss_parent_filelock",
                  torchrun(3, "ffj_ignite_worker_cache_miss_parent_filelock.py"), ranks=3, settle=3.0))
