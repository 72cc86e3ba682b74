"""First-contact batch fep (thirty-third first-contact round, part P): live hangs from PyTorch's own distributed stack
and programs built directly on it (see each case.json): a trainer that reports on a wall-clock timer each rank judges
by itself, a batch_isend_irecv ring whose mask ops are posted by local padding, a prefetch thread that dies on a
truncated record, a (pp, dp) DeviceMesh whose last stage averages its loss on the world group, and a rank 0 whose
interpreter shutdown joins an async logger's pool worker before the atexit barrier."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# wall-clock reporting judged per rank (foundation-model-stack PR #213), DDP + a gloo metrics group, 4 ranks: ranks
# 1-3 in the report's all_reduce (metrics group); rank 0, whose timer started 2 s later, in the next DDP backward.
register(LiveCase("fep_fms_wallclock_report_metrics_group", torchrun(4, "fep_fms_wallclock_report_metrics_group.py"),
                  ranks=4, settle=2.0))

# isend with no matching irecv (pytorch/pytorch#108378), a batch_isend_irecv K/V ring whose mask ops each rank posts by
# its own padding, 3 ranks: rank 2 waits on its unmatched mask ops; ranks 0-1 in the step's barrier.
register(LiveCase("fep_ring_batch_p2p_local_padding_mask", torchrun(3, "fep_ring_batch_p2p_local_padding_mask.py"),
                  ranks=3, settle=2.0))

# a prefetch thread that dies without telling the consumer (meta-pytorch/data PR #1003), 3 ranks: rank 1's main thread
# in queue.get(); ranks 0 and 2 in DDP's backward.
register(LiveCase("fep_torchdata_prefetch_thread_died", torchrun(3, "fep_torchdata_prefetch_thread_died.py"), ranks=3,
                  settle=2.0))

# PP loss on the last stage only (pytorch/torchtitan#550), averaged on the world group, (pp, dp) mesh of 4 ranks:
# ranks 2-3 in the world all_reduce; ranks 0-1 in step 6's send to stage 1.
register(LiveCase("fep_titan_pp_last_stage_world_loss_mean", torchrun(4, "fep_titan_pp_last_stage_world_loss_mean.py"),
                  ranks=4, settle=2.0))

# the pool worker joined at interpreter shutdown before atexit hooks (mlflow/mlflow PR #20577), 3 ranks: rank 0 in
# threading._shutdown joining its logger's worker; ranks 1-2 in the atexit barrier.
register(LiveCase("fep_exit_async_logger_pool_join", torchrun(3, "fep_exit_async_logger_pool_join.py"), ranks=3,
                  settle=2.0))
