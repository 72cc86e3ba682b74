"""First-contact batch fen (thirty-second first-contact round, part N): live hangs in PyTorch's own distributed stack
(see each case.json): a context-parallel loss reduction skipped by the rank whose labels are all ignored, on a 2 x 2
DeviceMesh; FSDP2 + distributed state dict's broadcast_from_rank0 called on rank 0 alone; a TCPStore wait for keys
published under a PrefixStore namespace; a rank spinning in Python while the others wait in monitored_barrier."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# (dp, cp) = (2, 2) mesh; rank 3's labels all ignore_index at the last step, it skips the cp all_reduce
# (OpenRLHF/OpenRLHF PR #583): rank 2 in the cp all_reduce, rank 0 in the dp all_reduce, ranks 1 and 3 in the world
# barrier.
register(LiveCase("fen_cp_loss_skip_all_ignore_labels", torchrun(4, "fen_cp_loss_skip_all_ignore_labels.py"),
                  ranks=4, settle=2.0))

# FSDP2, set_model_state_dict(full_state_dict=True, broadcast_from_rank0=True) under `if rank == 0`
# (pytorch/pytorch#157781): rank 0 in DSD's broadcast (default group); ranks 1-2 in a side group's barrier.
register(LiveCase("fen_dsd_rank0_full_sd_broadcast", torchrun(3, "fen_dsd_rank0_full_sd_broadcast.py"),
                  ranks=3, settle=2.0))

# ready keys published through PrefixStore("prep", store), waited for on the bare store (pytorch/pytorch#53840,
# PR #117049): rank 0 in store.wait; ranks 1-2 in the barrier.
register(LiveCase("fen_store_prefix_ready_keys", torchrun(3, "fen_store_prefix_ready_keys.py"), ranks=3,
                  settle=2.0))

# chunk size len(preds) // (4 * world) is 0 on rank 1's 9 predictions (monitored_barrier, pytorch/pytorch PR #55010):
# rank 1 spins in Python; ranks 0 and 2 in monitored_barrier.
register(LiveCase("fen_monitored_barrier_eval_chunk_spin", torchrun(3, "fen_monitored_barrier_eval_chunk_spin.py"),
                  ranks=3, settle=2.0))

# rank 0 replies with send_object_list only to workers whose request was non-empty (object p2p as in
# pytorch/pytorch#134390): rank 2 in recv_object_list(src=0); ranks 0, 1, 3 in the end-of-round barrier.
register(LiveCase("fen_object_p2p_reply_skipped_empty", torchrun(4, "fen_object_p2p_reply_skipped_empty.py"),
                  ranks=4, settle=2.0))

# the monitoring rank holds its monitor's threading.Lock around backward; the gradient hook takes it again
# (pytorch/pytorch#20355, PR #18568): rank 2 in Lock.acquire inside the hook under backward; ranks 0-1 in backward.
register(LiveCase("fen_ddp_grad_hook_stats_lock", torchrun(3, "fen_ddp_grad_hook_stats_lock.py"), ranks=3,
                  settle=2.0))
