"""First-contact batch ffc (thirty-ninth first-contact round, part C): live hangs in third-party frameworks' own code
paths (see each case.json)."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# accelerate's trigger API checked on the main process only (huggingface/accelerate PR #1940), `accelerate launch` on
# CPU: process 0 in check_trigger's all-reduce; processes 1 and 2 in step 5's DDP buffer broadcast.
register(LiveCase("ffc_accel_main_only_check_trigger",
                  (str(Path(PYTHON).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "3",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", _free_port(),
                   "{fixtures}/ffc_accel_main_only_check_trigger.py"), ranks=3, settle=3.0))

# generate(synced_gpus=True) over prompts split unevenly by split_between_processes (huggingface/accelerate PR #1410),
# torchrun: ranks 0 and 1 in their fourth generate's per-step finished-flag all-reduce; rank 2 in gather_object.
register(LiveCase("ffc_hf_generate_synced_split_uneven", torchrun(3, "ffc_hf_generate_synced_split_uneven.py"), ranks=3,
                  settle=3.0))

# ignite's TimeLimit on each rank's own clock (alipay/ant-xgboost PR #21's review, pytorch/ignite#936), torchrun:
# rank 0 crossed the limit first and waits in idist.barrier(); ranks 1 and 2 in the next iteration's DDP buffer
# broadcast.
register(LiveCase("ffc_ignite_time_limit_rank_local", torchrun(3, "ffc_ignite_time_limit_rank_local.py"), ranks=3,
                  settle=3.0))

# trainer.fit() inside a FileLock while Lightning relaunches the script for ranks 1-2 (Lightning-AI/pytorch-lightning
# #17530, PR #2790), `python script.py`: rank 0 (the original process) in init_process_group's TCPStore wait; ranks 1
# and 2 polling the FileLock rank 0 holds.
register(LiveCase("ffc_lightning_relaunch_filelock_held",
                  (PYTHON, "{fixtures}/ffc_lightning_relaunch_filelock_held.py"), ranks=3, settle=3.0))

# a DataLoader worker that feeds a whole record to `gzip -dc` before reading its output (ansible/ansible PR #3991),
# DeepSpeed ZeRO-1 under torchrun: rank 1 waits in the DataLoader for batch 2 (its worker blocked writing into gzip's
# stdin); ranks 0 and 2 in step 2's ZeRO-1 gradient all-reduce.
register(LiveCase("ffc_ds_loader_worker_gzip_pipe", torchrun(3, "ffc_ds_loader_worker_gzip_pipe.py"), ranks=3,
                  env=DS_ENV, settle=3.0))
