"""First-contact batch feq (thirty-third first-contact round, part Q): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): a Lightning hook that creates a process group on the global-zero
process only, transformers' main_process_first around a cleaning regex that backtracks for ever on the main process,
an accelerate training loop whose DataLoader worker blocks in a read with no timeout, and Lightning Fabric with an
uneven file split that ends one rank's epoch a step early into the end-of-epoch barrier, and a DeepSpeed job whose
shard download waits for ever on a stale SoftFileLock on one rank."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# a 'suspend the distributed timeout' helper that calls dist.new_group, entered on the global-zero process only
# (review of vllm-project/llm-compressor PR #2869), Lightning Trainer DDP: rank 0 waits in new_group in
# on_train_epoch_end; ranks 1 and 2 go on past the epoch's end into Lightning's next collective.
register(LiveCase("feq_lightning_rank0_export_new_group", torchrun(3, "feq_lightning_rank0_export_new_group.py"),
                  ranks=3, settle=3.0))

# a cleaning regex with nested quantifiers inside transformers' TrainingArguments.main_process_first (nltk/nltk PR #1233,
# explosion/spaCy#957): rank 0 busy in re.match for ever; ranks 1 and 2 wait in main_process_first's barrier.
register(LiveCase("feq_hf_main_first_regex_backtrack", torchrun(3, "feq_hf_main_first_regex_backtrack.py"),
                  ranks=3, settle=3.0))

# a DataLoader worker whose shard read has no timeout (huggingface/accelerate#1980), accelerate DDP, num_workers=1:
# rank 1 waits in the DataLoader for batch 2 while its worker blocks in open() of a pipe nobody writes; ranks 0 and 2
# wait in step 2's accelerator.backward (DDP all-reduce).
register(LiveCase("feq_accel_worker_shard_read_no_timeout", torchrun(3, "feq_accel_worker_shard_read_no_timeout.py"),
                  ranks=3, settle=3.0))

# an uneven round-robin file split with drop_last (argonne-lcf/dlio_benchmark PR #339), Lightning Fabric DDP: rank 2
# runs one step per epoch and waits in fabric.barrier(); ranks 0 and 1 wait in step 1's DDP collectives (forward).
register(LiveCase("feq_fabric_uneven_file_split_barrier", torchrun(3, "feq_fabric_uneven_file_split_barrier.py"),
                  ranks=3, settle=3.0))

# a shard download guarded by a SoftFileLock whose lock file a killed job on another node left behind
# (huggingface/huggingface_hub PR #3944), ZeRO-1 under the `deepspeed` runner: rank 2 polls the stale lock for ever;
# ranks 0 and 1 wait in deepspeed.initialize's first collective (DeepSpeed's data-parallel group).
register(LiveCase("feq_ds_shard_fetch_stale_soft_lock",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/feq_ds_shard_fetch_stale_soft_lock.py"), ranks=3, env=DS_ENV, settle=3.0))
