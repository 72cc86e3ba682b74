"""First-contact batch P (ninth first-contact round, part P): live cases from public programs and reports on an
all_gather_object whose pickling waits for a lock a background thread holds, an any-source recv expecting a report
from a rank that had nothing to send, rank 0 busy in a numpy metric over the whole validation set while the others
wait in a barrier, and DistributedSampler padding with a per-rank loop break; and a shape case from a public thread
(see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# Stats tracker gathered with all_gather_object (its __getstate__ takes the tracker's lock), 3 ranks: rank 1's
# flush thread holds the lock waiting for an ack that never comes; rank 1's main thread waits for the lock inside
# all_gather_object's pickling; ranks 0 and 2 wait in all_gather_object's size all_gather.
register(LiveCase("fcp_gather_object_getstate_lock", torchrun(3, "fcp_gather_object_getstate_lock.py"), ranks=3,
                  settle=2.0))

# Coordinator collecting reports with dist.recv(src=None), 3 ranks: rank 2 had nothing to report and skipped its
# send; rank 0 waits in its second any-source recv; ranks 1 and 2 wait in the end-of-round barrier.
register(LiveCase("fcp_recv_any_source_missing_sender", torchrun(3, "fcp_recv_any_source_missing_sender.py"),
                  ranks=3, settle=2.0))

# Rank 0 computes recall@k over the whole validation set in numpy, 3 ranks: rank 0 busy; ranks 1-2 in barrier.
register(LiveCase("fcp_numpy_metric_barrier", torchrun(3, "fcp_numpy_metric_barrier.py"), ranks=3, settle=2.0,
                  env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}))

# DistributedSampler(drop_last=False) padding + a per-rank break after the rank's real samples, 3 ranks: rank 2
# breaks one batch early and waits in the final all_reduce; ranks 0-1 wait in the per-batch all_gather.
register(LiveCase("fcp_sampler_pad_unique_break", torchrun(3, "fcp_sampler_pad_unique_break.py"), ranks=3,
                  settle=2.0))


# Shape case (fixtures/corpus/shapes/fcp_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# NVIDIA/Megatron-LM#2422 (a torch_dist checkpoint save that never ends, files written with no data; py-spy: the
# rank's MainThread in multiprocessing's join of the forked writer, under TemporalAsyncCaller.close <-
# is_current_async_call_done <- maybe_finalize_async_calls <- save (strategies/base.py) <- save (fully_parallel.py)
# <- save (serialization.py)), GPT on 4 GPUs: rank 2's forked checkpoint writer is stuck writing its second shard on
# stalled storage; rank 2 joins it for ever, ranks 0, 1, 3 (writers done) wait in the finalize's gather_object.
register(LiveCase(
    "fcp_megatron_sync_save_writer_stuck",
    in_tree("fcp_megatron_sync_save_writer_stuck",
            f"{shlex.quote(PYTHON)} -m torch.distributed.run --standalone --nproc-per-node=4 pretrain_gpt.py "
            "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --num-layers 24 --hidden-size 2048 "
            "--num-attention-heads 16 --seq-length 4096 --micro-batch-size 1 --global-batch-size 64 --bf16 "
            "--save /checkpoints/gpt --save-interval 100 --ckpt-format torch_dist --ckpt-fully-parallel-save"),
    ranks=4, shape=True, settle=3.0, env=shape_env("fcp_megatron_sync_save_writer_stuck"),
))
