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
