"""First-contact batch feg (twenty-ninth first-contact round, part G): live hangs from public reports in third-party
frameworks' own code paths (see each case.json): ignite's first idist call on rank 0 alone syncing its distributed
model from an outside process group (a new gloo group nobody else creates), DeepSpeed's safe_get_full_grad under a
rank-0-only logging branch (an all-reduce on ZeRO's data-parallel group against the others' loss average on the
world group), a Lightning Trainer whose DataLoader worker spins for ever in a rejection-sampling augmentation, and an
HF Trainer whose DataLoader worker inherits, locked, a tokenizer cache lock a warm-up thread held at the fork."""

from pathlib import Path

from tests.hangdoctor.corpus.cases_deepspeed import DS_ENV, _free_port
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# ModelCheckpoint built on rank 0 only (pytorch/ignite#2635, #2035): rank 0 in ignite's context sync
# (_NativeDistModel._compute_nproc_per_node -> dist.new_group(backend="gloo")); ranks 1-2 in the first backward (DDP).
register(LiveCase("feg_ignite_rank0_checkpoint_context_sync",
                  torchrun(3, "feg_ignite_rank0_checkpoint_context_sync.py"), ranks=3, settle=2.0))

# rank-0-only gradient logging with safe_get_full_grad (deepspeedai/DeepSpeed#7117), ZeRO-2 under the `deepspeed`
# runner: rank 0 in get_full_hp_grad's all-reduce on ZeRO's data-parallel group; ranks 1-2 in the loss average's
# all-reduce on the world group.
register(LiveCase("feg_ds_rank0_safe_get_full_grad",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/feg_ds_rank0_safe_get_full_grad.py"), ranks=3, env=DS_ENV, settle=2.0))

# a rejection-sampling 'fog' augmentation that never ends on a thumbnail (pytorch/pytorch#33296, the albumentations
# RandomFog comment), Lightning Trainer DDP, num_workers=1: rank 1 waits in the DataLoader for batch 1 while its
# worker spins; ranks 0 and 2 in batch 1's forward (DDP's bucket rebuild, a collective rank 1 never joins).
register(LiveCase("feg_lightning_worker_fog_aug_spin", torchrun(3, "feg_lightning_worker_fog_aug_spin.py"), ranks=3,
                  settle=3.0))

# a tokenizer whose cache lock a warm-up thread holds when the Trainer's DataLoader forks its worker
# (huggingface/tokenizers#258), HF Trainer DDP, dataloader_num_workers=1: rank 1 waits in the DataLoader for batch 0,
# its worker blocked for ever on the inherited lock; ranks 0 and 2 in step 0's backward (DDP all-reduce).
register(LiveCase("feg_hf_trainer_fork_locked_tokenizer_cache",
                  torchrun(3, "feg_hf_trainer_fork_locked_tokenizer_cache.py"), ranks=3, settle=3.0))
