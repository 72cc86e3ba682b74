"""First-contact batch fes (thirty-fourth first-contact round, part S): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): Lightning manual optimization that skips the backward of a
non-finite loss on one rank, a transformers Trainer callback whose upload semaphore leaks a permit on an exception,
a DeepSpeed job whose rank 0 swallows a preparation error and never sets the store key the others wait on, Lightning
Fabric's rank_zero_first around a helper that runs a world collective, and Lightning's AsyncCheckpointIO whose
teardown joins a writer thread stuck in a remote write."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# an invalid loss skipped on one rank under DDP (Lightning-AI/pytorch-lightning PR #5359), Lightning manual
# optimization: rank 1 skips batch 3's manual_backward and waits in batch 4's first collective (the SIGTERM-flag
# broadcast); ranks 0 and 2 wait in batch 3's manual_backward (DDP gradient all-reduce).
register(LiveCase("fes_lightning_manual_nan_skip_backward", torchrun(3, "fes_lightning_manual_nan_skip_backward.py"),
                  ranks=3, settle=3.0))

# a semaphore permit lost on an exception (dice-group/gerbil#350), transformers Trainer callback: rank 1 waits in
# on_save's acquire at step 4's save; ranks 0 and 2 wait in step 5's backward (DDP all-reduce).
register(LiveCase("fes_hf_trainer_upload_permit_leak", torchrun(3, "fes_hf_trainer_upload_permit_leak.py"),
                  ranks=3, settle=3.0))

# a rank-0 preparation that publishes a TCPStore key, its exception swallowed (pytorch/pytorch#67972), ZeRO-1 under
# the `deepspeed` runner: rank 0 waits in step 0's ZeRO gradient all-reduce; ranks 1 and 2 in store.wait for the key.
register(LiveCase("fes_ds_rank0_prep_ready_key_swallowed",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/fes_ds_rank0_prep_ready_key_swallowed.py"), ranks=3, env=DS_ENV, settle=3.0))

# rank-0-first data processing (mosaicml/llm-foundry PR #716), Lightning Fabric's rank_zero_first around a helper that
# runs fabric.all_reduce: rank 0 waits in the world collective inside the block; ranks 1 and 2 in the block's
# monitored_barrier on its own gloo group.
register(LiveCase("fes_fabric_rank_zero_first_body_all_reduce",
                  torchrun(3, "fes_fabric_rank_zero_first_body_all_reduce.py"), ranks=3, settle=3.0))

# an AsyncCheckpointIO over a remote-store checkpoint IO (GoogleCloudPlatform/gcs-connector-for-pytorch PR #116), with
# a stalled remote write: rank 0 waits at fit's end in AsyncCheckpointIO.teardown (executor shutdown joins the stuck
# writer thread); ranks 1 and 2 wait in trainer.validate's first collective.
register(LiveCase("fes_lightning_async_ckpt_teardown_stalled_write",
                  torchrun(3, "fes_lightning_async_ckpt_teardown_stalled_write.py"), ranks=3, settle=3.0))
