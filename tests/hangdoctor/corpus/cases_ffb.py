"""First-contact batch ffb (thirty-ninth first-contact round, part B): live hangs from PyTorch's own distributed stack
(see each case.json): a pipelined validation whose last stage alone got the loss function (its schedule prepares a
backward and sends gradient metadata no stage receives), FSDP2 gradient accumulation that flushes at each rank's own
epoch end (a short shard reduce-scatters while the others all-gather), local rank 0 downloading hub weights from a
mirror that never answers (urlopen without a timeout), a DDP communication hook whose thread-pool task raised and
never completed the hook's future, a validation prefetch thread parked on a full queue that close() joins, and a
build-once cache whose builder election (TCPStore.compare_set) no rank wins in its own reading: every rank waits on
the store."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# torch.distributed.pipelining validation, loss_fn on the last stage only (pytorch/pytorch PR #157795): rank 2 in
# send_object_list (backward metadata to stage 1), rank 1 waiting for its forward sends, rank 0 in the loss all_reduce.
register(LiveCase("ffb_pp_eval_loss_fn_last_stage_backward",
                  torchrun(3, "ffb_pp_eval_loss_fn_last_stage_backward.py"), ranks=3, settle=2.0))

# FSDP2 set_requires_gradient_sync with an epoch-end flush on rank-local loader lengths (huggingface/accelerate#1847's
# rule, PyTorch alone): rank 2 in the post-backward reduce-scatter, ranks 0-1 in a backward-prefetch all-gather.
register(LiveCase("ffb_fsdp2_accum_epoch_end_flush_short_shard",
                  torchrun(3, "ffb_fsdp2_accum_epoch_end_flush_short_shard.py"), ranks=3, settle=3.0))

# torch.hub.load_state_dict_from_url on local rank 0 against a mirror that accepts and never answers
# (torchgeo/torchgeo#4067): rank 0 in a socket read under urlopen, ranks 1-2 in the barrier.
register(LiveCase("ffb_hub_weights_local_main_first_stalled_mirror",
                  torchrun(3, "ffb_hub_weights_local_main_first_stalled_mirror.py"), ranks=3, settle=2.0))

# DDP comm hook handing its work to a ThreadPoolExecutor whose exception is lost (python/cpython#120508): every main
# thread at the end of backward; ranks 0, 2's pool threads in all_reduce, rank 1's idle.
register(LiveCase("ffb_ddp_comm_hook_pool_lost_exception",
                  torchrun(3, "ffb_ddp_comm_hook_pool_lost_exception.py"), ranks=3, settle=2.0))

# torch.multiprocessing.spawn; a validation prefetch thread parked in Queue.put on a full buffer, joined by close()
# after limit_val_batches (fgnt/lazy_dataset PR #58): rank 2 in Thread.join, ranks 0-1 in the val-loss all_reduce.
register(LiveCase("ffb_spawn_val_prefetch_cancel_join",
                  (PYTHON, "{fixtures}/ffb_spawn_val_prefetch_cancel_join.py"), ranks=3, settle=2.0))

# a build-once cache elected with TCPStore.compare_set, its result read as the old value (pytorch/pytorch PR #52696):
# no rank builds; all three ranks in store.wait() for the ready key (no Python frame for the wait itself).
register(LiveCase("ffb_store_compare_set_builder_misread",
                  torchrun(3, "ffb_store_compare_set_builder_misread.py"), ranks=3, settle=2.0))
